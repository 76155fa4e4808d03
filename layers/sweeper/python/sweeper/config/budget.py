"""A limit's `budget`: calls per window (a day, a rolling 24 h), spread evenly, a share kept.

    budget = { limit = 100000 }                                      # per UTC day
    budget = { limit = 100000, window = "rolling", reserve_fraction = 0.2 }   # Salesforce
    budget = { limit = 6000, period_seconds = 3600, offset_seconds = 1800 }  # hours from :30

A fixed window starts at whole multiples of `period_seconds` from the epoch, shifted by
`offset_seconds` (a day from 00:00 UTC has offset 0); a rolling window counts the last
`period_seconds` before each call. sweeper spends at most `limit x (1 - reserve_fraction)`
calls in any window (the rest is the team's own), paced evenly (sweeper.admission.budget).
"""

from __future__ import annotations

import math
from typing import Literal, Self

from pydantic import Field, model_validator

from sweeper.config.base import _Strict

#: A day, the window most vendors count a budget over.
DAY_SECONDS = 86_400.0
#: The longest budget window: a month of 31 days.
MAX_BUDGET_PERIOD_SECONDS = 31 * DAY_SECONDS

BudgetWindow = Literal["fixed", "rolling"]


class BudgetConfig(_Strict):
    """`limit` calls per `period_seconds` (fixed or rolling), of which sweeper leaves
    `reserve_fraction` untouched."""

    limit: int = Field(ge=1, le=1_000_000_000)
    period_seconds: float = Field(default=DAY_SECONDS, ge=1.0, le=MAX_BUDGET_PERIOD_SECONDS)
    window: BudgetWindow = "fixed"
    reserve_fraction: float = Field(default=0.0, ge=0.0, lt=1.0)
    #: Where a fixed window starts, after each whole multiple of the period from the epoch.
    offset_seconds: float = Field(default=0.0, ge=0.0)

    @model_validator(mode="after")
    def _spendable(self) -> Self:
        if self.offset_seconds >= self.period_seconds:
            raise ValueError("budget.offset_seconds must be less than budget.period_seconds")
        if self.offset_seconds and self.window == "rolling":
            raise ValueError('budget.offset_seconds places a fixed window: window = "fixed"')
        if self.spendable < 1:
            raise ValueError(
                f"budget: reserve_fraction {self.reserve_fraction} of {self.limit} leaves "
                "sweeper no call; lower it"
            )
        return self

    @property
    def spendable(self) -> int:
        """The most calls sweeper makes in one window: the limit less the reserve, rounded
        down (the reserve is never spent)."""
        return math.floor(self.limit * (1.0 - self.reserve_fraction) + 1e-9)

    def describe(self) -> str:
        """As `status`, the console and the plan show it: "480 of 600 per 60 s (fixed)"."""
        return (
            f"{self.spendable} of {self.limit} per {self.period_seconds:g} s budget ({self.window})"
        )

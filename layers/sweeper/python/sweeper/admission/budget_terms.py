"""A budget's terms: its even pace for the claim, the status and the plan; when a backlog drains.

The budget's admission is budget.py (a wrapper: one unit of the window's item per call, at its
slot, sweeper.limiter.budget); this is what a limit's `budget` says outside the consumer
(sweeper.admission.terms). Planned from the start of a window with nothing spent, one key
allows `spendable / period` calls per second on average; a backlog of a key's calls beyond one
window's `spendable` waits for the windows after it (`vendor_limits.pace.budget_drain`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Self

from sweeper.admission.terms import PlanTerm, Slack
from sweeper.config import LimitConfig
from sweeper.config.budget import BudgetConfig
from sweeper.config.regimes import Arm, BudgetArm
from sweeper.vendor_limits.pace import budget_drain


@dataclass(frozen=True, slots=True)
class BudgetTerm:
    """A limit's budget: `spendable` calls of a key per window, paced evenly."""

    budget: BudgetConfig
    ARM: ClassVar[type[Arm]] = BudgetArm
    FIGURES: ClassVar[tuple[str, ...]] = ("budget_per_window", "budget_window_seconds")

    @classmethod
    def of(cls, limit: LimitConfig) -> Self | None:
        arm = limit.arm(BudgetArm)
        return None if arm is None else cls(arm.budget)

    @property
    def _per_second(self) -> float:
        return self.budget.spendable / self.budget.period_seconds

    def claim_per_second(self, latency_p50: float | None) -> float | None:
        return self._per_second

    def allows(self) -> str:
        return self.budget.describe()

    def plan(self, mean_service: float | None) -> PlanTerm:
        figures = {
            "budget_per_window": self.budget.spendable,
            "budget_window_seconds": self.budget.period_seconds,
        }
        note = f" ({self.budget.describe()})"
        return PlanTerm(self._per_second, "budget", note, figures)

    def slack(self, limit: str) -> Slack | None:
        return None

    def drain(self, limit: str, backlog_per_key: int) -> str | None:
        budget = self.budget
        drain = budget_drain(
            backlog=backlog_per_key,
            budget=budget.limit,
            reserve=budget.limit - budget.spendable,
            others_per_window=0.0,
            window_seconds=budget.period_seconds,
            allowance_now=budget.spendable,
            seconds_left=budget.period_seconds,
        )
        assert drain.seconds is not None  # sweeper's share is at least one call a window
        windows = math.ceil(backlog_per_key / budget.spendable)
        when = f"in {_duration(drain.seconds)} at its even pace"
        if drain.within_window:
            return (
                f"budget of limit {limit}: a backlog of {backlog_per_key} calls a key drains "
                f"within one window, {when}"
            )
        return (
            f"budget of limit {limit}: a backlog of {backlog_per_key} calls a key cannot be "
            f"drained within one window ({budget.describe()}); it drains {when}, "
            f"in its {_ordinal(windows)} window"
        )

    def pacing(self) -> None:
        return None

    @staticmethod
    def plan_line(figures: Mapping[str, Any], mean_service: float) -> str | None:
        calls = figures.get("budget_per_window")
        if calls is None:
            return None
        return f"{calls} per {figures.get('budget_window_seconds'):g} s budget"


def _duration(seconds: float) -> str:
    if seconds >= 2 * 86_400:
        return f"{seconds / 86_400:.1f} days"
    if seconds >= 2 * 3600:
        return f"{seconds / 3600:.1f} h"
    if seconds >= 120:
        return f"{seconds / 60:.1f} min"
    return f"{seconds:.1f} s"


def _ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"

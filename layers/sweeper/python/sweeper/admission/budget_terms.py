"""A budget's terms: its even pace for the claim and the status.

The budget's admission is budget.py (a wrapper: one unit of the window's item per call, at its
slot, sweeper.limiter.budget); this is what a limit's `budget` says outside the consumer
(sweeper.admission.terms). Planned from the start of a window with nothing spent, one key
allows `spendable / period` calls per second on average.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Self

from sweeper.admission.terms import LimiterItem
from sweeper.config import LimitConfig
from sweeper.config.budget import BudgetConfig
from sweeper.config.regimes import Arm, BudgetArm
from sweeper.limiter.keys import BUDGET_KEY_PREFIX


@dataclass(frozen=True, slots=True)
class BudgetTerm:
    """A limit's budget: `spendable` calls of a key per window, paced evenly."""

    budget: BudgetConfig
    ARM: ClassVar[type[Arm]] = BudgetArm
    #: Its count, one item per key and window (sweeper.limiter.budget).
    ITEMS: ClassVar[tuple[LimiterItem, ...]] = (LimiterItem(BUDGET_KEY_PREFIX),)

    @classmethod
    def of(cls, limit: LimitConfig) -> Self | None:
        arm = limit.arm(BudgetArm)
        return None if arm is None else cls(arm.budget)

    def claim_per_second(self, latency_p50: float | None) -> float | None:
        return self.budget.spendable / self.budget.period_seconds

    def allows(self) -> str:
        return self.budget.describe()

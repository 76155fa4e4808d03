"""A rate's terms: its calls per second, headroom applied, for the claim and the status.

The rate regime's admission is rate.py (its slots banked per batch in bank.py); this is what a
limit's `rate` says outside the consumer (sweeper.admission.terms).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Self

from sweeper.admission.terms import GATE_ITEM, LimiterItem
from sweeper.config import LimitConfig, Quota
from sweeper.config.regimes import Arm, RateArm


@dataclass(frozen=True, slots=True)
class RateTerm:
    """A limit's rate: `quota` calls a period per key."""

    quota: Quota
    #: The points a call costs (`quota` is then in calls: the points over the cost).
    cost: int = 1
    ARM: ClassVar[type[Arm]] = RateArm
    #: Its bucket, on the item of the limit's gate.
    ITEMS: ClassVar[tuple[LimiterItem, ...]] = (GATE_ITEM,)

    @classmethod
    def of(cls, limit: LimitConfig) -> Self | None:
        arm = limit.arm(RateArm)
        rate = limit.call_rate  # the arm's points in calls (a learned cost's reserve counted)
        return None if arm is None or rate is None else cls(rate, arm.cost_per_call)

    def claim_per_second(self, latency_p50: float | None) -> float | None:
        return self.quota.rate_per_second

    def allows(self) -> str:
        adaptive = " (adaptive)" if self.quota.adaptive else ""
        points = f" ({self.cost} points each)" if self.cost > 1 else ""
        return f"{self.quota.limit} calls per {self.quota.period_seconds:g} s{points}{adaptive}"

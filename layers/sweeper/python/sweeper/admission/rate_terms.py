"""A rate's terms: its calls per second, headroom applied, for the claim, the status and the plan.

The rate regime's admission is rate.py (its slots banked per batch in bank.py); this is what a
limit's `rate` says outside the consumer (sweeper.admission.terms).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Self

from sweeper.admission.terms import PlanTerm, Slack
from sweeper.config import LimitConfig, Quota
from sweeper.config.regimes import Arm, RateArm
from sweeper.pacing_rule import Pacing


@dataclass(frozen=True, slots=True)
class RateTerm:
    """A limit's rate: `quota` calls a period per key."""

    quota: Quota
    #: The points a call costs (`quota` is then in calls: the points over the cost).
    cost: int = 1
    ARM: ClassVar[type[Arm]] = RateArm
    FIGURES: ClassVar[tuple[str, ...]] = ("rate_per_second",)

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

    def plan(self, mean_service: float | None) -> PlanTerm:
        rate = self.quota.rate_per_second
        return PlanTerm(rate, "rate", "", {"rate_per_second": round(rate, 3)})

    def slack(self, limit: str) -> Slack | None:
        if not self.quota.slack_seconds:
            return None
        plain = self.quota.model_copy(update={"slack_seconds": 0.0})
        return Slack(
            limit, self.quota.slack_seconds, self.quota.rate_per_second, plain.rate_per_second
        )

    def drain(self, limit: str, backlog_per_key: int) -> str | None:
        return None

    def pacing(self) -> Pacing | None:
        return self.quota.pacing()

    @staticmethod
    def plan_line(figures: Mapping[str, Any], mean_service: float) -> str | None:
        rate = figures.get("rate_per_second")
        return None if rate is None else f"{rate}/s"

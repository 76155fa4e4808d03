"""A concurrency cap's terms: N calls at the vendor at once per key, by Little's law a rate.

The cap's admission is concurrency.py (leases, handed on within a batch in handoff.py); this
is what a limit's `max_in_flight` says outside the consumer (sweeper.admission.terms): a cap of
N allows N / the service time calls per second, known only where a latency is planned.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Self

from sweeper.admission.terms import PlanTerm, Slack
from sweeper.config import LimitConfig
from sweeper.config.regimes import Arm, CapArm


@dataclass(frozen=True, slots=True)
class CapTerm:
    """A limit's cap: `calls` at the vendor at once per key, fleet-wide."""

    calls: int
    ARM: ClassVar[type[Arm]] = CapArm
    FIGURES: ClassVar[tuple[str, ...]] = ("max_in_flight", "in_flight_per_second")

    @classmethod
    def of(cls, limit: LimitConfig) -> Self | None:
        arm = limit.arm(CapArm)
        return None if arm is None else cls(arm.max_in_flight)

    def claim_per_second(self, latency_p50: float | None) -> float | None:
        return None if latency_p50 is None else self.calls / latency_p50

    def allows(self) -> str:
        return f"{self.calls} in flight"

    def plan(self, mean_service: float | None) -> PlanTerm:
        per_second = None if mean_service is None else self.calls / mean_service
        shown = None if per_second is None else round(per_second, 2)
        figures = {"max_in_flight": self.calls, "in_flight_per_second": shown}
        return PlanTerm(per_second, "in flight", f" ({self.calls} in flight)", figures)

    def slack(self, limit: str) -> Slack | None:
        return None

    def drain(self, limit: str, backlog_per_key: int) -> str | None:
        return None

    def pacing(self) -> None:
        return None

    @staticmethod
    def plan_line(figures: Mapping[str, Any], mean_service: float) -> str | None:
        calls = figures.get("max_in_flight")
        if calls is None:
            return None
        flight = figures.get("in_flight_per_second")
        return f"{calls} in flight" + (
            "" if flight is None else f" / {mean_service} s = {flight}/s"
        )

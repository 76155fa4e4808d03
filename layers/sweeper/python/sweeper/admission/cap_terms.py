"""A concurrency cap's terms: N calls at the vendor at once per key, by Little's law a rate.

The cap's admission is concurrency.py (leases, handed on within a batch in handoff.py); this
is what a limit's `max_in_flight` says outside the consumer (sweeper.admission.terms): a cap of
N allows N / the service time calls per second, known only where a latency is planned.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Self

from sweeper.admission.terms import LimiterItem
from sweeper.config import LimitConfig
from sweeper.config.regimes import Arm, CapArm
from sweeper.limiter.keys import LEASE_KEY_PREFIX


@dataclass(frozen=True, slots=True)
class CapTerm:
    """A limit's cap: `calls` at the vendor at once per key, fleet-wide."""

    calls: int
    ARM: ClassVar[type[Arm]] = CapArm
    #: Its leases (sweeper.limiter.leases).
    ITEMS: ClassVar[tuple[LimiterItem, ...]] = (LimiterItem(LEASE_KEY_PREFIX),)

    @classmethod
    def of(cls, limit: LimitConfig) -> Self | None:
        arm = limit.arm(CapArm)
        return None if arm is None else cls(arm.max_in_flight)

    def claim_per_second(self, latency_p50: float | None) -> float | None:
        return None if latency_p50 is None else self.calls / latency_p50

    def allows(self) -> str:
        return f"{self.calls} in flight"

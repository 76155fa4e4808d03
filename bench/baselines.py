"""The benchmark's baselines: two limiters that production never uses.

The rate benchmark measures the shared limiter against what a fleet of consumers would do
without it: `PerWorkerLimiter` spaces each worker's calls at quota / workers with no gate (a
per-worker rate limit, as Celery's), `NoLimiter` leaves reserved concurrency as the only limit.
They speak the `Limiter` protocol so the consumer runs on them unchanged; only the local stack
may run one (`sweeper_bench.baseline_consumer`): the Lambda layer holds neither.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from sweeper.adaptive_rate import Adaptive
from sweeper.limiter.base import Denial, Grant, Reason, ScopeState


class PerWorkerLimiter:
    """Benchmark baseline: each worker spaces its own calls at quota / workers, and no gate.

    This is what a per-worker rate limit (Celery's) does; it is never used in production.
    """

    def __init__(self, workers: int, *, clock: Callable[[], float] = time.time) -> None:
        self._workers = workers
        self._clock = clock
        self._next: dict[str, float] = {}

    def reserve(
        self,
        scope: str,
        interval: float,
        horizon: float,
        count: int = 1,
        adaptive: Adaptive | None = None,
        *,
        slack: float = 0.0,  # its slots are now: nothing to cut
        tolerance: float = 0.0,  # no burst: a baseline spaces (or grants) as it always did
    ) -> Grant | Denial:
        now = self._clock()
        slot = max(self._next.get(scope, now), now)
        if slot - now > horizon:
            return Denial(slot - horizon, "rate")
        self._next[scope] = slot + interval * self._workers
        return Grant(slot)  # one slot at a time, whatever was asked

    def close(self, scope: str, until: float, reason: Reason) -> float:
        return until  # no shared gate: each worker learns of a closure by being throttled

    def cut(self, scope: str, adaptive: Adaptive) -> float:
        return adaptive.floor  # no shared rate

    def state(self, scope: str) -> ScopeState:
        return ScopeState(scope, self._next.get(scope), None, None, None)


class NoLimiter:
    """Benchmark baseline: the concurrency cap alone (reserved concurrency as the only limit)."""

    def __init__(self, *, clock: Callable[[], float] = time.time) -> None:
        self._clock = clock

    def reserve(
        self,
        scope: str,
        interval: float,
        horizon: float,
        count: int = 1,
        adaptive: Adaptive | None = None,
        *,
        slack: float = 0.0,  # its slots are now: nothing to cut
        tolerance: float = 0.0,  # no burst: a baseline spaces (or grants) as it always did
    ) -> Grant | Denial:
        return Grant(self._clock(), max(1, count))  # every slot is now

    def close(self, scope: str, until: float, reason: Reason) -> float:
        return until

    def cut(self, scope: str, adaptive: Adaptive) -> float:
        return adaptive.cap  # no rate at all

    def state(self, scope: str) -> ScopeState:
        return ScopeState(scope, None, None, None, None)

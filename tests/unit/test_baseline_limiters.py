"""The benchmark's baseline limiters (never used in production) do what the benchmark claims."""

from sweeper.limiter import Denial, Grant, NoLimiter, PerWorkerLimiter, ScopeState


def test_a_per_worker_limiter_spaces_its_own_calls_at_quota_over_workers() -> None:
    now = [100.0]
    limiter = PerWorkerLimiter(4, clock=lambda: now[0])
    assert limiter.reserve("s", 0.25, horizon=5) == Grant(100.0)
    assert limiter.reserve("s", 0.25, horizon=5) == Grant(101.0)
    assert limiter.reserve("s", 0.25, horizon=0.5) == Denial(101.5, "rate")
    assert limiter.state("s") == ScopeState("s", 102.0, None, None, None)
    assert limiter.state("other") == ScopeState("other", None, None, None, None)
    now[0] = 200.0  # idle: the next slot is now again
    assert limiter.reserve("s", 0.25, horizon=0) == Grant(200.0)
    # no shared gate: a closure is not recorded
    assert limiter.close("s", 300.0, "throttled") == 300.0
    assert limiter.state("s").closed_until is None


def test_no_limiter_grants_every_slot_now() -> None:
    limiter = NoLimiter(clock=lambda: 7.0)
    assert limiter.reserve("s", 1.0, horizon=0) == Grant(7.0)
    assert limiter.reserve("s", 1.0, horizon=0, count=3) == Grant(7.0, 3)  # a block, all now
    assert limiter.close("s", 9.0, "auth") == 9.0
    assert limiter.state("s") == ScopeState("s", None, None, None, None)

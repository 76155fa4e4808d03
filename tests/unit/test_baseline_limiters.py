"""The benchmark's baseline limiters (never used in production) do what the benchmark claims."""

import inspect

import pytest

from sweeper import runtime
from sweeper.limiter import Denial, Grant, ScopeState
from sweeper.limiter.base import Limiter
from sweeper_bench import baseline_consumer
from sweeper_bench.baselines import NoLimiter, PerWorkerLimiter
from sweeper_local.lambda_runtime import load_handler


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


def test_a_baseline_consumer_asks_its_baseline_for_slots(monkeypatch: pytest.MonkeyPatch) -> None:
    # Given an environment of the rate benchmark's per-worker consumer, 4 workers in the run
    monkeypatch.setattr(runtime, "consumer_limiter", runtime.consumer_limiter)  # put back after
    monkeypatch.setenv(baseline_consumer.WORKERS_VARIABLE, "4")
    baseline_consumer.install.cache_clear()
    # When its first batch installs the baseline
    baseline_consumer.install("per_worker")
    limiter = runtime.consumer_limiter()
    # Then the consumer asks the per-worker baseline, spacing its calls at 4 x the interval
    assert isinstance(limiter, PerWorkerLimiter)
    first, second = limiter.reserve("s", 0.25, horizon=5), limiter.reserve("s", 0.25, horizon=5)
    assert isinstance(first, Grant)
    assert isinstance(second, Grant)
    assert second.slot_at - first.slot_at == pytest.approx(1.0)
    baseline_consumer.install.cache_clear()


def test_the_benchmark_names_a_handler_for_each_limiter_mode() -> None:
    # Each baseline's name resolves to a handler, as the local runtime loads it
    assert baseline_consumer.HANDLERS["shared"] == "consumer"
    for mode in ("per_worker", "off"):
        assert callable(load_handler(baseline_consumer.HANDLERS[mode]))
    assert isinstance(baseline_consumer.baseline("off"), NoLimiter)


@pytest.mark.parametrize("baseline", [PerWorkerLimiter, NoLimiter])
def test_a_baseline_takes_every_argument_the_limiter_protocol_names(
    baseline: type[PerWorkerLimiter | NoLimiter],
) -> None:
    # The consumer calls reserve with the protocol's keywords (slack, tolerance): a baseline
    # missing one fails every reservation, and the benchmark's run settles nothing.
    wanted = list(inspect.signature(Limiter.reserve).parameters)
    assert list(inspect.signature(baseline.reserve).parameters) == wanted

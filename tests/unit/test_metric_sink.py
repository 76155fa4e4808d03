"""The in-memory metric sink is as strict about units as the production one (Powertools); the
summing sink hands Powertools one value per count name, and every other value as it comes."""

from __future__ import annotations

import json
import sys
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest
from aws_lambda_powertools import Metrics
from aws_lambda_powertools.metrics.exceptions import MetricUnitError

from sweeper.observability import Metric, SummedCounts, add_counts
from sweeper_local.metric_totals import CountingSink


@pytest.mark.parametrize("unit", ["Count", "Seconds", "Milliseconds"])
def test_a_cloudwatch_unit_is_counted(unit: str) -> None:
    sink = CountingSink()
    sink.add_metric("Calls", unit, 2)
    sink.add_metric("Calls", unit, 1)
    assert sink.totals == {"Calls": 3.0}


@pytest.mark.parametrize("unit", ["count", "COUNT", "XXCountXX", "calls"])
def test_a_unit_powertools_refuses_is_refused_here_too(unit: str) -> None:
    with pytest.raises(MetricUnitError):
        Metrics(namespace="Test").add_metric("Calls", unit, 1)
    with pytest.raises(ValueError, match="not a CloudWatch unit"):
        CountingSink().add_metric("Calls", unit, 1)


def test_a_metric_without_a_unit_is_refused() -> None:
    with pytest.raises(ValueError, match="not a CloudWatch unit"):
        CountingSink().add_metric("Calls", None, 1)  # type: ignore[arg-type]


# -- SummedCounts: one value per count name per invocation, as cheap for Powertools as it gets --


class EmittedSink:
    """Every metric as it reaches the sink, in order; notices two threads inside at once."""

    def __init__(self, dwell_seconds: float = 0.0) -> None:
        self.emitted: list[tuple[str, str, float]] = []
        self.overlaps = 0
        self._inside = 0
        self._dwell_seconds = dwell_seconds
        self._guard = threading.Lock()

    def add_metric(self, name: str, unit: str, value: float) -> None:
        with self._guard:
            self._inside += 1
            self.overlaps += self._inside > 1
        time.sleep(self._dwell_seconds)  # a window for another thread to come in, were it let
        self.emitted.append((name, unit, value))
        with self._guard:
            self._inside -= 1


def _from_threads(threads: int, each: Callable[[], None]) -> None:
    """Run `each` on `threads` threads released together."""
    start = threading.Barrier(threads)

    def run() -> None:
        start.wait()
        each()

    with ThreadPoolExecutor(max_workers=threads) as pool:
        for done in [pool.submit(run) for _ in range(threads)]:
            done.result()


class SwitchingName(str):
    """A metric name whose hash runs Python code: a thread can be switched out between reading
    a sum and writing it back (with a plain str the two happen to be one step of the GIL)."""

    def __hash__(self) -> int:
        return str.__hash__(self)


@pytest.fixture
def eager_switching() -> Iterator[None]:
    """Threads switch every microsecond, so an unguarded read-add-write loses updates."""
    before = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    yield
    sys.setswitchinterval(before)


def test_counts_from_several_threads_reach_the_inner_sink_as_one_sum_when_flushed(
    eager_switching: None,
) -> None:
    # Given a summing sink shared by eight threads, each counting 2,000 successes
    inner = EmittedSink()
    counts = SummedCounts(inner)
    name = SwitchingName(Metric.SUCCEEDED)

    def count() -> None:
        for _ in range(2_000):
            counts.add_metric(name, "Count", 1)

    _from_threads(8, count)
    # Then nothing has reached the inner sink yet
    assert inner.emitted == []
    # When the counts are flushed, one value holds them all, none lost
    counts.flush()
    assert inner.emitted == [(Metric.SUCCEEDED, "Count", 16_000.0)]
    # and a second flush has nothing more to hand on
    counts.flush()
    assert len(inner.emitted) == 1


def test_a_metric_in_another_unit_passes_through_at_once_one_thread_at_a_time() -> None:
    # Given a summing sink shared by four threads, in front of a sink that is not thread-safe
    inner = EmittedSink(dwell_seconds=0.001)
    counts = SummedCounts(inner)

    def report() -> None:
        for _ in range(5):
            counts.add_metric(Metric.PROCESSING_SECONDS, "Seconds", 0.5)

    # When each thread reports processing times
    _from_threads(4, report)
    # Then every value reached the inner sink unsummed, before any flush, one call at a time
    assert inner.emitted == [(Metric.PROCESSING_SECONDS, "Seconds", 0.5)] * 20
    assert inner.overlaps == 0


def test_a_count_read_with_maximum_by_its_alarm_is_not_summed() -> None:
    # Given a summing sink
    inner = EmittedSink()
    counts = SummedCounts(inner)
    # When two auth circuits open in one batch
    counts.add_metric(Metric.AUTH_CIRCUIT_OPEN, "Count", 1)
    counts.add_metric(Metric.AUTH_CIRCUIT_OPEN, "Count", 1)
    # Then each reaches the inner sink as it was added: its alarm's Maximum stays 1
    assert inner.emitted == [(Metric.AUTH_CIRCUIT_OPEN, "Count", 1)] * 2
    counts.flush()
    assert len(inner.emitted) == 2


def test_leaving_the_block_by_an_error_still_hands_on_the_counts() -> None:
    # Given counts added inside the block
    inner = EmittedSink()

    def failing_batch() -> None:
        with SummedCounts(inner) as counts:
            counts.add_metric(Metric.RETRIES, "Count", 1)
            counts.add_metric(Metric.RETRIES, "Count", 2)
            raise RuntimeError("the batch failed")

    # When the block raises
    with pytest.raises(RuntimeError):
        failing_batch()
    # Then what was counted was handed on
    assert inner.emitted == [(Metric.RETRIES, "Count", 3.0)]


def test_powertools_prints_one_document_with_one_value_per_count_name(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # Given Powertools' Metrics behind a summing sink
    metrics = Metrics(namespace="Test")
    # When a batch counts 150 attempts, past Powertools' 100 values per metric
    with SummedCounts(metrics) as counts:
        for _ in range(150):
            counts.add_metric(Metric.SUCCEEDED, "Count", 1)
    # Then Powertools printed nothing mid-batch (it prints a full metric set at 100 values)
    assert capsys.readouterr().out == ""
    # and its one document holds the sum as one value
    metrics.flush_metrics()
    (document,) = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert document[Metric.SUCCEEDED] == [150.0]


def test_a_runs_counts_are_added_only_when_not_zero() -> None:
    # Given a run's counts, some of them zero
    sink = CountingSink()
    # When they are added
    add_counts(sink, [(Metric.PUBLISHED, 0), (Metric.RECLAIMED, 3), (Metric.RELEASED, 0.0)])
    # Then only the count that is not zero reaches the sink (a zero is billed like a value)
    assert sink.totals == {Metric.RECLAIMED: 3.0}

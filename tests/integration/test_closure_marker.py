"""The latest closure's marker (`closures#latest`, sweeper.limiter.closures): the readers of the
closed gates (the watching redrive, the producer) read it first and Scan the limiter table only
when a closure ends after the instant they ask about; every gate close raises it, never lowers it.

Requests are counted on the real client (`recording`), against the DynamoDB stand-in (or moto);
a watching redrive that finds a gate closed lately Scans
(test_redrive_auto.py::test_an_empty_dlq_is_watched_when_a_gate_reopened_lately).
"""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from functions.redrive import app as redrive_app
from sweeper import runtime
from sweeper.config import Policy
from sweeper.ledger.store import Ledger
from sweeper.limiter import DynamoLimiter, closed_scopes
from sweeper.limiter.closures import latest_closure
from sweeper.models import JobMessage, NewJob
from sweeper.producer.run import run_producer
from sweeper_local.aws import LocalAws
from tests.conftest import Pipeline, load_event
from tests.fakes import FakePublisher
from tests.integration.test_redrive_auto import (
    WallClock,
    automatic_in_functions,
    close_gate,
    recording,
    watching,
)

pytestmark = pytest.mark.integration

T0 = datetime(2026, 12, 7, 2, 0, tzinfo=UTC)


# -- the watching redrive ------------------------------------------------------------------------


def test_an_idle_watching_redrive_reads_the_marker_and_scans_nothing(
    pipeline: Pipeline, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given the policy's automatic redrive, an empty DLQ and no gate ever closed
    automatic_in_functions(pipeline, monkeypatch)
    sent = recording(runtime.dynamodb_client())
    # When its schedule runs the redrive function
    report = redrive_app.handler(
        load_event("scheduler_event.json"), pipeline.lambda_context("redrive")
    )
    # Then it returned at once, having read the marker (one GetItem) and scanned nothing
    assert report["stop_reason"] == "empty"
    assert "Scan" not in sent
    assert sent == ["GetItem"]


def test_a_closure_ended_before_the_runs_minute_stops_the_scans(pipeline: Pipeline) -> None:
    # Given an empty DLQ and the scope's gate, reopened two minutes ago
    clock = WallClock()
    close_gate(pipeline, clock.epoch - 120)
    client = pipeline.aws.dynamodb()
    sent = recording(client)
    # When a scheduled run looks
    report, dlq = watching(pipeline, clock, client)
    # Then it returned at once on the marker alone
    assert (report.stop_reason, dlq.receives, clock.slept) == ("empty", 0, [])
    assert sent == ["GetItem"]


# -- the producer --------------------------------------------------------------------------------


def seed(ledger: Ledger) -> None:
    """Three rows each of tenants t0 and t1 (each its own scope), all due before T0."""
    jobs = [NewJob(f"t{t}", f"o{i}", T0 - timedelta(seconds=i)) for t in (0, 1) for i in range(3)]
    ledger.schedule("exports", 1, lambda j: j.tenant_id, jobs, T0)


def produce(ledger: Ledger, client: Any, table: str, now: float) -> FakePublisher:
    """One producer run reading the closed scopes as the function does (runtime's reader)."""
    publisher = FakePublisher()
    run_producer(
        Policy(name="exports"),
        T0,
        ledger,
        publisher,
        clock=lambda: T0,
        remaining_seconds=lambda: 100.0,
        closed_scopes=lambda: closed_scopes(client, table, now),
    )
    return publisher


def test_an_idle_producer_reads_the_marker_and_scans_nothing(
    ledger: Ledger, local_aws: LocalAws, table: str
) -> None:
    # Given due rows and no gate ever closed
    seed(ledger)
    client = local_aws.dynamodb()
    sent = recording(client)
    # When the producer runs
    publisher = produce(ledger, client, table, time.time())
    # Then it released every row, having read the marker before each claim and never scanned
    assert len(publisher.sent) == 6
    assert sent
    assert set(sent) == {"GetItem"}


def test_a_producer_scans_while_a_gate_is_closed_and_passes_over_its_scope(
    ledger: Ledger, local_aws: LocalAws, table: str
) -> None:
    # Given due rows and t0's gate closed for a minute
    seed(ledger)
    now = time.time()
    DynamoLimiter(local_aws.dynamodb(), table).close("t0", now + 60, "throttled")
    client = local_aws.dynamodb()
    sent = recording(client)
    # When the producer runs
    publisher = produce(ledger, client, table, now)
    # Then it scanned, found t0 closed and released t1's rows only
    tenants = {JobMessage.model_validate_json(m.body).tenant_id for m in publisher.sent}
    assert tenants == {"t1"}
    assert "Scan" in sent


def test_a_closure_whose_end_has_passed_stops_the_producers_scans(
    local_aws: LocalAws, table: str
) -> None:
    # Given a gate closed until a moment that has passed
    now = time.time()
    DynamoLimiter(local_aws.dynamodb(), table).close("t0", now + 5, "throttled")
    client = local_aws.dynamodb()
    sent = recording(client)
    # When the producer's view is read during the closure, and after its end
    during = closed_scopes(client, table, now)
    after = closed_scopes(client, table, now + 6)
    # Then the first scanned and named it; the second read the marker alone
    assert (during, after) == ({"t0"}, set())
    assert sent == ["GetItem", "Scan", "GetItem"]


# -- the marker ----------------------------------------------------------------------------------

CLOSES = st.lists(
    st.tuples(st.integers(0, 1), st.sampled_from(["a", "b", "c"]), st.integers(-300, 300)),
    min_size=1,
    max_size=12,
)


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(closes=CLOSES)
def test_the_marker_never_moves_earlier_over_interleaved_closes(
    local_aws: LocalAws, table: str, closes: list[tuple[int, str, int]]
) -> None:
    # Given two consumers (each its own client and limiter) closing gates in any order, for
    # any lengths, shorter than what is closed already or longer
    closers = [DynamoLimiter(local_aws.dynamodb(), table) for _ in range(2)]
    reader = local_aws.dynamodb()
    base = time.time()
    seen = latest_closure(reader, table) or 0.0
    for who, scope, offset in closes:
        until = round(base + offset, 3)
        # When one of them closes a gate
        closers[who].close(scope, until, "throttled")
        # Then the marker is the latest end of every closure so far: never earlier than it was
        latest = latest_closure(reader, table)
        assert latest is not None
        assert latest >= seen
        assert latest == pytest.approx(max(seen, until), abs=1e-5)
        seen = latest

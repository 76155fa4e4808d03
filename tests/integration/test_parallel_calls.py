"""A batch's records called side by side (`consumer.parallel_calls`), over the real local services.

The consumer handler runs as on AWS (functions/consumer/app.py) against the vendor simulator,
moto and the ledger; the simulator counts the calls it holds at once.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest

from functions.consumer import app as consumer_app
from sweeper import runtime
from sweeper.config import Policy
from sweeper.ledger.store import Ledger
from sweeper.models import JobMessage, JobStatus, NewJob, OutcomeClass, operation_key
from sweeper.scheduling import schedule_jobs
from sweeper_local.vendor import VendorSimulator
from tests.conftest import Pipeline
from tests.integration.test_consumer import failed_ids, publish_all

pytestmark = pytest.mark.integration


@pytest.fixture
def slow_vendor() -> Iterator[VendorSimulator]:
    """A vendor that holds every call 0.3 s: long enough for calls to overlap."""
    with VendorSimulator(latency_seconds=0.3) as sim:
        yield sim


def run_with(
    p: Pipeline, monkeypatch: pytest.MonkeyPatch, vendor: VendorSimulator, parallel_calls: int
) -> Policy:
    """The pipeline's policy, calling `vendor` with `parallel_calls`, as the function sees it."""
    policy = p.policy.model_copy(
        update={
            "consumer": p.policy.consumer.model_copy(update={"parallel_calls": parallel_calls}),
            "action": p.policy.action.model_copy(
                update={"api_url": vendor.url, "allow_plain_http": True}
            ),
        }
    )
    monkeypatch.setenv("SWEEPER_POLICY", policy.model_dump_json())
    runtime.reset()
    return policy


def invoke(p: Pipeline, records: list[dict[str, Any]]) -> dict[str, Any]:
    response: dict[str, Any] = consumer_app.handler({"Records": records}, p.lambda_context())
    return response


def key_of(record: dict[str, Any]) -> str:
    return JobMessage.model_validate_json(record["body"]).key


@pytest.mark.parametrize("parallel_calls", [1, 2, 4])
def test_calls_in_flight_never_exceed_parallel_calls(
    pipeline: Pipeline,
    slow_vendor: VendorSimulator,
    monkeypatch: pytest.MonkeyPatch,
    parallel_calls: int,
) -> None:
    # Given ten due jobs and a consumer allowed `parallel_calls` calls at a time
    run_with(pipeline, monkeypatch, slow_vendor, parallel_calls)
    pipeline.seed(10)
    records = publish_all(pipeline)
    # When one batch carries them all
    response = invoke(pipeline, records)
    # Then every job settled once, and the vendor held exactly that many calls at its busiest
    assert failed_ids(response) == set()
    assert pipeline.ledger.counts("exports")[JobStatus.SUCCEEDED] == 10
    audit = slow_vendor.audit()
    assert (audit.calls_total, audit.effects_total) == (10, 10)
    assert audit.max_in_flight == parallel_calls


def test_side_by_side_records_keep_their_own_outcome_paths(
    pipeline: Pipeline, slow_vendor: VendorSimulator, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given nine jobs in one batch, called five at a time, whose first three calls meet a 500
    # (transient) and next two a 422 (permanent); the other four are accepted
    run_with(pipeline, monkeypatch, slow_vendor, 5)
    pipeline.seed(9)
    records = publish_all(pipeline)
    slow_vendor.fail_next(3, 500)
    slow_vendor.fail_next(2, 422)
    # When the batch is handled
    response = invoke(pipeline, records)
    # Then the calls overlapped
    assert slow_vendor.audit().max_in_flight == 5
    # and each record took its own outcome's path: only the transient ones come back...
    jobs = {r["messageId"]: pipeline.ledger.get(key_of(r)) for r in records}
    by_status: dict[JobStatus, set[str]] = {}
    for message_id, job in jobs.items():
        assert job is not None
        by_status.setdefault(job.status, set()).add(message_id)
    assert {s: len(ids) for s, ids in by_status.items()} == {
        JobStatus.SUCCEEDED: 4,
        JobStatus.FAILED: 2,
        JobStatus.LEASED: 3,  # lease ended at once: reclaimable when the backoff is over
    }
    assert failed_ids(response) == by_status[JobStatus.LEASED]
    # ...counted as one attempt with its outcome; the permanent ones are terminal at once
    for message_id in by_status[JobStatus.LEASED]:
        job = jobs[message_id]
        assert job is not None
        assert (job.attempt_count, job.last_outcome, job.last_error_code) == (
            1,
            OutcomeClass.TRANSIENT,
            "http_500",
        )
    for message_id in by_status[JobStatus.FAILED]:
        job = jobs[message_id]
        assert job is not None
        assert (job.attempt_count, job.last_outcome, job.last_error_code) == (
            1,
            OutcomeClass.PERMANENT,
            "http_422",
        )
    assert slow_vendor.audit().effects_total == 4


@pytest.mark.parametrize("copies", [2, 3])
def test_two_deliveries_of_one_job_in_a_parallel_batch_make_one_call(
    pipeline: Pipeline,
    slow_vendor: VendorSimulator,
    monkeypatch: pytest.MonkeyPatch,
    copies: int,
) -> None:
    # Given one job delivered two or three times in one batch, handled three records at a time
    run_with(pipeline, monkeypatch, slow_vendor, 3)
    pipeline.seed(1)
    (record,) = publish_all(pipeline)
    twins = [record, *({**record, "messageId": f"again-{i}"} for i in range(1, copies))]
    # When the batch is handled
    response = invoke(pipeline, twins)
    # Then none comes back (none found the first in flight): one call, one effect, succeeded
    assert failed_ids(response) == set()
    audit = slow_vendor.audit()
    assert (audit.calls_total, audit.effects_total) == (1, 1)
    job = pipeline.ledger.get(key_of(record))
    assert job is not None
    assert (job.status, job.attempt_count) == (JobStatus.SUCCEEDED, 1)


def test_one_ledger_shared_by_threads_keeps_every_write(db_url: str) -> None:
    # Given forty due jobs and one ledger shared by eight threads, as a parallel batch shares it
    ledger = Ledger(db_url)
    policy = Policy(name="exports")
    now = datetime.now(UTC)
    schedule_jobs(ledger, policy, [NewJob("t", f"o-{i:02d}", now) for i in range(40)], now)
    keys = [operation_key("exports", "t", f"o-{i:02d}", 1) for i in range(40)]
    barrier = threading.Barrier(8)
    errors: list[BaseException] = []

    def settle(mine: list[str]) -> None:
        barrier.wait()
        try:
            for key in mine:
                ledger.record_unsettled(
                    key,
                    now,
                    next_attempt_at=now,
                    lease_until=now,
                    outcome=OutcomeClass.TRANSIENT,
                    code="http_500",
                    count_attempt=True,
                )
                assert ledger.mark_succeeded(key, OutcomeClass.ACCEPTED, now)
        except BaseException as exc:  # collected: the main thread asserts on them
            errors.append(exc)

    # When each thread records an attempt and a success for its five jobs at the same time
    threads = [threading.Thread(target=settle, args=(keys[i::8],)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    # Then no statement failed and every write landed
    assert errors == []
    assert ledger.counts("exports")[JobStatus.SUCCEEDED] == 40
    assert {job.attempt_count for job in map(ledger.get, keys) if job is not None} == {2}
    ledger.close()


def test_a_parallel_batch_takes_its_slots_in_few_writes_at_the_rate(
    pipeline: Pipeline, slow_vendor: VendorSimulator, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given ten due jobs of one scope and a consumer calling all ten at once
    policy = run_with(pipeline, monkeypatch, slow_vendor, 10)
    pipeline.seed(10)
    records = publish_all(pipeline)
    # When one batch carries them
    response = invoke(pipeline, records)
    # Then all settled, and the limiter's slots were reserved in fewer writes than calls (one
    # on a quiet machine; more when the emulator is so slow that banked slots pass unused)
    assert failed_ids(response) == set()
    assert slow_vendor.audit().calls_total == 10
    assert runtime.limiter().writes < 10
    # and the calls still left one slot apart: none sooner than the interval, less arrival jitter
    arrivals = sorted(slow_vendor.audit().arrivals)
    interval = policy.quota.interval_seconds
    gaps = [b - a for a, b in itertools.pairwise(arrivals)]
    assert min(gaps) >= interval - policy.quota.arrival_budget_seconds

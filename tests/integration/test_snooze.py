"""The snooze outcome: "not now" for one job defers it without an attempt and without closing
its scope, until its snoozes would pass the policy's max_snooze_seconds (real ledger, moto SQS
and DynamoDB, and the vendor simulator answering 409 through the outcome table)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sweeper import runtime
from sweeper.config import Policy
from sweeper.consumer import process_batch
from sweeper.ledger.store import Ledger
from sweeper.models import (
    ActionCall,
    ActionResult,
    Job,
    JobMessage,
    JobStatus,
    NewJob,
    OutcomeClass,
    operation_key,
)
from sweeper.observability import Metric
from sweeper.scheduling import schedule_jobs
from tests.conftest import Pipeline
from tests.integration.test_consumer import deps_with, failed_ids, publish_all

pytestmark = pytest.mark.integration


@pytest.fixture
def snoozing(pipeline: Pipeline, monkeypatch: pytest.MonkeyPatch) -> Iterator[Pipeline]:
    """The pipeline with a policy whose outcome table maps the vendor's 409 to snooze."""
    action = pipeline.policy.action.model_copy(update={"outcomes": {409: "snooze"}})
    policy = pipeline.policy.model_copy(
        update={"action": action, "snooze_delay_seconds": 45.0, "max_snooze_seconds": 100.0}
    )
    monkeypatch.setenv("SWEEPER_POLICY", policy.model_dump_json())
    runtime.reset()
    yield replace(pipeline, policy=policy)
    runtime.reset()


def _consume(p: Pipeline, records: list[dict[str, Any]], perform: Any = None) -> Any:
    """One batch, when the queue shows its messages: the consumer's clock at the latest of
    their jobs' next attempts (a snoozed message is hidden until then), or now if later."""
    deps, sink = deps_with(p, p.ledger, perform)
    due = max(_job(p, r).next_attempt_at for r in records)
    deps = replace(deps, policy=p.policy, clock=lambda: max(datetime.now(UTC), due))
    processor = BatchProcessor(event_type=EventType.SQS, raise_on_entire_batch_failure=False)
    response = process_batch({"Records": records}, p.lambda_context(), deps, processor)
    return response, sink, deps


def _key(record: dict[str, Any]) -> str:
    return JobMessage.model_validate_json(record["body"]).key


def _job(p: Pipeline, record: dict[str, Any]) -> Job:
    job = p.ledger.get(_key(record))
    assert job is not None
    return job


def test_a_409_mapped_to_snooze_defers_the_job_by_retry_after_without_an_attempt(
    snoozing: Pipeline,
) -> None:
    # Given one delivered job, and a vendor that answers its call 409 with Retry-After: 30
    snoozing.seed(1)
    (record,) = publish_all(snoozing)
    snoozing.vendor.fail_next(1, 409, retry_after="30")
    before = datetime.now(UTC)
    # When the consumer handles it
    response, sink, deps = _consume(snoozing, [record])
    # Then the record comes back later, the job waits 30 s with no attempt spent, its outcome
    # is snooze, and its scope stays open for everyone else
    assert failed_ids(response) == {record["messageId"]}
    job = snoozing.ledger.get(_key(record))
    assert job is not None
    assert job.status is JobStatus.LEASED
    assert (job.attempt_count, job.last_outcome, job.last_error_code) == (
        0,
        OutcomeClass.SNOOZE,
        "http_409",
    )
    assert job.snoozed_seconds == 30.0
    assert job.next_attempt_at >= before + timedelta(seconds=30)
    assert not deps.limiter.state(job.scope).closed(deps.now())
    assert sink.totals.get(Metric.SNOOZES) == 1
    assert sink.totals.get(Metric.THROTTLE_EVENTS) is None
    assert sink.totals.get(Metric.RETRIES) is None


def test_a_snooze_leaves_the_scope_open_so_the_next_job_of_it_is_called(
    snoozing: Pipeline,
) -> None:
    # Given two jobs of one scope (the policy's single global scope) in one batch, and a vendor
    # that snoozes the first call
    snoozing.seed(2, tenants=1)
    records = publish_all(snoozing)
    assert len({JobMessage.model_validate_json(r["body"]).scope for r in records}) == 1
    snoozing.vendor.fail_next(1, 409)
    # When the batch is handled one record after the other
    response, sink, _ = _consume(snoozing, records)
    # Then the second job was called and settled: a snooze closes no gate
    assert len(failed_ids(response)) == 1
    assert snoozing.vendor.audit().calls_total == 2
    assert snoozing.ledger.counts("exports")[JobStatus.SUCCEEDED] == 1
    assert sink.totals.get(Metric.GATE_DEFERRALS) is None


def test_a_snooze_without_retry_after_waits_the_policys_snooze_delay(snoozing: Pipeline) -> None:
    # Given a vendor that snoozes with no Retry-After
    snoozing.seed(1)
    (record,) = publish_all(snoozing)
    snoozing.vendor.fail_next(1, 409)
    # When the consumer handles it
    _consume(snoozing, [record])
    # Then the job waits the policy's snooze_delay_seconds
    job = snoozing.ledger.get(_key(record))
    assert job is not None
    assert job.snoozed_seconds == snoozing.policy.snooze_delay_seconds == 45.0


def snoozes(call: ActionCall, timeout: float | None) -> ActionResult:
    """A test action: every call is snoozed, as a callable may answer."""
    return ActionResult(outcome=OutcomeClass.SNOOZE, code="locked")


def test_snoozes_past_max_snooze_seconds_end_the_job_terminal_with_its_own_code(
    snoozing: Pipeline,
) -> None:
    # Given a job snoozed once for 45 s of the policy's 100 (two more would make 135)
    snoozing.seed(1)
    (record,) = publish_all(snoozing)
    _consume(snoozing, [record], perform=snoozes)
    _consume(snoozing, [record], perform=snoozes)
    job = snoozing.ledger.get(_key(record))
    assert job is not None
    assert (job.status, job.snoozed_seconds) == (JobStatus.LEASED, 90.0)
    # When it is snoozed once more
    response, sink, _ = _consume(snoozing, [record], perform=snoozes)
    # Then it ends failed with snooze_exhausted, no attempt ever spent, its message deleted
    assert failed_ids(response) == set()
    job = snoozing.ledger.get(_key(record))
    assert job is not None
    assert (job.status, job.last_outcome, job.last_error_code, job.attempt_count) == (
        JobStatus.FAILED,
        OutcomeClass.SNOOZE,
        "snooze_exhausted",
        0,
    )
    assert job.snoozed_seconds == 90.0
    assert sink.totals.get(Metric.SNOOZE_EXHAUSTED) == 1
    assert sink.totals.get(Metric.TERMINAL_FAILURES) == 1
    # and the batch audit counts the snoozes and the terminal job
    (batch,) = snoozing.ledger.batch_audit("exports", datetime.now(UTC) - timedelta(hours=1), 10)
    assert (batch.snoozed, batch.terminal, batch.retried) == (2, 1, 0)


def test_an_operator_retry_gives_a_snooze_exhausted_job_a_fresh_snooze_budget(
    snoozing: Pipeline,
) -> None:
    # Given a job that ended snooze_exhausted
    snoozing.seed(1)
    (record,) = publish_all(snoozing)
    for _ in range(3):
        _consume(snoozing, [record], perform=snoozes)
    key = _key(record)
    # When an operator retries it
    moved = snoozing.ledger.retry_failed(
        "exports", actor="test", reason="lock gone", now=datetime.now(UTC), keys=[key]
    )
    # Then it is pending again with no snoozed time
    assert moved == [key]
    job = snoozing.ledger.get(key)
    assert job is not None
    assert (job.status, job.snoozed_seconds) == (JobStatus.PENDING, 0.0)


OUTCOMES = st.sampled_from(
    [OutcomeClass.SNOOZE, OutcomeClass.TRANSIENT, OutcomeClass.THROTTLED, OutcomeClass.ACCEPTED]
)


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    steps=st.lists(st.tuples(OUTCOMES, st.integers(min_value=1, max_value=60)), max_size=12),
    limit=st.integers(min_value=1, max_value=200),
)
def test_snoozes_never_spend_attempts_and_end_a_job_only_past_its_bound(
    ledger: Ledger, steps: list[tuple[OutcomeClass, int]], limit: int
) -> None:
    # Given a fresh job, and a walk of outcomes recorded as the consumer records them
    now = datetime.now(UTC)
    policy = Policy(name="walk", max_snooze_seconds=float(limit))
    tenant = f"t-{now.timestamp()}"
    schedule_jobs(ledger, policy, [NewJob(tenant, "o", now)], now)
    key = operation_key("walk", tenant, "o", 1)
    attempts = 0
    snoozed = 0.0
    settled = False
    for outcome, seconds in steps:
        if settled:
            break
        if outcome is OutcomeClass.SNOOZE:
            total = ledger.record_snooze(
                key,
                now,
                seconds=seconds,
                lease_until=now,
                code="locked",
                max_snooze_seconds=limit,
            )
            if snoozed + seconds > limit:
                # Then a snooze past the bound writes nothing (the consumer makes it terminal)
                assert total is None
                assert ledger.mark_failed(
                    key, outcome, "snooze_exhausted", now, count_attempt=False
                )
                settled = True
            else:
                snoozed += seconds
                assert total == snoozed
        elif outcome is OutcomeClass.ACCEPTED:
            assert ledger.mark_succeeded(key, outcome, now)
            settled = True
        else:
            counted = outcome is OutcomeClass.TRANSIENT
            ledger.record_unsettled(
                key,
                now,
                next_attempt_at=now,
                lease_until=now,
                outcome=outcome,
                count_attempt=counted,
            )
            attempts += counted
        job = ledger.get(key)
        assert job is not None
        # and the attempts are only the counted ones, the snoozed time within the bound
        assert job.attempt_count == attempts + (1 if job.status is JobStatus.SUCCEEDED else 0)
        assert job.snoozed_seconds == snoozed <= limit
        assert job.status in (JobStatus.PENDING, JobStatus.SUCCEEDED, JobStatus.FAILED)
        assert (job.status is JobStatus.FAILED) == (job.last_error_code == "snooze_exhausted")

"""The consumer handler over real HTTP (vendor simulator), real DynamoDB (moto) and the ledger."""

from __future__ import annotations

import json
import logging
import time
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any, cast

import pytest
from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType
from aws_lambda_powertools.utilities.typing import LambdaContext

from functions.consumer import app as consumer_app
from sweeper import runtime
from sweeper.config import ScopeConfig
from sweeper.consumer import ConsumerDeps, guard_with_idempotency, process_batch
from sweeper.ledger.store import Ledger
from sweeper.models import (
    ActionCall,
    ActionResult,
    JobMessage,
    JobStatus,
    NewJob,
    OutcomeClass,
    operation_key,
)
from sweeper.observability import Metric
from sweeper.producer.run import run_producer
from sweeper.scheduling import schedule_jobs, scope_for
from sweeper_local.metric_totals import CountingSink
from tests.conftest import Pipeline, load_event

pytestmark = pytest.mark.integration


def publish_all(p: Pipeline) -> list[dict[str, Any]]:
    """Run the producer once and turn what it queued into SQS event records."""
    run_producer(
        p.policy,
        datetime.now(UTC),
        p.ledger,
        runtime.publisher(),
        clock=runtime.utcnow,
        remaining_seconds=lambda: 60.0,
    )
    sqs = p.aws.sqs()
    records: list[dict[str, Any]] = []
    while True:
        got = sqs.receive_message(
            QueueUrl=p.resources.queue_url,
            MaxNumberOfMessages=10,
            MessageSystemAttributeNames=["All"],
        )
        if not got.get("Messages"):
            return records
        template = load_event("sqs_batch.json")["Records"][0]
        for m in got["Messages"]:
            records.append(
                {
                    **template,
                    "messageId": m["MessageId"],
                    "receiptHandle": m["ReceiptHandle"],
                    "body": m["Body"],
                }
            )


def shown_again(p: Pipeline, message_id: str, timeout_seconds: float = 15.0) -> dict[str, Any]:
    """The record of a message the consumer returned, once the queue shows it again."""
    sqs = p.aws.sqs()
    template = load_event("sqs_batch.json")["Records"][0]
    deadline = time.monotonic() + timeout_seconds
    while time.monotonic() < deadline:
        for m in sqs.receive_message(
            QueueUrl=p.resources.queue_url, MaxNumberOfMessages=10, WaitTimeSeconds=1
        ).get("Messages", []):
            if m["MessageId"] == message_id:
                return {
                    **template,
                    "messageId": message_id,
                    "receiptHandle": m["ReceiptHandle"],
                } | {"body": m["Body"]}
    raise AssertionError(f"message {message_id} not shown again within {timeout_seconds} s")


def invoke(p: Pipeline, records: list[dict[str, Any]]) -> dict[str, Any]:
    response: dict[str, Any] = consumer_app.handler({"Records": records}, p.lambda_context())
    return response


def failed_ids(response: dict[str, Any]) -> set[str]:
    return {item["itemIdentifier"] for item in response["batchItemFailures"]}


def test_a_batch_settles_every_job_with_one_effect_each(pipeline: Pipeline) -> None:
    pipeline.seed(7)
    records = publish_all(pipeline)
    response = invoke(pipeline, records)
    assert failed_ids(response) == set()
    assert pipeline.ledger.counts("exports")[JobStatus.SUCCEEDED] == 7
    audit = pipeline.vendor.audit()
    assert audit.effects_total == 7
    assert set(audit.calls_by_key) == {
        JobMessage.model_validate_json(r["body"]).key for r in records
    }


def test_a_duplicate_delivery_causes_one_vendor_effect(pipeline: Pipeline) -> None:
    # Given one job delivered twice in the same batch and once more in a later batch
    pipeline.seed(1)
    (record,) = publish_all(pipeline)
    twin = {**record, "messageId": "redelivered-1"}
    # When both batches are handled
    first = invoke(pipeline, [record, twin])
    second = invoke(pipeline, [{**record, "messageId": "redelivered-2"}])
    # Then the vendor was called once, with one effect, and the job succeeded once
    assert failed_ids(first) == failed_ids(second) == set()
    audit = pipeline.vendor.audit()
    assert (audit.calls_total, audit.effects_total) == (1, 1)
    job = pipeline.ledger.get(JobMessage.model_validate_json(record["body"]).key)
    assert job is not None
    assert (job.status, job.attempt_count) == (JobStatus.SUCCEEDED, 1)


def test_a_malformed_body_is_dropped_without_blocking_the_batch(pipeline: Pipeline) -> None:
    pipeline.seed(1)
    (good,) = publish_all(pipeline)
    bad = {**good, "messageId": "garbled", "body": '{"v": 1, "key": 42'}
    unknown_version = {**good, "messageId": "v9", "body": json.dumps({"v": 9})}
    response = invoke(pipeline, [bad, good, unknown_version])
    assert failed_ids(response) == set()
    assert pipeline.ledger.counts("exports")[JobStatus.SUCCEEDED] == 1
    assert pipeline.vendor.audit().calls_total == 1


def test_a_failed_call_returns_only_its_record_and_can_be_retried(pipeline: Pipeline) -> None:
    pipeline.seed(3)
    records = publish_all(pipeline)
    pipeline.vendor.fail_next(1, 500)
    response = invoke(pipeline, records)
    (failed,) = failed_ids(response)
    # the idempotency record was released: the redelivery, when the queue shows the message
    # again (hidden as long as its backoff), calls the vendor again and settles
    retry = invoke(pipeline, [shown_again(pipeline, failed)])
    assert failed_ids(retry) == set()
    counts = pipeline.ledger.counts("exports")
    assert counts[JobStatus.SUCCEEDED] == 3
    key = JobMessage.model_validate_json(
        next(r for r in records if r["messageId"] == failed)["body"]
    ).key
    job = pipeline.ledger.get(key)
    assert job is not None
    assert job.attempt_count == 2
    assert pipeline.vendor.audit().effects_total == 3


class LedgerThatDiesBeforeCommit(Ledger):
    """The process dies between the vendor's acceptance and the ledger commit, once."""

    died = False

    def mark_succeeded(
        self, key: str, outcome: OutcomeClass, now: datetime, *, trace_id: str | None = None
    ) -> bool:
        if not self.died:
            self.died = True
            raise RuntimeError("simulated crash before the ledger commit")
        return super().mark_succeeded(key, outcome, now, trace_id=trace_id)


def deps_with(
    p: Pipeline, ledger: Ledger, perform: Any = None
) -> tuple[ConsumerDeps, CountingSink]:
    sink = CountingSink()
    runtime.idempotency_config().register_lambda_context(cast(LambdaContext, p.lambda_context()))
    guarded = runtime.guarded_call()
    if perform is not None:
        guarded = guard_with_idempotency(perform, runtime.idempotent())
    deps = ConsumerDeps(
        p.policy, ledger, guarded, runtime.utcnow, sink, runtime.limiter(), runtime.visibility()
    )
    return deps, sink


def test_crash_after_vendor_accepted_before_ledger_commit_settles_on_redelivery(
    pipeline: Pipeline,
) -> None:
    # Given a job whose first delivery reaches the vendor, then dies before the ledger commit
    pipeline.seed(1)
    (record,) = publish_all(pipeline)
    dying = LedgerThatDiesBeforeCommit(pipeline.env["SWEEPER_DATABASE_URL"])
    deps, _ = deps_with(pipeline, dying)
    processor = BatchProcessor(event_type=EventType.SQS, raise_on_entire_batch_failure=False)
    first = process_batch({"Records": [record]}, pipeline.lambda_context(), deps, processor)
    assert failed_ids(dict(first)) == {record["messageId"]}
    key = JobMessage.model_validate_json(record["body"]).key
    job = pipeline.ledger.get(key)
    assert job is not None
    assert job.status is JobStatus.LEASED
    # When SQS redelivers it (same operation key, new message id)
    again = process_batch(
        {"Records": [{**record, "messageId": "redelivery"}]},
        pipeline.lambda_context(),
        deps,
        processor,
    )
    # Then the stored result is reused: no second call, one effect, the job succeeded
    assert failed_ids(dict(again)) == set()
    audit = pipeline.vendor.audit()
    assert (audit.calls_by_key[key], audit.effects_total) == (1, 1)
    job = pipeline.ledger.get(key)
    assert job is not None
    assert job.status is JobStatus.SUCCEEDED
    dying.close()


def test_crash_before_the_idempotency_record_is_saved_replays_at_the_vendor(
    pipeline: Pipeline,
) -> None:
    # Given an action whose process dies right after the vendor accepted (nothing stored)
    pipeline.seed(1)
    (record,) = publish_all(pipeline)
    action = runtime.action()
    calls = {"n": 0}

    def perform_then_die_once(job: ActionCall, timeout: float | None) -> ActionResult:
        result = action.perform(job, timeout)
        calls["n"] += 1
        if calls["n"] == 1:
            raise RuntimeError("simulated crash after the vendor accepted")
        return result

    deps, _ = deps_with(pipeline, pipeline.ledger, perform_then_die_once)
    processor = BatchProcessor(event_type=EventType.SQS, raise_on_entire_batch_failure=False)
    first = process_batch({"Records": [record]}, pipeline.lambda_context(), deps, processor)
    again = process_batch(
        {"Records": [{**record, "messageId": "redelivery"}]},
        pipeline.lambda_context(),
        deps,
        processor,
    )
    # Then the redelivery calls again with the same key; the vendor replays, one effect
    assert failed_ids(dict(first)) == {record["messageId"]}
    assert failed_ids(dict(again)) == set()
    key = JobMessage.model_validate_json(record["body"]).key
    audit = pipeline.vendor.audit()
    assert (audit.calls_by_key[key], audit.effects_by_key[key]) == (2, 1)
    job = pipeline.ledger.get(key)
    assert job is not None
    assert job.status is JobStatus.SUCCEEDED


def test_a_permanent_outcome_is_terminal_at_once(pipeline: Pipeline) -> None:
    pipeline.seed(1)
    (record,) = publish_all(pipeline)
    pipeline.vendor.fail_next(1, 422)
    response = invoke(pipeline, [record])
    assert failed_ids(response) == set()
    job = pipeline.ledger.get(JobMessage.model_validate_json(record["body"]).key)
    assert job is not None
    assert (job.status, job.last_outcome, job.last_error_code) == (
        JobStatus.FAILED,
        OutcomeClass.PERMANENT,
        "http_422",
    )


def test_metrics_count_duplicates_and_malformed(pipeline: Pipeline) -> None:
    pipeline.seed(1)
    (record,) = publish_all(pipeline)
    deps, sink = deps_with(pipeline, pipeline.ledger)
    processor = BatchProcessor(event_type=EventType.SQS, raise_on_entire_batch_failure=False)
    process_batch({"Records": [record]}, pipeline.lambda_context(), deps, processor)
    process_batch(
        {
            "Records": [
                {**record, "messageId": "dup"},
                {**record, "messageId": "bad", "body": "not json"},
            ]
        },
        pipeline.lambda_context(),
        deps,
        processor,
    )
    assert sink.totals[Metric.SUCCEEDED] == 1
    assert sink.totals[Metric.DUPLICATES] == 1
    assert sink.totals[Metric.MALFORMED] == 1


class RecordingSink(CountingSink):
    """Keeps every value, as EMF does, besides the totals."""

    def __init__(self) -> None:
        super().__init__()
        self.values: dict[str, list[float]] = {}

    def add_metric(self, name: str, unit: str, value: float) -> None:
        super().add_metric(name, unit, value)
        self.values.setdefault(name, []).append(value)


def test_each_delivery_records_how_long_it_held_the_environment(pipeline: Pipeline) -> None:
    # Given three published jobs, one of them delivered twice, and one unreadable body
    pipeline.seed(3)
    records = publish_all(pipeline)
    deps, _ = deps_with(pipeline, pipeline.ledger)
    sink = RecordingSink()
    deps = replace(deps, metrics=sink)
    batch = [
        *records,
        {**records[0], "messageId": "dup"},
        {**records[0], "messageId": "bad", "body": "not json"},
    ]
    # When the batch is handled
    processor = BatchProcessor(event_type=EventType.SQS, raise_on_entire_batch_failure=False)
    process_batch({"Records": batch}, pipeline.lambda_context(), deps, processor)
    # Then every delivery of a ledger job has one time (the duplicate too), the garbage none
    times = sink.values[Metric.PROCESSING_SECONDS]
    assert len(times) == 4
    assert all(t >= 0 for t in times)
    # and the three calls took at least the simulator's latency
    assert sorted(times)[-1] > 0


def test_a_record_returned_on_its_last_allowed_receive_is_counted_towards_the_dlq(
    pipeline: Pipeline,
) -> None:
    # Given three jobs whose calls all fail (503), received max-1, max and max times
    pipeline.seed(3)
    records = publish_all(pipeline)
    limit = pipeline.policy.consumer.max_receive_count
    receives = [limit - 1, limit, limit + 1]
    batch = [
        {**r, "attributes": {**r["attributes"], "ApproximateReceiveCount": str(n)}}
        for r, n in zip(records, receives, strict=True)
    ]
    pipeline.vendor.fail_next(3, 503)
    deps, sink = deps_with(pipeline, pipeline.ledger)
    # When the batch is handled
    processor = BatchProcessor(event_type=EventType.SQS, raise_on_entire_batch_failure=False)
    response = process_batch({"Records": batch}, pipeline.lambda_context(), deps, processor)
    # Then all three come back, and the two at or past the limit are bound for the DLQ
    assert len(response["batchItemFailures"]) == 3
    assert sink.totals[Metric.DEAD_LETTER_BOUND] == 2


def test_a_settled_record_on_its_last_receive_is_not_bound_for_the_dlq(pipeline: Pipeline) -> None:
    pipeline.seed(1)
    (record,) = publish_all(pipeline)
    last = str(pipeline.policy.consumer.max_receive_count)
    deps, sink = deps_with(pipeline, pipeline.ledger)
    processor = BatchProcessor(event_type=EventType.SQS, raise_on_entire_batch_failure=False)
    batch = [{**record, "attributes": {**record["attributes"], "ApproximateReceiveCount": last}}]
    response = process_batch({"Records": batch}, pipeline.lambda_context(), deps, processor)
    assert response["batchItemFailures"] == []
    assert Metric.DEAD_LETTER_BOUND not in sink.totals


# -- a body can only cause what the ledger holds for its key (issue: trust nothing that arrives) --


def forged(record: dict[str, Any], **fields: Any) -> dict[str, Any]:
    """The same message with some of its body's fields replaced, as an attacker would send it."""
    body = {**json.loads(record["body"]), **fields}
    return {**record, "messageId": "forged", "body": json.dumps(body)}


@pytest.mark.parametrize(
    "fields",
    [
        {"object_id": "victim-object"},
        {"tenant_id": "victim-tenant"},
        {"scope": "exports:another-scope"},
        {"policy_version": 2},
        {"policy": "listings"},
    ],
    ids=lambda f: next(iter(f)),
)
def test_a_body_that_disagrees_with_its_ledger_row_causes_no_call(
    pipeline: Pipeline, fields: dict[str, Any], caplog: pytest.LogCaptureFixture
) -> None:
    # Given a real job, due far in the future, and a forged message naming its key
    far = datetime.now(UTC) + timedelta(days=30)
    schedule_jobs(pipeline.ledger, pipeline.policy, [NewJob("t", "real-object", far)], far)
    key = operation_key("exports", "t", "real-object", 1)
    genuine = JobMessage(
        key=key,
        policy="exports",
        policy_version=1,
        tenant_id="t",
        object_id="real-object",
        scope=scope_for(pipeline.policy, NewJob("t", "real-object", far)),
        attempt=0,
        batch_id="x",
    )
    template = load_event("sqs_batch.json")["Records"][0]
    record = forged({**template, "body": genuine.to_body()}, **fields)
    deps, sink = deps_with(pipeline, pipeline.ledger)
    processor = BatchProcessor(event_type=EventType.SQS, raise_on_entire_batch_failure=False)
    # When it is delivered
    with caplog.at_level(logging.INFO):
        response = process_batch({"Records": [record]}, pipeline.lambda_context(), deps, processor)
    # Then nothing is called, the message is not retried, the ledger is untouched
    assert failed_ids(dict(response)) == set()
    assert pipeline.vendor.audit().calls_total == 0
    job = pipeline.ledger.get(key)
    assert job is not None
    assert (job.status, job.attempt_count, job.last_outcome) == (JobStatus.PENDING, 0, None)
    # And it is counted and logged by message id and key, without the forged values
    assert sink.totals.get(Metric.MISMATCHED) == 1
    (logged,) = [r for r in caplog.records if "disagrees" in r.getMessage()]
    assert (logged.__dict__["message_id"], logged.__dict__["operation_key"]) == ("forged", key)
    forged_strings = [v for v in fields.values() if isinstance(v, str)]
    assert not [v for v in forged_strings if v in caplog.text]


def test_the_call_and_its_scope_come_from_the_ledger_row(pipeline: Pipeline) -> None:
    # Given a genuine message for a real job
    pipeline.seed(1)
    (record,) = publish_all(pipeline)
    key = JobMessage.model_validate_json(record["body"]).key
    job = pipeline.ledger.get(key)
    assert job is not None
    seen: list[ActionCall] = []
    action = runtime.action()

    def perform(call: ActionCall, timeout: float | None) -> ActionResult:
        seen.append(call)
        return action.perform(call, timeout)

    deps, _ = deps_with(pipeline, pipeline.ledger, perform)
    processor = BatchProcessor(event_type=EventType.SQS, raise_on_entire_batch_failure=False)
    # When it is delivered
    process_batch({"Records": [record]}, pipeline.lambda_context(), deps, processor)
    # Then the action ran for the ledger row's target and scope
    (call,) = seen
    assert (call.key, call.tenant_id, call.object_id, call.scope) == (
        job.operation_key,
        job.tenant_id,
        job.object_id,
        job.scope,
    )
    assert call.idempotency_key == job.operation_key  # round 0: the operation key itself


def test_a_republished_job_hits_the_same_idempotency_record(pipeline: Pipeline) -> None:
    # Given a job accepted by the vendor whose consumer died before the ledger commit
    pipeline.seed(1)
    (record,) = publish_all(pipeline)
    dying = LedgerThatDiesBeforeCommit(pipeline.env["SWEEPER_DATABASE_URL"])
    deps, _ = deps_with(pipeline, dying)
    processor = BatchProcessor(event_type=EventType.SQS, raise_on_entire_batch_failure=False)
    process_batch({"Records": [record]}, pipeline.lambda_context(), deps, processor)
    first = JobMessage.model_validate_json(record["body"])
    sqs = pipeline.aws.sqs()
    # (and its message is lost, so only the republished one can bring it back)
    sqs.delete_message(QueueUrl=pipeline.resources.queue_url, ReceiptHandle=record["receiptHandle"])
    # When its lease expires and the producer reclaims and publishes it again, in a new batch
    later = datetime.now(UTC) + timedelta(seconds=pipeline.policy.lease_seconds + 1)
    run_producer(
        pipeline.policy,
        later,
        pipeline.ledger,
        runtime.publisher(),
        clock=lambda: later,
        remaining_seconds=lambda: 60.0,
    )
    got = sqs.receive_message(QueueUrl=pipeline.resources.queue_url, MaxNumberOfMessages=10)
    (message,) = got["Messages"]
    second = JobMessage.model_validate_json(message["Body"])
    assert (second.key, second.batch_id != first.batch_id) == (first.key, True)
    again = {**record, "messageId": message["MessageId"], "body": message["Body"]}
    response = process_batch({"Records": [again]}, pipeline.lambda_context(), deps, processor)
    # Then the new delivery reuses the stored result: one call, one effect, succeeded
    assert failed_ids(dict(response)) == set()
    audit = pipeline.vendor.audit()
    assert (audit.calls_by_key[first.key], audit.effects_total) == (1, 1)
    job = pipeline.ledger.get(first.key)
    assert job is not None
    assert job.status is JobStatus.SUCCEEDED
    dying.close()


def test_another_policys_job_is_not_called_by_this_policys_consumer(pipeline: Pipeline) -> None:
    # Given a genuine message of a job of another policy, sent to this policy's queue
    listings = pipeline.policy.model_copy(update={"name": "listings"})
    now = datetime.now(UTC)
    job = NewJob("t", "o", now)
    schedule_jobs(pipeline.ledger, listings, [job], now)
    message = JobMessage(
        key=operation_key("listings", "t", "o", 1),
        policy="listings",
        policy_version=1,
        tenant_id="t",
        object_id="o",
        scope=scope_for(listings, job),
        attempt=0,
        batch_id="x",
    )
    template = load_event("sqs_batch.json")["Records"][0]
    deps, sink = deps_with(pipeline, pipeline.ledger)
    processor = BatchProcessor(event_type=EventType.SQS, raise_on_entire_batch_failure=False)
    # When the exports consumer receives it
    record = {**template, "messageId": "stray", "body": message.to_body()}
    process_batch({"Records": [record]}, pipeline.lambda_context(), deps, processor)
    # Then it is not called with this policy's action, and counted as a mismatch
    assert pipeline.vendor.audit().calls_total == 0
    assert sink.totals.get(Metric.MISMATCHED) == 1


class EmittedSink:
    """Every metric as emitted, in order (CountingSink sums them)."""

    def __init__(self) -> None:
        self.emitted: list[tuple[str, float]] = []

    def add_metric(self, name: str, unit: str, value: float) -> None:
        self.emitted.append((name, value))

    def values(self, name: str) -> list[float]:
        return [value for emitted, value in self.emitted if emitted == name]


def test_a_batch_reports_once_the_slots_it_called_in_and_not_those_it_waited_for(
    pipeline: Pipeline,
) -> None:
    # Given four delivered jobs in two tenant scopes, one of them closed by the vendor
    per_tenant = pipeline.policy.model_copy(update={"scope": ScopeConfig(kind="tenant")})
    now = datetime.now(UTC)
    jobs = [NewJob(f"tenant-{i % 2}", f"obj-{i}", now - timedelta(seconds=1)) for i in range(4)]
    schedule_jobs(pipeline.ledger, per_tenant, jobs, now)
    records = publish_all(pipeline)
    deps, _ = deps_with(pipeline, pipeline.ledger)
    sink = EmittedSink()
    deps = replace(deps, metrics=sink)
    scopes = sorted({JobMessage.model_validate_json(r["body"]).scope for r in records})
    assert len(scopes) == 2
    deps.limiter.close(scopes[0], time.time() + 60, "throttled")
    processor = BatchProcessor(event_type=EventType.SQS, raise_on_entire_batch_failure=False)
    # When the batch is handled
    process_batch({"Records": records}, pipeline.lambda_context(), deps, processor)
    # Then one figure for the batch: the two calls made, not the two records sent back
    assert pipeline.vendor.audit().calls_total == 2
    assert sink.values(Metric.LIMITER_SLOTS_USED) == [2]


PRODUCER_TRACE = "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1"


def test_each_records_log_lines_carry_the_producers_trace_id(
    pipeline: Pipeline, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # Given two records as SQS hands them to Lambda after a traced producer sent them
    pipeline.seed(2)
    records = [
        {**r, "attributes": {**r["attributes"], "AWSTraceHeader": PRODUCER_TRACE}}
        for r in publish_all(pipeline)
    ]
    # When a consumer invocation of another trace handles them
    monkeypatch.setenv("_X_AMZN_TRACE_ID", "Root=1-00000000-000000000000000000000000;Sampled=0")
    with caplog.at_level(logging.DEBUG, logger="sweeper.consumer"):  # a success's own line
        assert failed_ids(invoke(pipeline, records)) == set()
    # Then each record's log line names the producer's trace (its AWSTraceHeader) by its id
    settled = [r.__dict__ for r in caplog.records if r.getMessage() == "settled"]
    assert len(settled) == 2
    assert {line["trace_id"] for line in settled} == {"1-5759e988-bd862e3fe1be46a994272793"}
    # And the ledger keeps it on each job, for `sweeper inspect`
    for record in records:
        job = pipeline.ledger.get(JobMessage.model_validate_json(record["body"]).key)
        assert job is not None
        assert job.last_trace_id == "1-5759e988-bd862e3fe1be46a994272793"


def test_a_record_without_a_trace_header_logs_no_trace_id(
    pipeline: Pipeline, caplog: pytest.LogCaptureFixture
) -> None:
    pipeline.seed(1)
    records = publish_all(pipeline)
    assert "AWSTraceHeader" not in records[0]["attributes"]
    with caplog.at_level(logging.DEBUG, logger="sweeper.consumer"):
        assert failed_ids(invoke(pipeline, records)) == set()
    (settled,) = [r.__dict__ for r in caplog.records if r.getMessage() == "settled"]
    assert settled["trace_id"] is None
    job = pipeline.ledger.get(JobMessage.model_validate_json(records[0]["body"]).key)
    assert job is not None
    assert job.last_trace_id is None

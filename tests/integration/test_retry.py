"""An operator retry (and a redrive of a terminal job) makes one fresh call, never two at once.

End to end over HTTP: the vendor simulator, Powertools idempotency on DynamoDB (moto), the ledger.
"""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime
from typing import Any

import pytest
from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType

from sweeper import runtime
from sweeper.consumer import process_batch
from sweeper.models import ActionCall, ActionResult, JobMessage, JobStatus, OutcomeClass
from sweeper.operations import retry_jobs
from sweeper.redrive.run import RedriveRequest
from tests.conftest import Pipeline
from tests.integration.test_consumer import deps_with, failed_ids, invoke, publish_all
from tests.integration.test_redrive import redrive

pytestmark = pytest.mark.integration


def key_of(record: dict[str, Any]) -> str:
    return JobMessage.model_validate_json(record["body"]).key


def acknowledge(p: Pipeline, records: list[dict[str, Any]], response: dict[str, Any]) -> None:
    """Delete what the batch did not report as failed, as the Lambda event source does."""
    failed = failed_ids(response)
    sqs = p.aws.sqs()
    for record in records:
        if record["messageId"] not in failed:
            sqs.delete_message(
                QueueUrl=p.resources.queue_url, ReceiptHandle=record["receiptHandle"]
            )


def status_of(p: Pipeline, key: str) -> tuple[JobStatus, OutcomeClass | None, int]:
    job = p.ledger.get(key)
    assert job is not None
    return job.status, job.last_outcome, job.retry_round


def test_a_retried_permanent_failure_calls_the_vendor_again_and_succeeds(
    pipeline: Pipeline,
) -> None:
    # Given a job the vendor refused with a 422 (stored as a completed idempotency record)
    pipeline.seed(1)
    (record,) = publish_all(pipeline)
    key = key_of(record)
    pipeline.vendor.fail_next(1, 422)
    response = invoke(pipeline, [record])
    assert failed_ids(response) == set()
    acknowledge(pipeline, [record], response)
    assert status_of(pipeline, key) == (JobStatus.FAILED, OutcomeClass.PERMANENT, 0)
    # When an operator retries permanent failures and the job is delivered again
    now = datetime.now(UTC)
    moved = retry_jobs(
        "exports", pipeline.ledger, actor="ops", now=now, outcomes=[OutcomeClass.PERMANENT]
    )
    assert moved == [key]
    (again,) = publish_all(pipeline)
    assert failed_ids(invoke(pipeline, [again])) == set()
    # Then the vendor was called afresh, with the same Idempotency-Key, and the job succeeded
    audit = pipeline.vendor.audit()
    assert (audit.calls_by_key[key], audit.effects_by_key[key]) == (2, 1)
    assert status_of(pipeline, key) == (JobStatus.SUCCEEDED, OutcomeClass.ACCEPTED, 1)
    # And a further delivery of the same round is a duplicate, not a call
    assert failed_ids(invoke(pipeline, [{**again, "messageId": "late-twin"}])) == set()
    assert pipeline.vendor.audit().calls_by_key[key] == 2


def test_a_retried_job_whose_first_call_was_accepted_gets_the_vendors_replay(
    pipeline: Pipeline,
) -> None:
    # Given a job the vendor deleted, but whose answer was lost until its attempts ran out
    pipeline.seed(1)
    (record,) = publish_all(pipeline)
    key = key_of(record)
    deps, _ = deps_with(pipeline, pipeline.ledger)
    deps = dataclasses.replace(deps, policy=pipeline.policy.model_copy(update={"max_attempts": 1}))
    processor = BatchProcessor(event_type=EventType.SQS, raise_on_entire_batch_failure=False)
    pipeline.vendor.set_fault_rates(timeout_after_effect_rate=1.0)
    process_batch({"Records": [record]}, pipeline.lambda_context(), deps, processor)
    pipeline.vendor.set_fault_rates(timeout_after_effect_rate=0.0)
    job = pipeline.ledger.get(key)
    assert job is not None
    assert (job.status, job.last_error_code) == (JobStatus.FAILED, "exhausted")
    # When an operator retries it
    retry_jobs("exports", pipeline.ledger, actor="ops", now=datetime.now(UTC), keys=[key])
    # (the first message may be visible again too: every delivery is handled)
    assert failed_ids(invoke(pipeline, publish_all(pipeline))) == set()
    # Then the vendor replays its stored answer: two calls, one effect, succeeded
    audit = pipeline.vendor.audit()
    assert (audit.calls_by_key[key], audit.effects_by_key[key]) == (2, 1)
    assert status_of(pipeline, key)[0] is JobStatus.SUCCEEDED


def test_redrive_of_a_terminal_job_makes_one_fresh_call(pipeline: Pipeline) -> None:
    # Given a job refused with a 422, its message in the DLQ
    pipeline.seed(1)
    (record,) = publish_all(pipeline)
    key = key_of(record)
    pipeline.vendor.fail_next(1, 422)
    acknowledge(pipeline, [record], invoke(pipeline, [record]))
    sqs = pipeline.aws.sqs()
    sqs.send_message(QueueUrl=pipeline.resources.dlq_url, MessageBody=record["body"])
    # When redriving with terminal jobs included, and the moved message is delivered
    report = redrive(pipeline, RedriveRequest(include_terminal=True))
    assert (report.moved, report.retried_terminal) == (1, 1)
    got = sqs.receive_message(QueueUrl=pipeline.resources.queue_url)["Messages"]
    moved = [{**record, "messageId": m["MessageId"], "body": m["Body"]} for m in got]
    assert failed_ids(invoke(pipeline, moved)) == set()
    # Then the vendor was called afresh and the job succeeded in the new round
    assert pipeline.vendor.audit().calls_by_key[key] == 2
    assert status_of(pipeline, key) == (JobStatus.SUCCEEDED, OutcomeClass.ACCEPTED, 1)


def test_a_retried_job_is_never_called_twice_at_once(pipeline: Pipeline) -> None:
    # Given a retried 422, and a second delivery that arrives while the first is calling
    pipeline.seed(1)
    (record,) = publish_all(pipeline)
    key = key_of(record)
    pipeline.vendor.fail_next(1, 422)
    acknowledge(pipeline, [record], invoke(pipeline, [record]))
    retry_jobs("exports", pipeline.ledger, actor="ops", now=datetime.now(UTC), keys=[key])
    (again,) = publish_all(pipeline)
    twin = {**again, "messageId": "concurrent-twin"}
    action = runtime.action()
    twin_responses: list[dict[str, Any]] = []

    def perform(call: ActionCall, timeout: float | None) -> ActionResult:
        # the twin is handled in the middle of this call, as another environment would
        inner = BatchProcessor(event_type=EventType.SQS, raise_on_entire_batch_failure=False)
        twin_responses.append(
            dict(process_batch({"Records": [twin]}, pipeline.lambda_context(), deps, inner))
        )
        return action.perform(call, timeout)

    deps, _ = deps_with(pipeline, pipeline.ledger, perform)
    processor = BatchProcessor(event_type=EventType.SQS, raise_on_entire_batch_failure=False)
    # When the first delivery calls
    first = process_batch({"Records": [again]}, pipeline.lambda_context(), deps, processor)
    # Then the twin was held off (returned to the queue), and the round made exactly one call
    assert failed_ids(dict(first)) == set()
    assert [failed_ids(r) for r in twin_responses] == [{"concurrent-twin"}]
    assert pipeline.vendor.audit().calls_by_key[key] == 2  # the 422, then the retry
    assert status_of(pipeline, key)[0] is JobStatus.SUCCEEDED

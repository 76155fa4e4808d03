"""Eligibility at the point of the call: the ledger's time is the law, whatever reaches the queue.

A delivery of a pending or leased job whose due time, next attempt or postponement is still
ahead is acknowledged without a call, counted (NotYetDue, and the carrying batch's audit) and
leaves the ledger row as it was; redrive keeps such a job's dead letter. Against the real ledger,
the SQS and DynamoDB stand-ins and the vendor simulator over HTTP.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType

from sweeper.consumer import process_batch
from sweeper.models import (
    ControlAction,
    Job,
    JobMessage,
    JobSelection,
    JobStatus,
    NewJob,
)
from sweeper.observability import Metric
from sweeper.operations import control_jobs
from sweeper.scheduling import schedule_jobs
from sweeper_local.drill_early import producer_body
from tests.conftest import Pipeline, load_event
from tests.integration.test_consumer import deps_with, failed_ids, publish_all
from tests.integration.test_redrive import redrive

pytestmark = pytest.mark.integration

DUE_2099 = datetime(2099, 1, 1, tzinfo=UTC)


def job(pipeline: Pipeline, key: str) -> Job:
    found = pipeline.ledger.get(key)
    assert found is not None
    return found


def received(pipeline: Pipeline, bodies: list[str]) -> list[dict[str, Any]]:
    """Send `bodies` to the work queue, as any sender in the account may, and receive them as
    the event source hands them to the consumer."""
    sqs = pipeline.aws.sqs()
    for body in bodies:
        sqs.send_message(QueueUrl=pipeline.resources.queue_url, MessageBody=body)
    template = load_event("sqs_batch.json")["Records"][0]
    records: list[dict[str, Any]] = []
    while len(records) < len(bodies):
        got = sqs.receive_message(
            QueueUrl=pipeline.resources.queue_url, MaxNumberOfMessages=10, VisibilityTimeout=60
        ).get("Messages", [])
        assert got, "sent messages not received"
        records += [
            {**template, "messageId": m["MessageId"], "receiptHandle": m["ReceiptHandle"]}
            | {"body": m["Body"]}
            for m in got
        ]
    return records


def deliver(
    pipeline: Pipeline, records: list[dict[str, Any]], *, at: datetime | None = None
) -> Any:
    """One consumer batch (the real guarded HTTP call); `at`: the consumer's clock, if not now."""
    deps, sink = deps_with(pipeline, pipeline.ledger)
    if at is not None:
        deps = replace(deps, clock=lambda: at)
    processor = BatchProcessor(event_type=EventType.SQS, raise_on_entire_batch_failure=False)
    response = process_batch({"Records": records}, pipeline.lambda_context(), deps, processor)
    return failed_ids(dict(response)), sink


def test_ten_jobs_due_in_2099_sent_with_their_exact_bodies_are_never_called(
    pipeline: Pipeline, caplog: pytest.LogCaptureFixture
) -> None:
    # Given ten jobs due on 2099-01-01, and their exact bodies put on the work queue today
    jobs = [NewJob(f"tenant-{i % 3}", f"obj-{i:05d}", DUE_2099) for i in range(10)]
    schedule_jobs(pipeline.ledger, pipeline.policy, jobs, datetime.now(UTC))
    keys = [f"exports:tenant-{i % 3}:obj-{i:05d}:v1" for i in range(10)]
    before = [job(pipeline, k) for k in keys]
    records = received(pipeline, [producer_body(row, "b-early") for row in before])
    # When the consumer handles them
    with caplog.at_level(logging.WARNING, logger="sweeper.consumer"):
        failed, sink = deliver(pipeline, records)
    # Then each is acknowledged (nothing comes back) without a single call at the vendor
    assert failed == set()
    assert pipeline.vendor.audit().calls_total == 0
    assert sink.totals.get(Metric.NOT_YET_DUE) == 10
    # and the ledger keeps every row's future exactly as it was
    assert [job(pipeline, k) for k in keys] == before
    # and each is logged by its ids
    lines = [
        r for r in caplog.records if r.getMessage() == "job not yet due; acknowledged uncalled"
    ]
    assert sorted(str(getattr(r, "operation_key", "")) for r in lines) == sorted(keys)
    # When the same deliveries come once the consumer's clock reaches their due time
    failed, sink = deliver(pipeline, records, at=DUE_2099)
    # Then each is called exactly once and settles
    assert failed == set()
    audit = pipeline.vendor.audit()
    assert sorted(audit.calls_by_key.items()) == [(k, 1) for k in sorted(keys)]
    assert pipeline.ledger.counts("exports")[JobStatus.SUCCEEDED] == 10
    assert sink.totals.get(Metric.NOT_YET_DUE, 0) == 0


def postponed_dead_letter(pipeline: Pipeline, until: datetime) -> tuple[str, str, str]:
    """A job published by a producer run, whose message then dead-letters; the operator holds
    it, postpones it to `until` and unholds it, as the runbook says. Its key, batch and body."""
    pipeline.seed(1)
    (record,) = publish_all(pipeline)
    message = JobMessage.model_validate_json(record["body"])
    pipeline.aws.sqs().send_message(QueueUrl=pipeline.resources.dlq_url, MessageBody=record["body"])
    now = datetime.now(UTC)
    chosen = JobSelection(keys=(message.key,))
    for action in (ControlAction.HOLD, ControlAction.POSTPONE, ControlAction.UNHOLD):
        control_jobs(
            action,
            "exports",
            pipeline.ledger,
            chosen,
            actor="ops",
            now=now,
            reason="the vendor asked for a month",
            until=until if action is ControlAction.POSTPONE else None,
        )
    assert job(pipeline, message.key).status is JobStatus.PENDING
    return message.key, message.batch_id, record["body"]


def test_a_postponed_jobs_redelivered_message_is_not_called_and_counted_for_its_batch(
    pipeline: Pipeline,
) -> None:
    # Given a job held, postponed a month and unheld after its message was published
    until = datetime.now(UTC) + timedelta(days=30)
    key, batch, body = postponed_dead_letter(pipeline, until)
    before = job(pipeline, key)
    # When its message is delivered again
    failed, sink = deliver(pipeline, received(pipeline, [body]))
    # Then it is acknowledged uncalled, the row keeps its postponement, and its batch counts it
    assert failed == set()
    assert pipeline.vendor.audit().calls_total == 0
    assert sink.totals.get(Metric.NOT_YET_DUE) == 1
    after = job(pipeline, key)
    assert after == before
    assert (after.status, after.postponed_until, after.due_at) == (JobStatus.PENDING, until, until)
    (audit,) = pipeline.ledger.batch_audit("exports", datetime.now(UTC) - timedelta(days=1), 10)
    assert (audit.batch_id, audit.not_yet_due, audit.duplicates) == (batch, 1, 0)


def test_redrive_keeps_a_postponed_jobs_dead_letter_until_its_time(pipeline: Pipeline) -> None:
    # Given a postponed job's dead letter (hold, postpone a month, unhold)
    until = datetime.now(UTC) + timedelta(days=30)
    key, _, body = postponed_dead_letter(pipeline, until)
    # When the scheduled redrive runs before its time
    report = redrive(pipeline)
    # Then the letter stays in the DLQ: neither moved to work nor deleted
    assert (report.moved, report.kept_not_due, report.dropped_settled, report.left) == (0, 1, 0, 1)
    assert (
        pipeline.aws.sqs()
        .receive_message(QueueUrl=pipeline.resources.queue_url, MaxNumberOfMessages=10)
        .get("Messages", [])
        == []
    )
    # When a redrive runs once the postponement has passed
    report = redrive(pipeline, clock=lambda: until)
    # Then the letter goes back to work, its body unchanged
    assert (report.moved, report.kept_not_due, report.left) == (1, 0, 0)
    (moved,) = pipeline.aws.sqs().receive_message(
        QueueUrl=pipeline.resources.queue_url, MaxNumberOfMessages=10
    )["Messages"]
    assert moved["Body"] == body
    assert job(pipeline, key).status is JobStatus.PENDING

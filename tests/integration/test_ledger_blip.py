"""A ledger blip costs seconds: work that met an unreachable ledger comes back soon.

The ledger's connections are terminated (pg_terminate_backend) the way a restart ends them, on
the real PostgreSQL; the queue is moto's, whose visibility timeout (six consumer timeouts: 60 s
here) is what a record would otherwise wait.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import psycopg
import pytest

from sweeper import runtime
from sweeper.consumer import GuardedCall, Prepare
from sweeper.errors import LedgerUnavailableError
from sweeper.ledger.store import Ledger
from sweeper.models import ActionCall, ActionResult, JobMessage, JobStatus
from sweeper.returns import LEDGER_RETURN_BASE_SECONDS
from tests.conftest import Pipeline
from tests.integration.test_consumer import failed_ids, invoke, publish_all

pytestmark = pytest.mark.integration

#: Well inside the queue's 60 s visibility timeout, well past a first return's delay.
BACK_WITHIN_SECONDS = LEDGER_RETURN_BASE_SECONDS + 4.0

TERMINATE_SWEEPER_BACKENDS = """
SELECT pg_terminate_backend(pid) FROM pg_stat_activity
WHERE application_name = 'sweeper' AND datname = current_database()
"""


def terminate_ledger_connections(db_url: str) -> None:
    """End every ledger connection to this test's database, as a restart of PostgreSQL does."""
    with psycopg.connect(db_url, autocommit=True, application_name="blip-test") as admin:
        admin.execute(TERMINATE_SWEEPER_BACKENDS)


def returned_within(p: Pipeline, seconds: float, count: int) -> dict[str, str]:
    """Message id -> new receipt handle of what is visible again on the work queue within
    `seconds` (polled with a deadline, until `count` are back)."""
    sqs = p.aws.sqs()
    back: dict[str, str] = {}
    deadline = time.monotonic() + seconds
    while len(back) < count and time.monotonic() < deadline:
        got = sqs.receive_message(
            QueueUrl=p.resources.queue_url, MaxNumberOfMessages=10, WaitTimeSeconds=1
        )
        back.update((m["MessageId"], m["ReceiptHandle"]) for m in got.get("Messages", []))
    return back


def blip_after_the_call(db_url: str, guarded: GuardedCall) -> GuardedCall:
    """The guarded call, after which (once) the ledger's connections are ended."""
    done: list[bool] = []

    def call(job: ActionCall, prepare: Prepare) -> ActionResult:
        result = guarded(job, prepare)
        if not done:
            done.append(True)
            terminate_ledger_connections(db_url)
        return result

    return call


def idempotency_status(p: Pipeline) -> list[str]:
    items = p.aws.dynamodb().scan(TableName=p.resources.idempotency_table)["Items"]
    return [item["status"]["S"] for item in items]


def test_a_settle_that_meets_an_unreachable_ledger_comes_back_in_seconds_with_one_effect(
    pipeline: Pipeline, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a job whose vendor call is accepted, after which the ledger's connections end
    db_url = pipeline.env["SWEEPER_DATABASE_URL"]
    pipeline.seed(1)
    (record,) = publish_all(pipeline)
    real: Callable[[], GuardedCall] = runtime.guarded_call
    blipping = blip_after_the_call(db_url, real())
    monkeypatch.setattr(runtime, "guarded_call", lambda: blipping)
    # When the batch is delivered
    response = invoke(pipeline, [record])
    # Then the record is returned (the ledger commit failed), the vendor saw one effect, and the
    # idempotency record is COMPLETED: the result is stored before the ledger is written
    assert failed_ids(response) == {record["messageId"]}
    assert pipeline.vendor.audit().effects_total == 1
    assert idempotency_status(pipeline) == ["COMPLETED"]
    # And it is visible again in seconds, not after the queue's 60 s visibility timeout
    back = returned_within(pipeline, BACK_WITHIN_SECONDS, 1)
    assert list(back) == [record["messageId"]], f"not back within {BACK_WITHIN_SECONDS} s"
    # When it is delivered again, the stored result settles it without a second call
    monkeypatch.setattr(runtime, "guarded_call", real)
    again = {**record, "receiptHandle": back[record["messageId"]]}
    assert failed_ids(invoke(pipeline, [again])) == set()
    fresh = Ledger(db_url)  # the fixture's own connection was ended too
    try:
        job = fresh.get(JobMessage.model_validate_json(record["body"]).key)
    finally:
        fresh.close()
    assert job is not None
    assert job.status is JobStatus.SUCCEEDED
    audit = pipeline.vendor.audit()
    assert (audit.calls_total, audit.effects_total) == (1, 1)


def test_a_batch_whose_ledger_read_fails_comes_back_in_seconds(pipeline: Pipeline) -> None:
    # Given three jobs, and a consumer whose ledger connection ends before the batch's read
    pipeline.seed(3)
    records = publish_all(pipeline)
    runtime.ledger().targets(["warm"])  # the connection is open, as in a warm environment
    terminate_ledger_connections(pipeline.env["SWEEPER_DATABASE_URL"])
    # When the batch is delivered, the invocation fails (the Errors alarm sees the outage)
    with pytest.raises(LedgerUnavailableError):
        invoke(pipeline, records)
    # Then every record is visible again in seconds
    back = returned_within(pipeline, BACK_WITHIN_SECONDS, len(records))
    assert sorted(back) == sorted(r["messageId"] for r in records)
    assert pipeline.vendor.audit().calls_total == 0

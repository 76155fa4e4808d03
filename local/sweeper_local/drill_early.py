"""The not-yet-due drill: the ledger's time is the law, whatever reaches the queues.

Anyone in the account who may send to the work queue can put a job's exact body there before
its time; a dead letter of a postponed job can be redriven before its postponement ends. The
drill does both and shows no call until the ledger allows one, then exactly one per job.

Registered in `sweeper_local.drills.DRILLS`; it imports that module's helpers when it runs.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Final, Literal

import psycopg

from sweeper.ledger.wake import lower_in
from sweeper.models import ClaimedJob, Job, JobMessage, JobStatus, NewJob
from sweeper.observability import Metric
from sweeper.redrive.letters import queue_depth
from sweeper.scheduling import schedule_jobs

if TYPE_CHECKING:
    from sweeper_local.drills import DrillRun

#: How far ahead the early jobs are due, and how long the operator postpones the other.
DUE_IN: Final = timedelta(days=365)
POSTPONED_FOR: Final = timedelta(days=30)

#: The drill's stand-in for the calendar: it moves these jobs' due time, next attempt and
#: postponement (only where one is set) to now, as the year (and the month) passing would, and
#: touches nothing else: no state, no attempt, no batch.
TIME_PASSES_SQL: Final = """
UPDATE sweeper_jobs
SET due_at = %(now)s, next_attempt_at = %(now)s,
    postponed_until = CASE WHEN postponed_until IS NULL THEN NULL ELSE %(now)s END
WHERE policy = %(policy)s AND operation_key = ANY(%(keys)s)
"""


def producer_body(row: Job, batch_id: str) -> str:
    """The body a producer run sends for this row: the same JobMessage JSON, byte for byte."""
    claimed = ClaimedJob(
        id=row.id,
        policy_version=row.policy_version,
        tenant_id=row.tenant_id,
        object_id=row.object_id,
        scope=row.scope,
        operation_key=row.operation_key,
        attempt_count=row.attempt_count,
        params=row.params,
    )
    return JobMessage.for_claim(row.policy, claimed, batch_id).to_body()


def not_yet_due(run: DrillRun, jobs: int = 10) -> None:
    """Jobs due next year whose exact bodies are sent to the work queue, and a published job
    whose message dead-letters and which the operator holds, postpones a month and unholds
    before its letter is redriven: no vendor call for any until its time; then one each."""
    from sweeper.operator_api.changes import control, redrive
    from sweeper.operator_api.requests import ControlRequest, RedriveCommand
    from sweeper_local.drills import SETTLE_TIMEOUT_SECONDS, calls_to, operator_backend

    backend = operator_backend(run)
    run.hold_consumers()
    # A job published by a producer run, whose message ends in the DLQ
    run.seed(1)
    run.receive_published(1)
    (published,) = run.sqs.receive_message(
        QueueUrl=run.queue_url, MaxNumberOfMessages=1, VisibilityTimeout=60
    )["Messages"]
    run.sqs.delete_message(QueueUrl=run.queue_url, ReceiptHandle=published["ReceiptHandle"])
    letter = JobMessage.model_validate_json(published["Body"])
    run.sqs.send_message(QueueUrl=run.dlq_url, MessageBody=published["Body"])
    # ... and the operator holds it, postpones it a month and unholds it (the runbook's way)
    until = datetime.now(UTC) + POSTPONED_FOR
    steps: tuple[Literal["hold", "postpone", "unhold"], ...] = ("hold", "postpone", "unhold")
    for command in steps:
        moved = control(
            backend,
            ControlRequest(
                command=command,
                keys=(letter.key,),
                reason="the vendor asked for a month",
                until=until if command == "postpone" else None,
            ),
            actor="drill",
        )
        run.check_equal(f"{command}: jobs moved", moved["moved"], 1)
    # Jobs due next year, their exact bodies sent to the work queue by someone who may send
    now = datetime.now(UTC)
    early = [NewJob(f"tenant-{i % 3}", f"early-{i:05d}", now + DUE_IN) for i in range(jobs)]
    schedule_jobs(run.ledger, run.runtime.policy, early, now)
    keys = [f"{run.policy}:{j.tenant_id}:{j.object_id}:v1" for j in early]
    before = {key: _job(run, key) for key in (*keys, letter.key)}
    run.send([producer_body(before[key], letter.batch_id) for key in keys])
    run.send([published["Body"]])  # the postponed job's body too, straight to work
    # The redrive that runs before its time keeps the postponed job's letter
    first = redrive(backend, RedriveCommand(), actor="drill")
    run.check_equal("redrive before its time: moved", first["moved"], 0)
    run.check_equal("redrive before its time: kept not due", first["kept_not_due"], 1)
    run.release_consumers()
    run.wait(
        "every early delivery is acknowledged",
        lambda: (
            run.metric(Metric.NOT_YET_DUE) >= jobs + 1
            and queue_depth(run.sqs, run.queue_url)[0] == 0
        ),
        SETTLE_TIMEOUT_SECONDS,
    )
    targets = [f"{j.tenant_id}/{j.object_id}" for j in early]
    postponed = [f"{letter.tenant_id}/{letter.object_id}"]
    run.check_equal("NotYetDue", run.metric(Metric.NOT_YET_DUE), jobs + 1)
    run.check_equal("vendor calls for jobs due next year", calls_to(run, targets), 0)
    run.check_equal("vendor calls for the postponed job", calls_to(run, postponed), 0)
    run.check_equal(
        "ledger rows as they were (status, due, next attempt, postponement)",
        sum(_times(_job(run, key)) != _times(row) for key, row in before.items()),
        0,
    )
    run.check_equal("postponed job's letter still in the DLQ", _dlq(run), 1)
    run.check_equal("its batch's audit: not yet due", _batch_not_yet_due(run, letter.batch_id), 1)
    # Then their time comes: each is called exactly once
    with psycopg.connect(run.console.database_url, autocommit=True) as conn, conn.transaction():
        now = datetime.now(UTC)
        if run.ledger.wake is not None:  # lowered first, as every write that makes work due
            lower_in(conn, run.ledger.wake, run.policy, now)
        conn.execute(
            TIME_PASSES_SQL, {"now": now, "policy": run.policy, "keys": [*keys, letter.key]}
        )
    run.fault_over()
    second = redrive(backend, RedriveCommand(), actor="drill")
    run.check_equal("redrive once its time has come: moved", second["moved"], 1)
    run.settle()
    run.check_equal("vendor calls per job due next year", calls_to(run, targets), jobs)
    run.check_equal("vendor calls for the postponed job at the end", calls_to(run, postponed), 1)


def _job(run: DrillRun, key: str) -> Job:
    from sweeper_local.drills import DrillError

    row = run.ledger.get(key)
    if row is None:
        raise DrillError(f"the drill's job {key} is not in the ledger")
    return row


def _times(row: Job) -> tuple[JobStatus, datetime, datetime, datetime | None]:
    return (row.status, row.due_at, row.next_attempt_at, row.postponed_until)


def _dlq(run: DrillRun) -> int:
    return queue_depth(run.sqs, run.dlq_url)[0]


def _batch_not_yet_due(run: DrillRun, batch_id: str) -> int | None:
    since = datetime.now(UTC) - timedelta(hours=1)
    rows = run.ledger.batch_audit(run.policy, since, 50)
    return next((row.not_yet_due for row in rows if row.batch_id == batch_id), None)

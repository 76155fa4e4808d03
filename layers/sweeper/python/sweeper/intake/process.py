"""The intake function's logic: an SQS batch of hints → one idempotent upsert → partial response.

A message is acknowledged (left out of `batchItemFailures`) only once the transaction holding
its hints has committed. A message that cannot be read is acknowledged unread and counted: the
same body would fail the same way on every delivery, and the ledger is unchanged by it.

Every readable message of a batch goes into one transaction (the upsert dedups and orders the
keys, see Ledger.schedule). If that transaction fails, each message is tried on its own, so
that one message the database refuses cannot hold back the others; what still fails comes back.
What failed because the ledger was unreachable comes back in seconds, not after the queue's
visibility timeout (sweeper.returns), as the consumer's records do.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any

from sweeper.config import Policy
from sweeper.errors import HintRejectedError, LedgerError, LedgerUnavailableError, sqlstate_of
from sweeper.intake.event_origin import check_event_origin
from sweeper.intake.hints import parse_queue_body
from sweeper.ledger.store import Ledger, ScheduleResult
from sweeper.models import NewJob
from sweeper.observability import Metric, MetricSink
from sweeper.params import ParamsRules
from sweeper.returns import Unsettled, return_soon
from sweeper.scheduling import schedule_jobs
from sweeper.sqs_queue import Visibility

logger = logging.getLogger(__name__)


@dataclass
class IntakeReport:
    messages: int = 0
    rejected: int = 0
    failed: int = 0
    hints: int = 0
    inserted: int = 0
    moved_earlier: int = 0
    unchanged: int = 0

    def add(self, result: ScheduleResult) -> None:
        self.inserted += result.inserted
        self.moved_earlier += result.moved_earlier
        self.unchanged += result.unchanged

    def as_dict(self) -> dict[str, int]:
        return asdict(self)


@dataclass(frozen=True)
class IntakeDeps:
    policy: Policy
    ledger: Ledger
    clock: Callable[[], datetime]
    metrics: MetricSink
    visibility: Visibility  # on the intake queue: what met an unreachable ledger returns soon
    rng: random.Random = field(default_factory=random.Random)


def process_intake_batch(
    event: dict[str, Any], deps: IntakeDeps
) -> tuple[dict[str, list[dict[str, str]]], IntakeReport]:
    """Upsert a batch's hints; return the partial batch response and what was done."""
    report = IntakeReport()
    rules = ParamsRules.of(deps.policy)
    readable: dict[str, list[NewJob]] = {}
    records: dict[str, Mapping[str, Any]] = {}
    for record in event.get("Records", []):
        report.messages += 1
        message_id = str(record.get("messageId", ""))
        records[message_id] = record
        try:
            body = str(record.get("body", ""))
            source, jobs = parse_queue_body(body, deps.policy.name, rules)
            if source == "event":
                # Only what the policy's own rules could have delivered.
                check_event_origin(body, deps.policy.intake.event_patterns)
        except HintRejectedError as exc:
            report.rejected += 1
            logger.error(
                "intake message rejected",
                extra={"message_id": message_id, "reason": exc.reason, "problems": exc.problems},
            )
            continue
        readable[message_id] = jobs
        report.hints += len(jobs)
        logger.debug("intake message", extra={"message_id": message_id, "source": source})

    failed, unreached = _upsert(readable, deps, report)
    report.failed = len(failed)
    return_soon(
        [Unsettled.of(records[m]) for m in unreached],
        deps.visibility,
        max_receive_count=deps.policy.intake.max_receive_count,
        rng=deps.rng,
        metrics=deps.metrics,
    )
    for name, value in (
        (Metric.HINTS_INSERTED, report.inserted),
        (Metric.HINTS_MOVED_EARLIER, report.moved_earlier),
        (Metric.HINTS_UNCHANGED, report.unchanged),
        (Metric.INTAKE_REJECTED, report.rejected),
        (Metric.INTAKE_FAILED, report.failed),
    ):
        deps.metrics.add_metric(name, "Count", value)
    return {"batchItemFailures": [{"itemIdentifier": m} for m in failed]}, report


def _upsert(
    readable: dict[str, list[NewJob]], deps: IntakeDeps, report: IntakeReport
) -> tuple[list[str], list[str]]:
    """The message ids whose hints did not commit, and those of them that met an unreachable
    ledger (the rest were refused by it)."""
    if not readable:
        return [], []
    now = deps.clock()
    try:
        everything = [job for jobs in readable.values() for job in jobs]
        report.add(schedule_jobs(deps.ledger, deps.policy, everything, now))
        return [], []
    except LedgerError:
        logger.warning("batch upsert failed; message by message", extra={"messages": len(readable)})
    failed: list[str] = []
    unreached: list[str] = []
    for message_id, jobs in readable.items():
        try:
            report.add(schedule_jobs(deps.ledger, deps.policy, jobs, now))
        except LedgerError as exc:
            if isinstance(exc, LedgerUnavailableError):
                unreached.append(message_id)
            # No traceback: the chained psycopg error's DETAIL can quote the row's values.
            logger.error(
                "intake upsert failed",
                extra={"message_ids": [message_id], "sqlstate": sqlstate_of(exc)},
            )
            failed.append(message_id)
    return failed, unreached

"""The consumer: settle each delivered job at most once, recording every outcome in the ledger.

Delivery is at least once and the effect is made idempotent twice over: the ledger is read once
per batch (an already settled job is acknowledged without a call), and the external call runs
inside Powertools idempotency keyed by the operation key, which the vendor also receives as its
`Idempotency-Key`. The named gap: the vendor may accept and the process die before the ledger
commit; the redelivery then reuses the same key, gets the stored (or the vendor's replayed)
result, and commits it (tests/integration/test_consumer.py drills both halves).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from aws_lambda_powertools.utilities.batch import (
    BatchProcessor,
    process_partial_response,
)
from aws_lambda_powertools.utilities.batch.types import PartialItemFailureResponse
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
from aws_lambda_powertools.utilities.idempotency.exceptions import (
    IdempotencyAlreadyInProgressError,
)
from pydantic import ValidationError

from sweeper.config import Policy
from sweeper.errors import MalformedMessageError, RetryableActionError
from sweeper.ledger.store import Ledger
from sweeper.models import SETTLED_STATUSES, ActionResult, JobMessage, JobStatus, OutcomeClass
from sweeper.observability import Metric, MetricSink

logger = logging.getLogger(__name__)

#: The guarded call: runs the action inside idempotency; raises RetryableActionError for an
#: outcome that settles nothing (so the idempotency record is released, not stored).
GuardedCall = Callable[[JobMessage, float | None], ActionResult]
Clock = Callable[[], datetime]


@dataclass(frozen=True, slots=True)
class ConsumerDeps:
    policy: Policy
    ledger: Ledger
    guarded_call: GuardedCall
    clock: Clock
    metrics: MetricSink


def parse_body(message_id: str, body: str) -> JobMessage:
    try:
        return JobMessage.model_validate_json(body)
    except ValidationError as exc:
        fields = sorted({".".join(str(p) for p in e["loc"]) or "(body)" for e in exc.errors()})
        raise MalformedMessageError(message_id, f"invalid fields {fields}") from exc


def process_batch(
    event: dict[str, Any],
    context: Any,
    deps: ConsumerDeps,
    processor: BatchProcessor,
    *,
    call_timeout: Callable[[], float | None] = lambda: None,
) -> PartialItemFailureResponse:
    """Handle one SQS batch; only the records that must come back are reported as failures."""
    parsed: dict[str, JobMessage | MalformedMessageError] = {}
    for raw in event.get("Records", []):
        message_id = str(raw.get("messageId", ""))
        try:
            parsed[message_id] = parse_body(message_id, str(raw.get("body", "")))
        except MalformedMessageError as exc:
            parsed[message_id] = exc
    keys = [m.key for m in parsed.values() if isinstance(m, JobMessage)]
    statuses = deps.ledger.statuses(keys)  # the one ledger read per batch

    def handle(record: SQSRecord) -> None:
        item = parsed.get(record.message_id)
        if item is None or isinstance(item, MalformedMessageError):
            # Never retried: the ledger still holds the job (if any) and its lease expires, so
            # acknowledging a body we cannot read loses nothing and cannot block the batch.
            deps.metrics.add_metric(Metric.MALFORMED, "Count", 1)
            logger.error(
                "malformed message dropped",
                extra={
                    "message_id": record.message_id,
                    "reason": getattr(item, "reason", "missing"),
                },
            )
            return
        _handle_job(item, statuses.get(item.key), deps, call_timeout())

    return process_partial_response(event, handle, processor, context)


def _handle_job(
    job: JobMessage, status: JobStatus | None, deps: ConsumerDeps, timeout: float | None
) -> None:
    ids = {"operation_key": job.key, "batch_id": job.batch_id}
    if status is None:
        deps.metrics.add_metric(Metric.ORPHANS, "Count", 1)
        logger.warning("message names no ledger job; dropped", extra=ids)
        return
    if status in SETTLED_STATUSES:
        deps.metrics.add_metric(Metric.DUPLICATES, "Count", 1)
        logger.info("already settled; acknowledged", extra={**ids, "status": status.value})
        return
    try:
        result = deps.guarded_call(job, timeout)
    except IdempotencyAlreadyInProgressError:
        deps.metrics.add_metric(Metric.IN_PROGRESS_ELSEWHERE, "Count", 1)
        raise
    except RetryableActionError as exc:
        if _record_unsettled(job, exc, deps):
            return  # terminal now: acknowledge, the ledger has the outcome
        raise
    deps.metrics.add_metric(Metric.ATTEMPTS_PREFIX + result.outcome.value, "Count", 1)
    now = deps.clock()
    if result.outcome.succeeded:
        if deps.ledger.mark_succeeded(job.key, result.outcome, now):
            deps.metrics.add_metric(Metric.SUCCEEDED, "Count", 1)
        else:
            deps.metrics.add_metric(Metric.DUPLICATES, "Count", 1)
        logger.info(
            "settled",
            extra={**ids, "outcome": result.outcome.value, "status_code": result.status_code},
        )
        return
    # The only other settled class is permanent: terminal at once, never retried.
    deps.ledger.mark_failed(job.key, result.outcome, result.code, now, count_attempt=True)
    deps.metrics.add_metric(Metric.TERMINAL_FAILURES, "Count", 1)
    logger.warning("terminal", extra={**ids, "outcome": result.outcome.value, "code": result.code})


def _record_unsettled(job: JobMessage, exc: RetryableActionError, deps: ConsumerDeps) -> bool:
    """Record an attempt that settled nothing; past the policy's max attempts it is terminal.

    Returns True when the job became terminal (exhausted) and the message can be acknowledged.
    """
    outcome = OutcomeClass(exc.outcome)
    deps.metrics.add_metric(Metric.ATTEMPTS_PREFIX + outcome.value, "Count", 1)
    now = deps.clock()
    attempts = deps.ledger.record_attempt(job.key, outcome, exc.code, now)
    ids = {
        "operation_key": job.key,
        "outcome": outcome.value,
        "code": exc.code,
        "attempts": attempts,
    }
    if attempts is not None and attempts >= deps.policy.max_attempts:
        deps.ledger.mark_failed(job.key, outcome, "exhausted", now, count_attempt=False)
        deps.metrics.add_metric(Metric.TERMINAL_FAILURES, "Count", 1)
        logger.warning("attempts exhausted; terminal", extra=ids)
        return True
    deps.metrics.add_metric(Metric.RETRIES, "Count", 1)
    logger.info("will retry", extra=ids)
    return False


def guard_with_idempotency(
    perform: Callable[[JobMessage, float | None], ActionResult],
    idempotent: Callable[[Callable[..., ActionResult]], Callable[..., ActionResult]],
) -> GuardedCall:
    """Wrap an action so only settled outcomes are stored as completed idempotency records."""

    def call(job: JobMessage, timeout_seconds: float | None) -> ActionResult:
        result = perform(job, timeout_seconds)
        if not result.outcome.settled:
            raise RetryableActionError(
                job.key, result.outcome.value, result.status_code, result.code
            )
        return result

    wrapped = idempotent(call)
    return lambda job, timeout: wrapped(job=job, timeout_seconds=timeout)

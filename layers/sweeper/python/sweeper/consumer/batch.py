"""Batch processing: one SQS batch parsed, checked against the ledger and handled in parallel.

`process_batch` reads the ledger once for the whole batch, drops what it cannot trust (a
malformed body, a key the ledger does not hold, a body that disagrees with its row), and hands
each remaining record to its delivery (delivery.py) through Powertools' partial batch response,
so only the records that must come back are reported as failures. Records that met an
unreachable ledger come back in seconds, not after the visibility timeout (sweeper.returns).
ParallelBatchProcessor
handles up to `consumer.parallel_calls` records at a time, its threads taking the records in
an order (InOrder, or sweeper.admission's BankedFirst: a record whose scope has a banked slot
first).
"""

from __future__ import annotations

import logging
import threading
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager, nullcontext
from dataclasses import replace
from typing import Any, Protocol

from aws_lambda_powertools.utilities.batch import (
    BatchProcessor,
    EventType,
    process_partial_response,
)
from aws_lambda_powertools.utilities.batch.types import PartialItemFailureResponse
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
from pydantic import ValidationError

from sweeper.admission import Clocks, admission_for
from sweeper.consumer.batch_log import BatchLog, Outcome
from sweeper.consumer.delivery import ConsumerDeps, _Delivery
from sweeper.errors import LedgerUnavailableError, MalformedMessageError
from sweeper.models import ActionCall, JobMessage, LedgerTarget
from sweeper.observability import Metric, MetricSink
from sweeper.returns import Unsettled, return_soon
from sweeper.sqs_queue import trace_id

logger = logging.getLogger(__name__)


class ParallelBatchProcessor(BatchProcessor):
    """Powertools' SQS BatchProcessor, handling up to `parallel_calls` records at a time.

    Only `process` changes: each record still goes through Powertools' `_process_record`, so
    the partial batch response (success and failure lists, one entry per record) is built by
    Powertools as before; appending to those lists is safe from threads. Threads, not asyncio:
    the work is waiting on the vendor, DynamoDB and the ledger, whose clients are synchronous.
    """

    def __init__(self, parallel_calls: int) -> None:
        # A batch whose every record failed is still a partial response, not a function error:
        # the Errors alarm is for bugs, and the records come back either way.
        super().__init__(event_type=EventType.SQS, raise_on_entire_batch_failure=False)
        if parallel_calls < 1:
            raise ValueError("parallel_calls must be at least 1")
        self.parallel_calls = parallel_calls
        self._order: Callable[[list[dict[str, Any]]], RecordOrder] = InOrder

    @contextmanager
    def taking(self, order: Callable[[list[dict[str, Any]]], RecordOrder]) -> Iterator[None]:
        """Within the block, the threads take the batch's records in `order`."""
        previous, self._order = self._order, order
        try:
            yield
        finally:
            self._order = previous

    def process(self) -> list[tuple[Any, ...]]:
        workers = min(self.parallel_calls, len(self.records))
        if workers <= 1:
            return super().process()
        order = self._order(self.records)
        results: list[tuple[Any, ...]] = [()] * len(self.records)

        def work() -> None:
            while (index := order.take()) is not None:
                results[index] = self._process_record(self.records[index])

        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="sweeper-call") as pool:
            for worker in [pool.submit(work) for _ in range(workers)]:
                worker.result()
        return results


class RecordOrder(Protocol):
    def take(self) -> int | None:
        """The index of the next record for the calling thread, None when none is left."""


class InOrder:
    """The records as received (for a batch from the producer: tenants and scopes taking turns)."""

    def __init__(self, records: Sequence[object]) -> None:
        self._left = iter(range(len(records)))
        self._lock = threading.Lock()

    def take(self) -> int | None:
        with self._lock:
            return next(self._left, None)


class _LockedSink:
    """A MetricSink safe to share between a batch's threads (Powertools Metrics is not)."""

    def __init__(self, inner: MetricSink) -> None:
        self._inner = inner
        self._lock = threading.Lock()

    def add_metric(self, name: str, unit: str, value: float) -> None:
        with self._lock:
            self._inner.add_metric(name, unit, value)


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
    try:
        targets = deps.ledger.targets(keys)  # the one ledger read per batch
    except LedgerUnavailableError:
        # The whole batch comes back, soon; the invocation still fails (the Errors alarm).
        _return_soon([Unsettled.of(raw) for raw in event.get("Records", [])], deps)
        raise
    # Every record of the batch is judged at this one instant, the read's: whether its job's
    # time has come (LedgerTarget.callable_at) is decided once, here, never from a body.
    now = deps.clock()
    early: set[str] = set()  # message ids of deliveries before their job's time
    early_keys: list[str] = []
    deps = replace(deps, metrics=_LockedSink(deps.metrics))
    scopes: dict[str, str] = {}  # message id -> scope, for the records that will ask for a slot
    calls_by_scope: Counter[str] = Counter()  # per scope, the records that will reach `done`
    disagree: dict[str, list[str]] = {}  # message id -> the fields its body and row differ in
    for message_id, item in parsed.items():
        target = targets.get(item.key) if isinstance(item, JobMessage) else None
        if target is None or not isinstance(item, JobMessage):
            continue
        disagree[message_id] = _disagreements(item, target, deps)
        if target.early_at(now) and not disagree[message_id]:
            early.add(message_id)
            early_keys.append(target.operation_key)
            continue
        calls_by_scope[target.scope] += 1  # a settled job's record is finished through `done` too
        if target.callable_at(now):
            scopes[message_id] = target.scope
    _count_not_yet_due(early_keys, event, deps)
    parallel = processor.parallel_calls if isinstance(processor, ParallelBatchProcessor) else 1
    clocks = Clocks(deps.sleep, deps.now, deps.monotonic, deps.rng, deps.metrics)
    admissions = admission_for(deps.policy, deps.limiter, clocks, parallel, calls_by_scope)
    # Two deliveries of one job in a batch run one after the other (the second then finds the
    # first's stored result), never side by side, where the second would only find it in flight.
    same_job = {key: threading.Lock() for key, n in Counter(keys).items() if n > 1}

    @contextmanager
    def alone(key: str) -> Iterator[None]:
        with same_job.get(key) or nullcontext():
            yield

    unreached: list[Unsettled] = []  # appended from the batch's threads (list.append is atomic)
    outcomes = BatchLog()  # how each record ended: one line when the batch ends (batch_log.py)

    def handle(record: SQSRecord) -> None:
        try:
            deliver(record)
        except LedgerUnavailableError:
            unreached.append(Unsettled.of(record.raw_event))
            raise  # a batch item failure, as before, but back in seconds

    def deliver(record: SQSRecord) -> None:
        item = parsed.get(record.message_id)
        if item is None or isinstance(item, MalformedMessageError):
            # Never retried: the ledger still holds the job (if any) and its lease expires, so
            # acknowledging a body we cannot read loses nothing and cannot block the batch.
            deps.metrics.add_metric(Metric.MALFORMED, "Count", 1)
            outcomes.count(Outcome.MALFORMED, record.message_id)
            logger.error(
                "malformed message dropped",
                extra={
                    "message_id": record.message_id,
                    "reason": getattr(item, "reason", "missing"),
                },
            )
            return
        target = targets.get(item.key)
        # The X-Ray trace the producer sent this record in (SQS's AWSTraceHeader): every log
        # line about the record carries it, so one job can be found in logs and traces alike.
        trace = trace_id(record.attributes.aws_trace_header)
        ids = {"message_id": record.message_id, "operation_key": item.key, "trace_id": trace}
        if target is None:
            deps.metrics.add_metric(Metric.ORPHANS, "Count", 1)
            outcomes.count(Outcome.ORPHAN, item.key)
            logger.warning("message names no ledger job; dropped", extra=ids)
            return
        fields = disagree[record.message_id]
        if fields:
            # A body can only ever cause what the ledger holds for its key. One that names
            # another target, scope or policy is dropped unanswered: the job stays in the
            # ledger as it was (a leased row's lease expires and is reclaimed), so nothing is lost.
            deps.metrics.add_metric(Metric.MISMATCHED, "Count", 1)
            outcomes.count(Outcome.MISMATCHED, item.key)
            logger.error(
                "message disagrees with its ledger row; dropped", extra={**ids, "fields": fields}
            )
            return
        if record.message_id in early:
            # Its job's time has not come (a body sent early, a dead letter moved back before a
            # postponement ends): acknowledged uncalled. The row keeps its future as it is: the
            # producer publishes the job when it is due (a leased row once its lease expires).
            deps.metrics.add_metric(Metric.NOT_YET_DUE, "Count", 1)
            outcomes.count(Outcome.NOT_YET_DUE, item.key)
            logger.warning(
                "job not yet due; acknowledged uncalled",
                extra={**ids, "status": target.status, "not_before": target.not_before},
            )
            return
        call = ActionCall.for_delivery(target, item)
        with alone(item.key):
            started = deps.now()
            try:
                delivery = _Delivery(
                    call,
                    record.receipt_handle,
                    deps,
                    call_timeout,
                    admissions,
                    trace_id=trace,
                    outcomes=outcomes,
                )
                delivery.handle(target, now)
            finally:
                deps.metrics.add_metric(
                    Metric.PROCESSING_SECONDS, "Seconds", max(0.0, deps.now() - started)
                )

    ordered = (
        processor.taking(lambda records: admissions.order(records, scopes))
        if isinstance(processor, ParallelBatchProcessor)
        else nullcontext()
    )
    try:
        with ordered:
            response = process_partial_response(event, handle, processor, context)
    finally:
        # Once per batch, zero included: a batch that called nothing still reports its scopes idle.
        deps.metrics.add_metric(Metric.LIMITER_SLOTS_USED, "Count", admissions.used)
        outcomes.write(logger, len(event.get("Records", [])))
    _return_soon(unreached, deps)
    _count_dead_letter_bound(event, response, deps)
    return response


def _disagreements(item: JobMessage, target: LedgerTarget, deps: ConsumerDeps) -> list[str]:
    """The fields in which a body disagrees with its key's ledger row (or this consumer)."""
    fields = item.disagreements(target)
    if target.policy != deps.policy.name:
        fields.append("consumer_policy")
    return fields


def _count_not_yet_due(keys: Sequence[str], event: dict[str, Any], deps: ConsumerDeps) -> None:
    """Count the batch's early deliveries in the audit of the batches that carry their jobs
    (a statement only when there are any). An unreachable ledger returns the whole batch soon,
    as for the batch's read: nothing has been called yet."""
    if not keys:
        return
    try:
        deps.ledger.count_not_yet_due(keys)
    except LedgerUnavailableError:
        _return_soon([Unsettled.of(raw) for raw in event.get("Records", [])], deps)
        raise


def _return_soon(unreached: Sequence[Unsettled], deps: ConsumerDeps) -> None:
    """One ChangeMessageVisibilityBatch per ten records that met an unreachable ledger."""
    return_soon(
        unreached,
        deps.visibility,
        max_receive_count=deps.policy.consumer.max_receive_count,
        rng=deps.rng,
        metrics=deps.metrics,
    )


def _count_dead_letter_bound(
    event: dict[str, Any], response: PartialItemFailureResponse, deps: ConsumerDeps
) -> None:
    """Count the records returned on their last allowed receive: the DLQ is their next stop."""
    returned = {str(item.get("itemIdentifier")) for item in response.get("batchItemFailures", [])}
    limit = deps.policy.consumer.max_receive_count
    for raw in event.get("Records", []):
        if str(raw.get("messageId", "")) not in returned:
            continue
        try:
            receives = int(raw.get("attributes", {}).get("ApproximateReceiveCount", 0))
        except (TypeError, ValueError):
            continue
        if receives >= limit:
            deps.metrics.add_metric(Metric.DEAD_LETTER_BOUND, "Count", 1)

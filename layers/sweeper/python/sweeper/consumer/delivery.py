"""The consumer: settle each delivered job at most once, recording every outcome in the ledger.

Delivery is at least once and the effect is made idempotent twice over: the ledger is read once
per batch (an already settled job is acknowledged without a call), and the external call runs
inside Powertools idempotency keyed by the operation key, which the vendor also receives as its
`Idempotency-Key`. The named gap: the vendor may accept and the process die before the ledger
commit; the redelivery then reuses the same key, gets the stored (or the vendor's replayed)
result, and commits it (tests/integration/test_consumer.py drills both halves).

Before calling, a record takes a slot from the limiter its scope shares with every consumer; a
closed gate or a slot too far away returns the message to the queue, visible again when the wait
is over. Waiting never counts as an attempt. Each outcome class has its own path:

| class                | ledger                              | message                          |
|----------------------|-------------------------------------|----------------------------------|
| accepted, absent     | succeeded                           | deleted                          |
| permanent            | failed (terminal), one attempt      | deleted                          |
| throttled            | next attempt at the reopening       | back when the gate reopens       |
| auth                 | next attempt when the circuit ends  | back when the circuit ends       |
| transient, unknown   | one attempt, retry after a backoff  | back after the backoff           |
| ... past max attempts| failed ("exhausted")                | deleted                          |
"""

from __future__ import annotations

import logging
import math
import random
import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any, NoReturn, Protocol

from aws_lambda_powertools.utilities.batch import (
    BatchProcessor,
    EventType,
    process_partial_response,
)
from aws_lambda_powertools.utilities.batch.types import PartialItemFailureResponse
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
from aws_lambda_powertools.utilities.idempotency.exceptions import (
    IdempotencyAlreadyInProgressError,
)
from pydantic import ValidationError

from sweeper.config import LATE_SLOT_TOLERANCE_SECONDS, Policy
from sweeper.errors import MalformedMessageError, RetryableActionError, SweeperError
from sweeper.ledger.store import Ledger
from sweeper.limiter import Adaptive, Denial, Grant, Limiter, close_delay, retry_delay
from sweeper.models import (
    SETTLED_STATUSES,
    ActionCall,
    ActionResult,
    JobMessage,
    JobStatus,
    OutcomeClass,
)
from sweeper.observability import Metric, MetricSink
from sweeper.queue import Visibility

logger = logging.getLogger(__name__)

#: Called inside the guarded call right before the request is sent: waits for the rate slot
#: (or raises Deferred) and returns the call's timeout. Taking the slot there, after the
#: idempotency record is written, keeps the gap between slot and send to a minimum.
Prepare = Callable[[], float | None]
#: The guarded call: runs the action inside idempotency; raises RetryableActionError for an
#: outcome that settles nothing (so the idempotency record is released, not stored).
GuardedCall = Callable[[ActionCall, Prepare], ActionResult]
Clock = Callable[[], datetime]

#: A slot further than this after the batch's last look at an open gate (a gate read, or a
#: granted reservation) is looked at again before it. With the late-slot tolerance, a call is
#: sent at most IN_FLIGHT_BOUND_SECONDS after its consumer last saw the gate open: calls past
#: that last look are in flight, all others obey a closure.
GATE_RECHECK_LEAD_SECONDS = 0.1
#: That look is made this long before its slot: the read has this long, and the late-slot
#: tolerance, to answer (a strongly consistent GetItem takes milliseconds). Made later than
#: GATE_RECHECK_LEAD_SECONDS before the slot, one look also covers the slots of its scope that
#: follow within the rest of that lead, whichever of the batch's threads holds them: the next
#: few slots of a block at 100/s, so about one read per block rather than one per call.
GATE_READ_LEAD_SECONDS = 0.05
IN_FLIGHT_BOUND_SECONDS = GATE_RECHECK_LEAD_SECONDS + LATE_SLOT_TOLERANCE_SECONDS
#: Below this much Lambda time, a record is not called but returned at once.
MIN_CALL_SECONDS = 1.0
#: Spreads the return of records that waited for a token, so they do not all come back at once.
RATE_DEFERRAL_JITTER_SECONDS = 0.5


class Deferred(SweeperError):
    """The record goes back to the queue on purpose (a wait, not a failure)."""


@dataclass(frozen=True, slots=True)
class ConsumerDeps:
    policy: Policy
    ledger: Ledger
    guarded_call: GuardedCall
    clock: Clock
    metrics: MetricSink
    limiter: Limiter
    visibility: Visibility
    sleep: Callable[[float], None] = time.sleep
    now: Callable[[], float] = time.time  # epoch seconds, the limiter's clock
    rng: random.Random = field(default_factory=random.Random)


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


class BankedFirst:
    """The records as received, except that a thread first takes a record of a scope whose
    slots the batch has banked and no other thread is on its way to (`BatchSlots.offer`).

    Without it the thread for a banked slot is whichever reaches that scope's next record in
    the batch's order: with ten scopes taking turns, ten records on, after the slot has passed
    (measured: blocks of one slot at 10/s per scope, 3.1 DynamoDB writes per job).
    """

    def __init__(
        self, records: Sequence[Mapping[str, Any]], scopes: Mapping[str, str], slots: BatchSlots
    ) -> None:
        self._slots = slots
        self._next = deque(range(len(records)))
        self._by_scope: dict[str, deque[int]] = {}
        for index, record in enumerate(records):
            scope = scopes.get(str(record.get("messageId", "")))
            if scope is not None:
                self._by_scope.setdefault(scope, deque()).append(index)
        self._taken = [False] * len(records)
        self._lock = threading.Lock()

    def take(self) -> int | None:
        with self._lock:
            scope = self._slots.offer(self._has_left)
            index = None if scope is None else self._first(self._by_scope[scope])
            if index is None:  # no bank offered, or (not expected) none of its records left
                index = self._first(self._next)
            if index is None:
                return None
            self._taken[index] = True
            return index

    def _has_left(self, scope: str) -> bool:
        queue = self._by_scope.get(scope)
        return queue is not None and self._first(queue) is not None

    def _first(self, queue: deque[int]) -> int | None:
        while queue and self._taken[queue[0]]:
            queue.popleft()
        return queue[0] if queue else None


class _LockedSink:
    """A MetricSink safe to share between a batch's threads (Powertools Metrics is not)."""

    def __init__(self, inner: MetricSink) -> None:
        self._inner = inner
        self._lock = threading.Lock()

    def add_metric(self, name: str, unit: str, value: float) -> None:
        with self._lock:
            self._inner.add_metric(name, unit, value)


#: A slot block covers at least this share of a batch's threads (rounded up: 3 of 10). Threads
#: in a call finish one every latency / threads seconds, so some ask before the block's slots
#: pass. Measured at 100/s, 4 environments x 10 threads, vendor p50 150 ms (docs/decisions.md):
#: free threads only made 0.8 limiter writes per job; at least 3 made 0.4 with no late slot.
BLOCK_SHARE_OF_THREADS = 0.3
#: A block spans at most this long from its first slot to its last: its threads hold their slots
#: until then, and are not free for the batch's other scopes meanwhile (three slots at 10/s,
#: eleven at 50/s). Measured at ten scopes of 10/s (docs/decisions.md): 0.25 s cost more calls
#: than the writes it saved.
BLOCK_SPAN_SECONDS = 0.2


class BatchSlots:
    """The limiter slots of one batch: reserved several in one write, handed out one per call.

    When a record needs a slot and none is banked for its scope, one write reserves a slot for
    each thread that may ask within moments: at most the batch's records of that scope not yet
    called, and at most BLOCK_SPAN_SECONDS from the first slot to the last. A free thread comes
    for a banked slot whatever the scope of the batch's next record (`offer`, BankedFirst). The
    slots keep their exact times; a banked slot whose time has passed (beyond the late
    tolerance) is let go, never used late. With `parallel_calls = 1` this is one slot per
    write, as before. Shared by the batch's threads.
    """

    def __init__(
        self,
        limiter: Limiter,
        parallel_calls: int,
        calls_by_scope: Mapping[str, int],
        now: Callable[[], float],
        metrics: MetricSink,
        adaptive: Adaptive | None = None,
    ) -> None:
        self._limiter = limiter
        self._adaptive = adaptive
        self._parallel = parallel_calls
        self._pending = Counter(calls_by_scope)  # records of each scope yet to take a slot
        self._now = now
        self._metrics = metrics
        self._banked: dict[str, deque[float]] = {}
        self._open_at: dict[str, float] = {}  # per scope: the latest look that saw it open
        self._calling = 0  # threads between their slot and their outcome
        self._holding: set[object] = set()  # records with a slot granted, waiting for its time
        self.used = 0  # slots taken and called in (a slot let go unused does not count)
        self._lock = threading.Lock()  # the state above; never held across a network call
        self._writing: dict[str, threading.Lock] = {}  # per scope: one reservation at a time
        self._closures: Counter[str] = Counter()  # per scope: how often `forget` was called
        self._coming: dict[int, str] = {}  # thread id -> scope of the banked slot it was offered

    def reserve(
        self, scope: str, interval: float, horizon: float, holder: object
    ) -> tuple[float, Grant | Denial]:
        """One slot (or a denial) for `holder` (a record's delivery), and when the gate was
        last seen open for it.

        The batch's shared state is locked only to read and update it, never across the
        limiter's write (a network round trip): a thread whose slot has come must not wait
        behind another scope's reservation before it calls (measured: calls sent up to 0.12 s
        after their slots, 429s from a strict vendor). One write per scope at a time: a thread
        asking while its scope's write is out waits for it, then takes a slot from its block.
        """
        with self._scope_lock(scope):
            with self._lock:
                self._coming.pop(threading.get_ident(), None)
                self._holding.discard(holder)  # asking again: a slot it held was let go
                banked = self._take_banked(scope)
                if banked is not None:
                    self._holding.add(holder)
                    return self._open_at[scope], Grant(banked)
                count = self._block_size(scope, interval)
                closures = self._closures[scope]
            requested = self._now()
            decision = self._limiter.reserve(scope, interval, horizon, count, self._adaptive)
            if not isinstance(decision, Grant):
                return requested, decision
            with self._lock:
                self._holding.add(holder)
                # A look at an open gate, and banked, only if the gate did not close during the
                # write (see `forget`).
                if self._closures[scope] == closures:
                    self._saw_open(scope, requested)
                    if decision.count > 1:
                        first, *rest = decision.slots
                        self._banked[scope] = deque(rest)
                        return requested, Grant(first)
            return requested, decision

    def covers(self, scope: str, slot_at: float) -> bool:
        """Whether the batch's last look at an open gate of `scope` (a gate read or a granted
        reservation, by any of its threads) is recent enough for a call at `slot_at`."""
        with self._lock:
            seen = self._open_at.get(scope)
        return seen is not None and slot_at - seen <= GATE_RECHECK_LEAD_SECONDS

    def saw_open(self, scope: str, at: float) -> None:
        """A gate read asked at `at` found `scope` open."""
        with self._lock:
            self._saw_open(scope, at)

    def _saw_open(self, scope: str, at: float) -> None:
        self._open_at[scope] = max(at, self._open_at.get(scope, at))

    def offer(self, has_records: Callable[[str], bool]) -> str | None:
        """The scope whose banked slot the calling thread should take a record for: the earliest
        live banked slot that no other thread was offered, among the scopes `has_records`
        says have a record left for the thread to take; None if there is none.

        The thread is then on its way to that slot until it asks (`reserve`), finishes its
        record (`done`), or is offered again. Threads are told apart by their id: the thread
        that takes the record is the one that asks for its slot.
        """
        me = threading.get_ident()
        with self._lock:
            self._coming.pop(me, None)
            coming = Counter(self._coming.values())
            best: tuple[float, str] | None = None
            for scope in list(self._banked):
                bank = self._live_bank(scope)
                if len(bank) <= coming[scope] or (best is not None and bank[0] >= best[0]):
                    continue  # every slot spoken for, or one sooner found
                if has_records(scope):
                    best = (bank[0], scope)
            if best is None:
                return None
            self._coming[me] = best[1]
            return best[1]

    def _scope_lock(self, scope: str) -> threading.Lock:
        with self._lock:
            return self._writing.setdefault(scope, threading.Lock())

    def _take_banked(self, scope: str) -> float | None:
        """The next banked slot of `scope` not yet past (those past are let go and counted)."""
        bank = self._live_bank(scope)
        return bank.popleft() if bank else None

    def _live_bank(self, scope: str) -> deque[float]:
        """The banked slots of `scope`, those already past let go (and counted)."""
        bank = self._banked.setdefault(scope, deque())
        while bank and bank[0] < self._now() - LATE_SLOT_TOLERANCE_SECONDS:
            bank.popleft()
            self._metrics.add_metric(Metric.LATE_SLOTS, "Count", 1)
        return bank

    def _block_size(self, scope: str, interval: float) -> int:
        """How many slots one write reserves for `scope` (see the class docstring)."""
        # Threads that may ask within moments: those neither calling nor already holding a
        # slot they wait for (counting these too banked slots nobody came for, let go late),
        # and at least a share of the threads: some calls end within the block's span. Not cut
        # to this scope's share of the records: a free thread takes a banked slot's record first.
        free = self._parallel - self._calling - len(self._holding)
        asking = max(free, self._parallel * BLOCK_SHARE_OF_THREADS)
        # + 1e-9: a span of a whole number of intervals counts them all (0.3 / 0.1 is 2.999...)
        span = 1 + math.floor(BLOCK_SPAN_SECONDS / interval + 1e-9)
        return max(1, min(self._pending[scope], math.ceil(asking), span))

    def calling(self, scope: str, holder: object) -> None:
        """A record took its slot and is calling."""
        with self._lock:
            self._holding.discard(holder)
            self._pending[scope] -= 1
            self._calling += 1
            self.used += 1

    def done(self, scope: str, called: bool, holder: object) -> None:
        """A record is finished with (called or not): it will ask for no more slots."""
        with self._lock:
            self._coming.pop(threading.get_ident(), None)
            self._holding.discard(holder)
            if called:
                self._calling -= 1
            else:
                self._pending[scope] -= 1

    def forget(self, scope: str) -> None:
        """The gate of `scope` closed: banked slots are not used, and no earlier look at it
        counts as open."""
        with self._lock:
            self._banked.pop(scope, None)
            self._open_at.pop(scope, None)
            self._closures[scope] += 1


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
    targets = deps.ledger.targets(keys)  # the one ledger read per batch
    deps = replace(deps, metrics=_LockedSink(deps.metrics))
    scopes: dict[str, str] = {}  # message id -> scope, for the records that will ask for a slot
    calls_by_scope: Counter[str] = Counter()  # per scope, the records that will reach `done`
    for message_id, item in parsed.items():
        target = targets.get(item.key) if isinstance(item, JobMessage) else None
        if target is None:
            continue
        calls_by_scope[target.scope] += 1  # a settled job's record is finished through `done` too
        if target.status not in SETTLED_STATUSES:
            scopes[message_id] = target.scope
    parallel = processor.parallel_calls if isinstance(processor, ParallelBatchProcessor) else 1
    slots = BatchSlots(
        deps.limiter,
        parallel,
        calls_by_scope,
        deps.now,
        deps.metrics,
        deps.policy.quota.adaptive_spec,
    )
    # Two deliveries of one job in a batch run one after the other (the second then finds the
    # first's stored result), never side by side, where the second would only find it in flight.
    same_job = {key: threading.Lock() for key, n in Counter(keys).items() if n > 1}

    @contextmanager
    def alone(key: str) -> Iterator[None]:
        with same_job.get(key) or nullcontext():
            yield

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
        target = targets.get(item.key)
        ids = {"message_id": record.message_id, "operation_key": item.key}
        if target is None:
            deps.metrics.add_metric(Metric.ORPHANS, "Count", 1)
            logger.warning("message names no ledger job; dropped", extra=ids)
            return
        fields = item.disagreements(target)
        if target.policy != deps.policy.name:
            fields.append("consumer_policy")
        if fields:
            # A body can only ever cause what the ledger holds for its key. One that names
            # another target, scope or policy is dropped unanswered: the job stays in the
            # ledger as it was (a leased row's lease expires and is reclaimed), so nothing is lost.
            deps.metrics.add_metric(Metric.MISMATCHED, "Count", 1)
            logger.error(
                "message disagrees with its ledger row; dropped", extra={**ids, "fields": fields}
            )
            return
        call = ActionCall.for_delivery(target, item)
        with alone(item.key):
            started = deps.now()
            try:
                delivery = _Delivery(call, record.receipt_handle, deps, call_timeout, slots)
                delivery.handle(target.status)
            finally:
                deps.metrics.add_metric(
                    Metric.PROCESSING_SECONDS, "Seconds", max(0.0, deps.now() - started)
                )

    ordered = (
        processor.taking(lambda records: BankedFirst(records, scopes, slots))
        if isinstance(processor, ParallelBatchProcessor)
        else nullcontext()
    )
    try:
        with ordered:
            response = process_partial_response(event, handle, processor, context)
    finally:
        # Once per batch, zero included: a batch that called nothing still reports its scopes idle.
        deps.metrics.add_metric(Metric.LIMITER_SLOTS_USED, "Count", slots.used)
    _count_dead_letter_bound(event, response, deps)
    return response


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


class _Delivery:
    """One record's way through the limiter, the call and the outcome paths."""

    def __init__(
        self,
        job: ActionCall,
        receipt_handle: str,
        deps: ConsumerDeps,
        call_timeout: Callable[[], float | None],
        slots: BatchSlots,
    ) -> None:
        self.job = job
        self.receipt = receipt_handle
        self.deps = deps
        self.call_timeout = call_timeout
        self.slots = slots
        self.called = False
        self.ids = {"operation_key": job.key, "batch_id": job.batch_id, "scope": job.scope}

    def handle(self, status: JobStatus) -> None:
        try:
            self._handle(status)
        finally:
            self.slots.done(self.job.scope, self.called, self)

    def _handle(self, status: JobStatus) -> None:
        deps = self.deps
        if status in SETTLED_STATUSES:
            deps.metrics.add_metric(Metric.DUPLICATES, "Count", 1)
            logger.info("already settled; acknowledged", extra={**self.ids, "status": status})
            return
        try:
            result = deps.guarded_call(self.job, self._take_slot)
        except IdempotencyAlreadyInProgressError:
            # Another delivery of the same job is calling right now: come back after it.
            deps.metrics.add_metric(Metric.IN_PROGRESS_ELSEWHERE, "Count", 1)
            self._return_in(math.ceil(self.call_timeout() or 5.0), outcome=None, code=None)
            raise
        except RetryableActionError as exc:
            self._unsettled(exc)
            return
        self._settled(result)

    # -- before the call ------------------------------------------------------------------------

    def _take_slot(self) -> float | None:
        """Wait for this scope's next slot (in place, or by going back to the queue).

        Returns the call's timeout; raises Deferred when the record goes back to the queue.
        """
        deps = self.deps
        quota = deps.policy.quota
        throttle = deps.policy.throttle
        waited = False
        while True:
            timeout = self.call_timeout()
            if timeout is not None and timeout < MIN_CALL_SECONDS:
                self._return_in(0.0, outcome=None, code=None)
                raise Deferred("no Lambda time left for a call")
            horizon = throttle.max_wait_seconds
            if timeout is not None:
                horizon = max(0.0, min(horizon, timeout - MIN_CALL_SECONDS))
            requested, decision = self.slots.reserve(
                self.job.scope, quota.interval_seconds, horizon, self
            )
            now = deps.now()
            if isinstance(decision, Denial):
                wait = decision.retry_at - now
                if decision.reason != "rate":
                    wait += deps.rng.uniform(0.0, throttle.reopen_jitter_seconds)
                if not waited:
                    waited = True
                    deps.metrics.add_metric(
                        Metric.LIMITER_WAITS
                        if decision.reason == "rate"
                        else Metric.GATE_DEFERRALS,
                        "Count",
                        1,
                    )
                if wait <= horizon:
                    deps.sleep(max(0.0, wait))  # a short wait in place: no queue round trip
                    continue
                self._defer(decision, wait)
            wait = decision.slot_at - now
            if wait < -LATE_SLOT_TOLERANCE_SECONDS:
                # The reservation itself took long enough that its slot has passed: calling now
                # would arrive late and bunch up with the next slot's call. Let it go unused.
                deps.metrics.add_metric(Metric.LATE_SLOTS, "Count", 1)
                continue
            if wait > 0 and not waited:
                deps.metrics.add_metric(Metric.LIMITER_WAITS, "Count", 1)
            if decision.slot_at - requested > GATE_RECHECK_LEAD_SECONDS:
                # The reservation saw the gate open, but its slot is further away than the lead:
                # the gate may close meanwhile. Look once more before the slot, unless another
                # thread's look by then covers it. Every call is thus sent at most the lead
                # after the batch's last look at an open gate.
                if wait > GATE_READ_LEAD_SECONDS:
                    deps.sleep(wait - GATE_READ_LEAD_SECONDS)
                if not self.slots.covers(self.job.scope, decision.slot_at):
                    looked = deps.now()
                    state = deps.limiter.state(self.job.scope)
                    if state.closed(deps.now()) and state.closed_until is not None:
                        # Closed while we waited: this slot is given up, never used, and no
                        # other thread of the batch calls on an earlier look.
                        self.slots.forget(self.job.scope)
                        gate = Denial(state.closed_until, "throttled")
                        deps.metrics.add_metric(Metric.GATE_DEFERRALS, "Count", 1)
                        self._defer(gate, state.closed_until - deps.now())
                    self.slots.saw_open(self.job.scope, looked)
                wait = decision.slot_at - deps.now()
                if wait < -LATE_SLOT_TOLERANCE_SECONDS:
                    deps.metrics.add_metric(Metric.LATE_SLOTS, "Count", 1)
                    continue  # the read was slow: this slot has passed, take another
            if wait > 0:
                deps.sleep(wait)
                if deps.now() - decision.slot_at > LATE_SLOT_TOLERANCE_SECONDS:
                    # Woken too late (a loaded machine, a paused environment): sent now, this
                    # call could arrive in the next slot's window. Let it go, take another.
                    deps.metrics.add_metric(Metric.LATE_SLOTS, "Count", 1)
                    continue
            self.called = True
            self.slots.calling(self.job.scope, self)
            return self.call_timeout()

    def _defer(self, denial: Denial, wait: float) -> NoReturn:
        """Return the message until the wait is over; the ledger learns when it may run."""
        if denial.reason == "rate":
            self.deps.metrics.add_metric(Metric.LIMITER_DEFERRALS, "Count", 1)
            wait += self.deps.rng.uniform(0.0, RATE_DEFERRAL_JITTER_SECONDS)
        # Visible a little early (whole seconds, rounded down): the consumer that receives it
        # waits out the rest in place, so the first call lands right at the reopening.
        self._return_in(math.floor(max(0.0, wait)), outcome=None, code=f"wait_{denial.reason}")
        raise Deferred(f"scope {self.job.scope} {denial.reason} for {wait:.1f}s")

    # -- after the call -------------------------------------------------------------------------

    def _settled(self, result: ActionResult) -> None:
        deps = self.deps
        deps.metrics.add_metric(Metric.ATTEMPTS_PREFIX + result.outcome.value, "Count", 1)
        now = deps.clock()
        log = {**self.ids, "outcome": result.outcome.value, "status_code": result.status_code}
        if result.outcome.succeeded:
            if deps.ledger.mark_succeeded(self.job.key, result.outcome, now):
                deps.metrics.add_metric(Metric.SUCCEEDED, "Count", 1)
            else:
                deps.metrics.add_metric(Metric.DUPLICATES, "Count", 1)
            logger.info("settled", extra=log)
            return
        # The only other settled class is permanent: terminal at once, never retried.
        deps.ledger.mark_failed(self.job.key, result.outcome, result.code, now, count_attempt=True)
        deps.metrics.add_metric(Metric.TERMINAL_FAILURES, "Count", 1)
        logger.warning("terminal", extra={**log, "code": result.code})

    def _unsettled(self, exc: RetryableActionError) -> None:
        """Throttled, auth, transient or unknown: each returns the record on its own path."""
        deps = self.deps
        outcome = OutcomeClass(exc.outcome)
        deps.metrics.add_metric(Metric.ATTEMPTS_PREFIX + outcome.value, "Count", 1)
        log: dict[str, object] = {**self.ids, "outcome": outcome.value, "code": exc.code}
        throttle = deps.policy.throttle
        if outcome in (OutcomeClass.THROTTLED, OutcomeClass.AUTH):
            now = deps.now()
            if outcome is OutcomeClass.THROTTLED:
                last = deps.limiter.state(self.job.scope).last_close_seconds
                delay = close_delay(
                    exc.retry_after_seconds,
                    last,
                    base=throttle.close_base_seconds,
                    cap=throttle.close_cap_seconds,
                    jitter=throttle.reopen_jitter_seconds,
                    rng=deps.rng,
                )
                deps.metrics.add_metric(Metric.THROTTLE_EVENTS, "Count", 1)
                adaptive = deps.policy.quota.adaptive_spec
                if adaptive is not None:  # the quota is being found: this 429 says "slower"
                    rate = deps.limiter.cut(self.job.scope, adaptive)
                    log["rate_per_second"] = round(rate, 3)
            else:
                delay = throttle.auth_cooloff_seconds
                deps.metrics.add_metric(Metric.AUTH_CIRCUIT_OPEN, "Count", 1)
            until = deps.limiter.close(
                self.job.scope, now + delay, "auth" if outcome is OutcomeClass.AUTH else "throttled"
            )
            self.slots.forget(self.job.scope)  # this batch's other records use no banked slot
            logger.warning(
                "scope closed",
                extra={**log, "closed_at": round(now, 4), "closed_for_seconds": round(delay, 3)},
            )
            self._return_in(math.floor(max(0.0, until - now)), outcome=outcome, code=exc.code)
            raise Deferred(f"scope {self.job.scope} closed ({outcome.value})") from exc
        # transient or unknown: a real attempt, counted and backed off
        now_dt = deps.clock()
        attempts = deps.ledger.record_unsettled(
            self.job.key,
            now_dt,
            next_attempt_at=now_dt,
            lease_until=now_dt,
            outcome=outcome,
            code=exc.code,
            count_attempt=True,
            max_attempts=deps.policy.max_attempts,
        )
        if attempts is None:
            return  # settled meanwhile by another delivery
        if attempts >= deps.policy.max_attempts:
            deps.ledger.mark_failed(self.job.key, outcome, "exhausted", now_dt, count_attempt=False)
            deps.metrics.add_metric(Metric.TERMINAL_FAILURES, "Count", 1)
            deps.metrics.add_metric(Metric.EXHAUSTED, "Count", 1)
            logger.warning("attempts exhausted; terminal", extra={**log, "attempts": attempts})
            return
        retry = deps.policy.retry
        delay = retry_delay(attempts, base=retry.base_seconds, cap=retry.cap_seconds, rng=deps.rng)
        deps.metrics.add_metric(Metric.RETRIES, "Count", 1)
        logger.info("will retry", extra={**log, "attempts": attempts, "delay": round(delay, 3)})
        self._return_in(delay, outcome=None, code=None)
        raise exc

    def _return_in(self, seconds: float, *, outcome: OutcomeClass | None, code: str | None) -> None:
        """Record when the job may run again, and hide the message until then."""
        now = self.deps.clock()
        at = now + timedelta(seconds=seconds)
        self.deps.ledger.record_unsettled(
            self.job.key,
            now,
            next_attempt_at=at,
            lease_until=at + timedelta(seconds=self.deps.policy.lease_seconds),
            outcome=outcome,
            code=code,
        )
        self.deps.visibility.hide_for(self.receipt, seconds)


def guard_with_idempotency(
    perform: Callable[[ActionCall, float | None], ActionResult],
    idempotent: Callable[[Callable[..., ActionResult]], Callable[..., ActionResult]],
) -> GuardedCall:
    """Wrap an action so only settled outcomes are stored as completed idempotency records."""

    def call(job: ActionCall, prepare: Prepare) -> ActionResult:
        result = perform(job, prepare())
        if not result.outcome.settled:
            raise RetryableActionError(
                job.key,
                result.outcome.value,
                result.status_code,
                result.code,
                retry_after_seconds=result.retry_after_seconds,
            )
        return result

    wrapped = idempotent(call)
    return lambda job, prepare: wrapped(job=job, prepare=prepare)

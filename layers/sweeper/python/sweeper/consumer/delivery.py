"""Delivery: one record's way through the limiter, the guarded call and the outcome paths.

Delivery is at least once. Before calling, a record takes a slot from the limiter its scope
shares with every consumer (slots.py); a closed gate or a slot too far away returns the message
to the queue, visible again when the wait is over. Waiting never counts as an attempt. The call
runs inside idempotency (idempotency.py), and each outcome class has its own path:

| class                | ledger                              | message                          |
|----------------------|-------------------------------------|----------------------------------|
| accepted, absent     | succeeded                           | deleted                          |
| permanent            | failed (terminal), one attempt      | deleted                          |
| throttled            | next attempt at the reopening       | back when the gate reopens       |
| auth                 | next attempt when the circuit ends  | back when the circuit ends       |
| snooze               | no attempt; next at Retry-After or  | back after that delay; the scope |
|                      | the policy's snooze_delay_seconds   | stays open for other jobs        |
| ... past max snooze  | failed ("snooze_exhausted")         | deleted                          |
| transient, unknown   | one attempt, retry after a backoff  | back after the backoff           |
| ... past max attempts| failed ("exhausted")                | deleted                          |
"""

from __future__ import annotations

import logging
import math
import random
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from functools import cached_property
from typing import NoReturn

from aws_lambda_powertools.utilities.idempotency.exceptions import (
    IdempotencyAlreadyInProgressError,
)

from sweeper.admission.bank import BatchSlots
from sweeper.admission.base import GATE_RECHECK_LEAD_SECONDS
from sweeper.admission.handoff import LEASE_POLL_HOLDING_SECONDS
from sweeper.config import LATE_SLOT_TOLERANCE_SECONDS, Policy, Quota, reach
from sweeper.consumer.batch_log import BatchLog, Outcome
from sweeper.consumer.idempotency import Attempt, GuardedCall
from sweeper.errors import (
    LedgerUnavailableError,
    LimiterError,
    RetryableActionError,
    SweeperError,
)
from sweeper.ledger.store import Ledger
from sweeper.limiter import (
    MAX_GATES_PER_READ,
    Denial,
    GateReader,
    Limiter,
    Reason,
    ScopeState,
    close_delay,
    retry_delay,
)
from sweeper.limiter.leases import LeaseCap
from sweeper.limiter.paired import PairedItemFull, PairedSource
from sweeper.limiter.several import (
    CallSlots,
    LeaseSource,
    LimitAsk,
    SlotSource,
    ThrottleNotes,
    reserve_all,
)
from sweeper.models import (
    SETTLED_STATUSES,
    ActionCall,
    ActionResult,
    LedgerTarget,
    OutcomeClass,
)
from sweeper.observability import Metric, MetricSink
from sweeper.sqs_queue import Visibility

logger = logging.getLogger(__name__)

Clock = Callable[[], datetime]

#: The look at the gate that GATE_RECHECK_LEAD_SECONDS calls for (slots.py) is made this long
#: before its slot: the read has this long, and the late-slot tolerance, to answer (a strongly
#: consistent GetItem takes milliseconds). Made later than GATE_RECHECK_LEAD_SECONDS before the
#: slot, one look also covers the slots of its scope that follow within the rest of that lead,
#: whichever of the batch's threads holds them: the next few slots of a block at 100/s, so
#: about one read per block rather than one per call; and, read in the same request, the slots
#: of the batch's other scopes within that lead (several scopes at 10/s).
GATE_READ_LEAD_SECONDS = 0.05
#: Below this much Lambda time, a record is not called but returned at once.
MIN_CALL_SECONDS = 1.0
#: Spreads the return of records that waited for a token, so they do not all come back at once.
RATE_DEFERRAL_JITTER_SECONDS = 0.5
#: A full concurrency cap is asked again after this long (a call at the vendor ends meanwhile).
LEASE_RETRY_SECONDS = 0.05
#: A call that handed its lease on to a waiting thread of its batch sleeps this long before
#: its idempotency record's completion and the ledger's write: the woken thread's send comes
#: first. Without it the woken thread waits for the interpreter's lock while this one
#: serialises and signs its next request (measured in scenario (c): 2.4 ms median, 4.1 ms
#: mean from hand-off to the lease taken; 0.24 / 0.69 ms with it), time the vendor's cap
#: stands one call short.
HAND_OFF_YIELD_SECONDS = 0.001
#: A call held by several limits is sent at most this long after the earliest of its slots
#: (sweeper.limiter.several): half the late-slot tolerance, the other half is for waking late.
LIMITS_SPREAD_SECONDS = LATE_SLOT_TOLERANCE_SECONDS / 2


def _nothing_to_warm(job: ActionCall, timeout_seconds: float | None) -> None:
    """A delivery's `warm` for an action with nothing to prepare."""


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
    #: The action's `warm` (sweeper.actions.Action): run once per record before its slot.
    warm: Callable[[ActionCall, float | None], None] = _nothing_to_warm
    sleep: Callable[[float], None] = time.sleep
    now: Callable[[], float] = time.time  # epoch seconds, the limiter's clock
    rng: random.Random = field(default_factory=random.Random)
    #: The clock `ActionResult.request_sent_at` is read on.
    monotonic: Callable[[], float] = time.monotonic


class _Delivery:
    """One record's way through the limiter, the call and the outcome paths."""

    def __init__(
        self,
        job: ActionCall,
        receipt_handle: str,
        deps: ConsumerDeps,
        call_timeout: Callable[[], float | None],
        slots: BatchSlots,
        *,
        trace_id: str | None = None,
        outcomes: BatchLog,
    ) -> None:
        self.job = job
        # Its batch's log line counts how this record ended (batch_log.py), once.
        self.outcomes = outcomes
        self._ended: Outcome | None = None
        self.receipt = receipt_handle
        self.deps = deps
        self.call_timeout = call_timeout
        self.slots = slots
        self.called = False
        self.sent_at: float | None = None  # when the call went out (the limiter's clock)
        # By when (deps.monotonic) the call's request must have left to keep its slot: set when
        # it is let go to the slot (`_let_go`), measured against by `_sent_late`.
        self._leave_by: float | None = None
        self._in_every_limit = False  # its slots taken one limit at a time (_take_every_limit)
        self.trace_id = trace_id
        # A concurrency lease's holder: short, since a cap's N leases share one item, whose
        # size is what each of its writes costs (sweeper.limiter.leases).
        self.holder = secrets.token_hex(6)
        self.leases: list[tuple[str, int, str]] = []  # (key, index, holder named in its item)
        self._lease_cap: LeaseCap | None = None
        self.ids = {
            "operation_key": job.key,
            "batch_id": job.batch_id,
            "scope": job.scope,
            "trace_id": trace_id,  # the producer's X-Ray trace, from the record's AWSTraceHeader
        }

    def handle(self, target: LedgerTarget, now: datetime) -> None:
        """Call for `target` (its row as the batch read it at `now`) if the ledger allows."""
        try:
            self._handle(target, now)
        except Deferred:
            self._end(Outcome.DEFERRED)  # unless it ended otherwise first (closed, snoozed)
            raise
        except LedgerUnavailableError:
            self._end(Outcome.LEDGER_UNREACHED)
            raise
        except Exception:
            self._end(Outcome.ERROR)
            raise
        finally:
            self.release_leases()
            self.slots.done(self.job.scope, self.called, self)
            self._release(self.slots.leftover_leases())

    def _handle(self, target: LedgerTarget, now: datetime) -> None:
        deps = self.deps
        status = target.status
        if status in SETTLED_STATUSES:
            deps.metrics.add_metric(Metric.DUPLICATES, "Count", 1)
            self._end(Outcome.DUPLICATE)
            logger.debug("already settled; acknowledged", extra={**self.ids, "status": status})
            return
        if not target.callable_at(now):
            # Held or cancelled by an operator as of the batch's ledger read: never called.
            # (A job whose time has not come never gets here: batch.py acknowledges it first.)
            self._end(Outcome.HELD)
            logger.debug(
                "held or cancelled; acknowledged uncalled", extra={**self.ids, "status": status}
            )
            return
        try:
            result = deps.guarded_call(self.job, Attempt(self._take_slot, self._call_ended))
        except IdempotencyAlreadyInProgressError:
            # Another delivery of the same job is calling right now: come back after it.
            deps.metrics.add_metric(Metric.IN_PROGRESS_ELSEWHERE, "Count", 1)
            self._end(Outcome.IN_PROGRESS)
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
        self._warm()
        deps = self.deps
        further = deps.policy.further_limits
        if further and self.slots.paired is None:
            if any(limit.rate is not None for limit in further):
                return self._take_every_limit()
            # Only concurrency caps beside the scope's rate: a lease of each first, then the
            # scope's slot as for one limit (banked in blocks): a full cap spends no slot.
            self.slots.waiting_for_leases(1)
            try:
                self._wait_for_leases()
            finally:
                self.slots.waiting_for_leases(-1)
                self.slots.stop_keeping(self.job.scope)
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
            try:
                requested, decision = self.slots.reserve(
                    self.job.scope, quota.interval_seconds, horizon, self
                )
            except PairedItemFull:
                # The wide limit's item is too full to take this call's key (logged by the
                # limiter): this call holds its slots one limit at a time.
                return self._take_every_limit()
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
            usable = self.slots.usable_for  # the late tolerance, and the rate's slack if any
            wait = decision.slot_at - now
            if wait < -usable:
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
                    self._look_at_gate()
                wait = decision.slot_at - deps.now()
                if wait < -usable:
                    deps.metrics.add_metric(Metric.LATE_SLOTS, "Count", 1)
                    continue  # the read was slow: this slot has passed, take another
            if wait > 0:
                deps.sleep(wait)
                if deps.now() - decision.slot_at > usable:
                    # Woken too late (a loaded machine, a paused environment): sent now, this
                    # call could arrive in the next slot's window. Let it go, take another.
                    deps.metrics.add_metric(Metric.LATE_SLOTS, "Count", 1)
                    continue
            now = deps.now()
            if now - decision.slot_at > LATE_SLOT_TOLERANCE_SECONDS and not self.slots.covers(
                self.job.scope, now
            ):
                # Called within its slack (only a rate with one gets here): the batch's last look
                # at the gate may be older than the lead before now. Look again, so that this
                # call too is sent at most the lead (and the tolerance) after an open look.
                self._look_at_gate()
                if deps.now() - decision.slot_at > usable:
                    deps.metrics.add_metric(Metric.LATE_SLOTS, "Count", 1)
                    continue
            self._let_go(decision.slot_at, self.slots.usable_for)
            return self.call_timeout()

    def _let_go(self, slot_at: float, usable_for: float) -> None:
        """The call goes now, for its slot at `slot_at`, which it may use up to `usable_for`
        after: its request must have left by then (`_leave_by`, on deps.monotonic)."""
        deps = self.deps
        self.called = True
        self.sent_at = deps.now()
        self._leave_by = deps.monotonic() + (slot_at + usable_for - self.sent_at)
        self.slots.calling(self.job.scope, self)

    def _warm(self) -> None:
        """Have the action prepare its call (the http kind: a connection to the vendor) before
        this record's slot is reserved, not when it comes: a connect made at the slot reaches
        the vendor one to three round trips late, past the arrival budget (config/quota.py
        `safe_headroom`); made here, it delays only the reservation, never the call after its
        slot. A thread whose pool already holds an idle connection pays a queue look and a
        zero-timeout poll. Never raises: a warm that fails only leaves the call as it was."""
        timeout = self.call_timeout()
        if timeout is not None and timeout < MIN_CALL_SECONDS:
            return  # no call will follow: the record goes back at once (_take_slot)
        try:
            # at most the time a call would not need: the connect must not eat the call's time
            self.deps.warm(self.job, None if timeout is None else timeout - MIN_CALL_SECONDS)
        except Exception as exc:
            # A bug in a kind's warm (or a change in urllib3's pool) must not stop deliveries:
            # the call goes ahead as without the warm; the warning shows it by the error's type
            # alone (its message may hold the vendor's URL: no target values in diagnostics).
            logger.warning(
                "warming the action failed", extra={**self.ids, "error": type(exc).__name__}
            )

    def _look_at_gate(self) -> None:
        """Read this call's gate before its call: closed, its slot is given up, no other thread
        of the batch calls on an earlier look, and the record goes back until the reopening;
        open, the look covers the batch's calls for the lead after it.

        In the same request (a limiter that is a GateReader, or paired limits) it reads the
        gates of the batch's other scopes whose slots it will cover (BatchSlots.gates_to_read):
        each found open is covered for their calls too, each found closed is forgotten (its
        threads look again and go back). Paired limits' gates are all on the wide limit's item,
        so their look reads that one item (a GetItem) however many scopes it covers, and learns
        the wide limit's gate with them: closed, every scope is."""
        deps = self.deps
        scope = self.job.scope
        paired, limiter = self.slots.paired, deps.limiter
        looked = deps.now()
        states: dict[str, ScopeState] = {}
        if paired is not None and isinstance(limiter, PairedSource):
            look = self.slots.gates_to_read(scope, looked, most=None)
            states = limiter.paired_states(paired.wide, look.scopes)
        else:
            reader = limiter if isinstance(limiter, GateReader) else None
            look = self.slots.gates_to_read(scope, looked, MAX_GATES_PER_READ if reader else 1)
            if reader is not None and len(look.scopes) > 1:  # one gate: a GetItem costs less
                states = reader.states(look.scopes)
            if scope not in states:  # one gate to read, or its key left unread
                states[scope] = limiter.state(scope)
        state = states[scope]
        answered = deps.now()
        self.slots.looked(look, states, answered)
        if state.closed(answered) and state.closed_until is not None:
            gate = Denial(state.closed_until, "throttled")
            deps.metrics.add_metric(Metric.GATE_DEFERRALS, "Count", 1)
            self._defer(gate, state.closed_until - deps.now())

    def _limit_keys(self) -> list[str]:
        """The limiter key of each of the policy's limits for this call, in their order."""
        policy = self.deps.policy
        job = self.job
        host = policy.action.scope_host
        keys = [job.scope]
        for limit in policy.further_limits:
            keys.append(
                limit.limiter_key(
                    policy=policy.name,
                    tenant_id=job.tenant_id,
                    object_id=job.object_id,
                    host=host,
                    params=job.params,
                )
            )
        return keys

    def _rates(self) -> list[tuple[str, Quota]]:
        """The rate limits this call holds a slot in, by limiter key: its scope's, then each
        further one's."""
        policy = self.deps.policy
        rates = [(self.job.scope, policy.quota)]
        for limit, key in zip(policy.further_limits, self._limit_keys()[1:], strict=True):
            if limit.rate is not None:
                rates.append((key, limit.rate))
        return rates

    def _limit_asks(self) -> list[LimitAsk]:
        """The rate limits this call holds a slot in, as `reserve_all` asks for them."""
        return [LimitAsk(key, rate.interval_seconds) for key, rate in self._rates()]

    def _take_leases(self, look: bool = True) -> bool:
        """A lease of each concurrency cap the call is under (those already held are kept):
        one handed on within the batch, else, if it may `look`, from the table: one read, and
        one write taking a lease for each of the batch's threads waiting (this one's kept, the
        others handed on to them)."""
        capped = self._caps
        if not capped:
            return True
        source = self.deps.limiter
        if not isinstance(source, LeaseSource):
            raise LimiterError("this limiter cannot hold concurrency leases")
        leases = self._lease_cap or source.leases()
        self._lease_cap = leases
        for key, cap in capped:
            if any(k == key for k, _, _ in self.leases):
                continue  # handed on by a call of the batch that ended
            handed = self.slots.take_handed(key)
            if handed is not None:
                self.leases.append((key, *handed))
                continue
            if not look:
                return False
            # at most the consumer's timeout: a killed environment's lease frees itself by then
            taken = leases.acquire_some(
                key,
                cap,
                self.holder,
                self.deps.policy.consumer.timeout_seconds,
                self.slots.leases_wanted(key),
            )
            if not taken:
                return False  # those held are kept while it waits (or given back at the end)
            self.leases.append((key, taken[0], self.holder))
            self.slots.took_leases(key, len(taken), [(i, self.holder) for i in taken[1:]])
        return True

    def _wait_for_leases(self) -> None:
        """A lease of every concurrency cap (a call of the batch that ends hands its lease on
        to a waiting thread without a write). The record waits in place while its batch holds
        a lease of each cap it misses (one comes free here when that call ends) and its Lambda
        has time left; it goes back to the queue only when the batch holds none and the
        longest wait in place has passed (a deferral costs the idempotency record's put and
        delete and a queue round trip), and not while its thread would only take another
        record of the batch waiting for the same leases (`_would_swap`)."""
        deps = self.deps
        waited = 0.0
        caps = self._caps
        while True:
            # a batch whose calls will hand it every lease missing looks in the table seldom
            if self.slots.may_poll_leases(holding=self._coming()[1]):
                if self._take_leases():
                    self.slots.lease_found()
                    return
            elif self._take_leases(look=False):  # only what the batch's ended calls handed on
                return
            timeout = self.call_timeout()
            if timeout is not None and timeout < MIN_CALL_SECONDS:
                self._return_in(0.0, outcome=None, code=None)
                raise Deferred("no Lambda time left for a call")
            missing, coming = self._coming()
            if (
                waited > deps.policy.throttle.max_wait_seconds
                and not coming
                and not self._would_swap(missing)
            ):
                self._defer(Denial(deps.now() + 1.0, "rate"), 1.0)
            started = deps.now()
            # A lease handed on wakes this thread at once (slots.py: one condition per cap key).
            # While the batch holds one of each cap missing, that is how the lease comes: sleep
            # as long as the batch's looks in the table are apart, not a poll's interval. One
            # waiter per scope wakes sooner, to read the gate before the batch's look at it is
            # too old to cover a call (slots.py LOOK_KEPT_FRESH_SECONDS): the call sent when
            # a lease comes then reads nothing first.
            nap = LEASE_POLL_HOLDING_SECONDS if coming else LEASE_RETRY_SECONDS
            self._adopt_handed(min(nap, self.slots.look_stale_in(self.job.scope)))
            if len(self.leases) == len(caps):
                return
            # One waiter per scope keeps the look fresh meanwhile, and a slot banked for the
            # call that gets the next lease: a reservation is a look too.
            if not self._restock() and self.slots.look_stale_in(self.job.scope) <= 0:
                self._look_at_gate()
            waited += max(LEASE_RETRY_SECONDS, deps.now() - started)

    def _restock(self) -> bool:
        """As the scope's lease waiter keeping its look, bank a block when the bank is empty
        (BatchSlots.restock): the call that gets the next lease then writes nothing before
        its send. True when it did (the block's write is a look at an open gate)."""
        scope = self.job.scope
        if not self.slots.restock_due(scope):
            return False
        quota = self.deps.policy.quota
        # Only slots usable by then: a block further off would outlast the calls it is for.
        return self.slots.restock(scope, quota.interval_seconds, self.slots.usable_for)

    def _coming(self) -> tuple[list[str], bool]:
        """The caps whose lease this call still misses, and whether its batch holds a lease of
        each of them (at the vendor, or handed on): one comes free here when that call ends."""
        held = {k for k, _, _ in self.leases}
        missing = [key for key, _ in self._caps if key not in held]
        return missing, all(self.slots.holds_lease(key) for key in missing)

    def _would_swap(self, missing: list[str]) -> bool:
        """Whether going back to the queue would only swap this record for another of its
        batch that waits for the same leases: each cap missing is shared by every call of the
        policy (its key names no field of the job) and the batch has records no thread took
        yet. Its thread would take one of them and wait as long, and the deferral would cost
        the idempotency record's put and delete and a queue round trip for nothing."""
        return self.slots.records_untaken() and all(key in self._shared_caps for key in missing)

    @cached_property
    def _shared_caps(self) -> frozenset[str]:
        """The limiter keys of the caps every call of the policy shares (a constant key, or
        one naming only the policy and the action's host)."""
        policy = self.deps.policy
        return frozenset(
            key
            for limit, key in zip(policy.further_limits, self._limit_keys()[1:], strict=True)
            if limit.max_in_flight is not None and reach(limit.key) == "policy"
        )

    @cached_property
    def _caps(self) -> list[tuple[str, int]]:
        """The concurrency caps the call is under, (limiter key, its cap): rendered once per
        record, not on each of its waits for a lease."""
        policy = self.deps.policy
        return [
            (key, limit.max_in_flight)
            for limit, key in zip(policy.further_limits, self._limit_keys()[1:], strict=True)
            if limit.max_in_flight is not None
        ]

    def _adopt_handed(self, seconds: float) -> None:
        """Wait up to `seconds` for leases handed on within the batch, for the caps still
        missing (the first waits, the others only take what is there)."""
        missing = [key for key, _ in self._caps if key not in {k for k, _, _ in self.leases}]
        for i, key in enumerate(missing):
            got = self.slots.wait_for_lease(key, seconds) if i == 0 else self.slots.take_handed(key)
            if got is None:
                return
            self.leases.append((key, *got))

    def _call_ended(self, request_sent_at: float | None) -> None:
        """The request is over (answered, failed, or its read timeout ended): its concurrency
        leases go at once, before the idempotency record's completion and the ledger's write
        (idempotency.Attempt). A lease whose release fails expires by itself. Then, if the
        request left later than its slot allows, a slot of its scope is spent (`_sent_late`)."""
        try:
            self.release_leases()
        except LimiterError:
            logger.warning("lease release failed; it expires by itself", extra=self.ids)
        if request_sent_at is not None and self._leave_by is not None:
            self._sent_late(request_sent_at, self._leave_by)

    def _sent_late(self, request_sent_at: float, leave_by: float) -> None:
        """Spend one slot of the call's scope without a call when its request left later than
        the slot allows (its tolerance and the rate's slack: `usable_for`).

        The slot was checked just before the call (`_take_slot`); between that check and the
        request's last byte the environment may stall (Lambda pauses an environment that used
        its CPU share for the rest of a 20 ms period; a loaded host deschedules it). The
        headroom pays for the tolerance and the arrival jitter, not for that stall: measured
        on a loaded machine, such a call arrived 80 ms after its slot and the tenth call after
        it on time, eleven in the vendor's one second. A slot given up empty now (a banked one,
        or one reserved, within one period) keeps the window that late call falls in to the
        rate; with paired limits the slot spent is one of both. A call that took its limits'
        slots one limit at a time (`_take_every_limit`, late once the tolerance past the
        earliest of them) spends one in each, one write each."""
        if request_sent_at <= leave_by:
            return
        deps = self.deps
        deps.metrics.add_metric(Metric.LATE_SENDS, "Count", 1)
        quota = deps.policy.quota
        try:
            if self._in_every_limit:
                self._spend_in_every_limit()
            else:
                self.slots.spend_one(self.job.scope, quota.interval_seconds, quota.period_seconds)
        except LimiterError:
            logger.warning("a late send's slot could not be spent", extra=self.ids)

    def _spend_in_every_limit(self) -> None:
        """One slot of each rate limit the call held, reserved within the limit's period and
        not called in (see `_sent_late`)."""
        source = self.deps.limiter
        assert isinstance(source, SlotSource)  # _take_every_limit made the call with it
        for key, rate in self._rates():
            source.reserve(key, rate.interval_seconds, rate.period_seconds)

    def release_leases(self) -> None:
        """Give back the leases this call holds (after its answer, or when it is not made):
        to a thread of the batch waiting for one, else to the table."""
        handed = False
        while self.leases:
            key, index, holder = self.leases.pop()
            if self.slots.hand_off(key, index, holder):
                handed = True
            else:
                self._release([(key, index, holder)])
        if handed:
            # Let the woken thread send before this one goes on (HAND_OFF_YIELD_SECONDS).
            self.deps.sleep(HAND_OFF_YIELD_SECONDS)

    def _release(self, leases: list[tuple[str, int, str]]) -> None:
        if not leases:
            return
        cap = self._lease_cap
        if cap is None:
            source = self.deps.limiter
            if not isinstance(source, LeaseSource):
                return
            cap = self._lease_cap = source.leases()
        for key, index, holder in leases:
            self.slots.gave_back(key)
            cap.release(key, index, holder)

    def _take_every_limit(self) -> float | None:
        """A slot in each of the call's limits, all within LIMITS_SPREAD_SECONDS before the
        call (sweeper.limiter.several); waits and deferrals as for one limit. Slots are taken
        one call at a time, not banked."""
        deps = self.deps
        throttle = deps.policy.throttle
        source = deps.limiter
        if not isinstance(source, SlotSource):
            raise LimiterError("this limiter cannot hold a call in several limits")
        asks = self._limit_asks()
        waited = False
        lease_waits = 0
        while True:
            timeout = self.call_timeout()
            if timeout is not None and timeout < MIN_CALL_SECONDS:
                self._return_in(0.0, outcome=None, code=None)
                raise Deferred("no Lambda time left for a call")
            horizon = throttle.max_wait_seconds
            if timeout is not None:
                horizon = max(0.0, min(horizon, timeout - MIN_CALL_SECONDS))
            requested = deps.now()
            got = reserve_all(source, asks, horizon, LIMITS_SPREAD_SECONDS, now=requested)
            if isinstance(got, Denial):
                wait = got.retry_at - deps.now()
                if got.reason != "rate":
                    wait += deps.rng.uniform(0.0, throttle.reopen_jitter_seconds)
                if not waited:
                    waited = True
                    deps.metrics.add_metric(
                        Metric.LIMITER_WAITS if got.reason == "rate" else Metric.GATE_DEFERRALS,
                        "Count",
                        1,
                    )
                if wait <= horizon:
                    deps.sleep(max(0.0, wait))
                    continue
                self._defer(got, wait)
            if got.send_at - requested > GATE_RECHECK_LEAD_SECONDS:
                self._recheck_gates(got)
            wait = got.send_at - deps.now()
            if wait > 0:
                deps.sleep(wait)
            if deps.now() - got.earliest > LATE_SLOT_TOLERANCE_SECONDS:
                deps.metrics.add_metric(Metric.LATE_SLOTS, "Count", 1)
                continue  # woken too late for one of its limits: let the slots go, take others
            if not self._take_leases():
                # A concurrency cap is full: these slots are spent without a call. A call at
                # the vendor ends within moments, so wait a little in place and take new ones;
                # past the longest wait in place, the record goes back to the queue.
                lease_waits += 1
                if lease_waits * LEASE_RETRY_SECONDS > throttle.max_wait_seconds:
                    self._defer(Denial(deps.now() + 1.0, "rate"), 1.0)
                deps.sleep(LEASE_RETRY_SECONDS)
                continue
            self._in_every_limit = True
            self._let_go(got.earliest, LATE_SLOT_TOLERANCE_SECONDS)
            return self.call_timeout()

    def _throttled_keys(self, exc: RetryableActionError) -> list[str]:
        """The limiter keys a 429 closes, for a call held by several limits.

        The limit the response names (`action.limit_header`, mapped by `limit_header_values`)
        alone; without a name, the narrowest (the first, the job's scope), and with it each
        wider limit under which another key of the narrowest drew a 429 within the narrowest's
        period (several stores refused at once: the app's limit is what refuses).
        """
        deps = self.deps
        every = self._limit_keys()  # in the order of the policy's limits
        values = deps.policy.action.limit_values
        named = values.get(exc.limit_value) if exc.limit_value is not None else None
        if named is not None:
            index = [limit.name for limit in deps.policy.limits].index(named)
            return [every[index]]
        keys = [every[0]]
        if isinstance(deps.limiter, ThrottleNotes):
            period = deps.policy.quota.period_seconds
            for wider in self._limit_asks()[1:]:
                if deps.limiter.note_throttle(wider.key, every[0], within=period):
                    keys.append(wider.key)
        return keys

    def _recheck_gates(self, got: CallSlots) -> None:
        """Look at every limit's gate once more just before a far call (as for one limit): all
        in one request when the limiter reads several gates at once (a GateReader; a key it
        leaves unread is read alone)."""
        deps = self.deps
        wait = got.send_at - deps.now()
        if wait > GATE_READ_LEAD_SECONDS:
            deps.sleep(wait - GATE_READ_LEAD_SECONDS)
        keys, limiter = list(got.slots), deps.limiter
        states = limiter.states(keys) if isinstance(limiter, GateReader) and len(keys) > 1 else {}
        for key in keys:
            state = states[key] if key in states else limiter.state(key)
            if state.closed(deps.now()) and state.closed_until is not None:
                deps.metrics.add_metric(Metric.GATE_DEFERRALS, "Count", 1)
                self._defer(
                    Denial(state.closed_until, "throttled"), state.closed_until - deps.now()
                )

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
            if deps.ledger.mark_succeeded(
                self.job.key, result.outcome, now, trace_id=self.trace_id
            ):
                deps.metrics.add_metric(Metric.SUCCEEDED, "Count", 1)
            else:
                deps.metrics.add_metric(Metric.DUPLICATES, "Count", 1)
            self._end(Outcome.SETTLED)
            logger.debug("settled", extra=log)  # a line per job at DEBUG only (batch_log.py)
            return
        # The only other settled class is permanent: terminal at once, never retried.
        deps.ledger.mark_failed(
            self.job.key,
            result.outcome,
            result.code,
            now,
            count_attempt=True,
            trace_id=self.trace_id,
        )
        deps.metrics.add_metric(Metric.TERMINAL_FAILURES, "Count", 1)
        self._end(Outcome.TERMINAL)
        logger.warning("terminal", extra={**log, "code": result.code})

    def _unsettled(self, exc: RetryableActionError) -> None:
        """Throttled, auth, snooze, transient or unknown: each returns the record its own way."""
        deps = self.deps
        outcome = OutcomeClass(exc.outcome)
        deps.metrics.add_metric(Metric.ATTEMPTS_PREFIX + outcome.value, "Count", 1)
        log: dict[str, object] = {**self.ids, "outcome": outcome.value, "code": exc.code}
        if outcome is OutcomeClass.SNOOZE:
            self._snooze(exc, log)
            return
        throttle = deps.policy.throttle
        if outcome in (OutcomeClass.THROTTLED, OutcomeClass.AUTH):
            now = deps.now()
            closing = [self.job.scope]
            if outcome is OutcomeClass.THROTTLED and deps.policy.further_limits:
                closing = self._throttled_keys(exc)  # several limits: the one the 429 names
            if outcome is OutcomeClass.THROTTLED:
                # The limit's last closure (its length and end) and when this call went out
                # decide whether a bare 429 doubles it or starts afresh (backoff.close_delay).
                last = deps.limiter.state(closing[0])
                delay = close_delay(
                    exc.retry_after_seconds,
                    last.last_close_seconds,
                    last.closed_until,
                    self.sent_at if self.sent_at is not None else now,
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
            until = now + delay
            reason: Reason = (
                "auth"
                if outcome is OutcomeClass.AUTH
                else "throttled"
                if exc.retry_after_seconds is not None
                else "backoff"  # a bare 429: status says the delay is sweeper's own
            )
            paired = self.slots.paired
            for key in closing:
                until = max(until, deps.limiter.close(key, now + delay, reason))
                if paired is not None and key == self.job.scope:
                    # its slots are reserved on the wide limit's item: its gate is kept there too
                    assert isinstance(deps.limiter, PairedSource)
                    deps.limiter.close_narrow(paired.wide, key, now + delay)
                self.slots.forget(key)  # this batch's other records use no banked slot
            self._end(Outcome.SCOPE_CLOSED)
            logger.warning(
                "scope closed",
                extra={
                    **log,
                    "closed_at": round(now, 4),
                    "closed_for_seconds": round(delay, 3),
                    "limits_closed": len(closing),
                },
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
            trace_id=self.trace_id,
        )
        if attempts is None:
            self._end(Outcome.DUPLICATE)
            return  # settled meanwhile by another delivery
        if attempts >= deps.policy.max_attempts:
            deps.ledger.mark_failed(
                self.job.key,
                outcome,
                "exhausted",
                now_dt,
                count_attempt=False,
                trace_id=self.trace_id,
            )
            deps.metrics.add_metric(Metric.TERMINAL_FAILURES, "Count", 1)
            deps.metrics.add_metric(Metric.EXHAUSTED, "Count", 1)
            self._end(Outcome.EXHAUSTED)
            logger.warning("attempts exhausted; terminal", extra={**log, "attempts": attempts})
            return
        retry = deps.policy.retry
        delay = retry_delay(attempts, base=retry.base_seconds, cap=retry.cap_seconds, rng=deps.rng)
        deps.metrics.add_metric(Metric.RETRIES, "Count", 1)
        self._end(Outcome.RETRY)
        logger.info("will retry", extra={**log, "attempts": attempts, "delay": round(delay, 3)})
        self._return_in(delay, outcome=None, code=None)
        raise exc

    def _snooze(self, exc: RetryableActionError, log: dict[str, object]) -> None:
        """The vendor said "not now" for this job alone: it waits (the answer's Retry-After, or
        the policy's snooze delay) without spending an attempt and without closing its scope,
        until its snoozes would pass the policy's max_snooze_seconds: then it is terminal."""
        deps = self.deps
        policy = deps.policy
        delay = exc.retry_after_seconds
        if delay is None or delay <= 0:
            delay = policy.snooze_delay_seconds
        delay = float(math.ceil(delay))  # whole seconds: the message's visibility is in seconds
        now = deps.clock()
        snoozed = deps.ledger.record_snooze(
            self.job.key,
            now,
            seconds=delay,
            lease_until=now + timedelta(seconds=delay + policy.lease_seconds),
            code=exc.code,
            max_snooze_seconds=policy.max_snooze_seconds,
            trace_id=self.trace_id,
        )
        if snoozed is None:
            if deps.ledger.mark_failed(
                self.job.key,
                OutcomeClass.SNOOZE,
                "snooze_exhausted",
                now,
                count_attempt=False,
                trace_id=self.trace_id,
            ):
                deps.metrics.add_metric(Metric.TERMINAL_FAILURES, "Count", 1)
                deps.metrics.add_metric(Metric.SNOOZE_EXHAUSTED, "Count", 1)
                self._end(Outcome.SNOOZE_EXHAUSTED)
                logger.warning("snoozed past max_snooze_seconds; terminal", extra=log)
            self._end(Outcome.DUPLICATE)  # unless it ended terminal just above
            return  # terminal now, or settled meanwhile by another delivery: acknowledged
        deps.metrics.add_metric(Metric.SNOOZES, "Count", 1)
        self._end(Outcome.SNOOZED)
        logger.debug("snoozed", extra={**log, "delay": delay, "snoozed_seconds": round(snoozed, 3)})
        self.deps.visibility.hide_for(self.receipt, delay)
        raise Deferred(f"job {self.job.key} snoozed for {delay:g}s") from exc

    def _end(self, outcome: Outcome) -> None:
        """Count how this record ended in its batch's line, the first time only."""
        if self._ended is None:
            self._ended = outcome
            self.outcomes.count(outcome, self.job.key)

    def _return_in(self, seconds: float, *, outcome: OutcomeClass | None, code: str | None) -> None:
        """Record when the job may run again, and hide the message until then.

        Both in whole seconds, rounded up: SQS hides a message for whole seconds, and a
        message shown before its ledger time would be acknowledged uncalled as not yet due
        (batch.py), leaving the job to wait for its lease to expire.
        """
        seconds = math.ceil(max(0.0, seconds))
        now = self.deps.clock()
        at = now + timedelta(seconds=seconds)
        self.deps.ledger.record_unsettled(
            self.job.key,
            now,
            next_attempt_at=at,
            lease_until=at + timedelta(seconds=self.deps.policy.lease_seconds),
            outcome=outcome,
            code=code,
            # a wait (no outcome) keeps the trace of the delivery that last had one
            trace_id=None if outcome is None else self.trace_id,
        )
        self.deps.visibility.hide_for(self.receipt, seconds)

"""One call's admission: the state every regime keeps for it, and what they do alike.

A `Ticket` is made per record (sweeper.admission's `BatchAdmission.call`): the call's limiter
keys in the order of the policy's limits, the leases it holds, when it was let go and how a
late request spends another slot. `TicketAdmission` is the part of the `Admission` protocol
(base.py) every regime shares: the permit or deferral out of a regime's wait, the request's
end (its leases go at once, a late request spends a slot), a closure on a 429 or an auth
failure (the limit the 429 names, else the narrowest and the wider ones it implicates, for
the delay `backoff.close_delay` gives), and the record's end (what it holds given back).
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Callable, Mapping
from functools import cached_property
from typing import NoReturn

from sweeper.admission.bank import BatchSlots
from sweeper.admission.base import (
    MIN_CALL_SECONDS,
    Abilities,
    Clocks,
    Closure,
    Deferral,
    Deferring,
    Permit,
    TimeLeft,
)
from sweeper.config import Policy, Quota
from sweeper.errors import LimiterError, SweeperError
from sweeper.limiter import Denial, Limiter, Reason, ScopeState, close_delay
from sweeper.limiter.leases import LeaseCap
from sweeper.models import ActionCall, OutcomeClass
from sweeper.observability import Metric
from sweeper.vendor_reading import VendorReading

logger = logging.getLogger(__name__)

#: A call that handed its lease on to a waiting thread of its batch sleeps this long before
#: its idempotency record's completion and the ledger's write: the woken thread's send comes
#: first. Without it the woken thread waits for the interpreter's lock while this one
#: serialises and signs its next request (measured in scenario (c): 2.4 ms median, 4.1 ms
#: mean from hand-off to the lease taken; 0.24 / 0.69 ms with it), time the vendor's cap
#: stands one call short.
HAND_OFF_YIELD_SECONDS = 0.001


class StaleSlot(SweeperError):
    """Raised by a call's last look (`Ticket.last_look`) when its slot was granted under a
    state of its limit that has changed since (sweeper.admission.learned): the slot is given up
    unused and the call is admitted again, under the new state."""


class Ticket:
    """One record's admission state, shared by the regimes that admit its call."""

    def __init__(
        self,
        job: ActionCall,
        policy: Policy,
        limiter: Limiter,
        slots: BatchSlots,
        clocks: Clocks,
        ids: Mapping[str, object],
        abilities: Abilities,
    ) -> None:
        self.job = job
        self.policy = policy
        self.limiter = limiter
        self.slots = slots
        self.clocks = clocks
        self.abilities = abilities  # what the limiter can do beyond `Limiter`
        self.ids = ids  # for log lines: the delivery's identifiers
        self.called = False
        self.sent_at: float | None = None  # when the call went out (the limiter's clock)
        # By when (clocks.monotonic) the call's request must have left to keep its slot, and
        # how a request that left later spends one: set when the call is let go (`let_go`).
        self.leave_by: float | None = None
        self.spend_late: Callable[[], None] | None = None
        # A concurrency lease's holder: short, since a cap's N leases share one item, whose
        # size is what each of its writes costs (sweeper.limiter.leases).
        self.holder = secrets.token_hex(6)
        self.leases: list[tuple[str, int, str]] = []  # (key, index, holder named in its item)
        self.lease_cap: LeaseCap | None = None
        #: A wrapper's look just before the call goes (learned.py): it may send the record
        #: back (Deferring) or give the slot up for another (StaleSlot). None: the call goes.
        self.last_look: Callable[[], None] | None = None

    @cached_property
    def keys(self) -> list[str]:
        """The limiter key of each of the policy's limits for this call, in their order."""
        policy = self.policy
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

    def rates(self) -> list[tuple[str, Quota]]:
        """The rate limits this call holds a slot in, by limiter key: its scope's, then each
        further one's."""
        rates = [(self.job.scope, self.policy.quota)]
        for limit, key in zip(self.policy.further_limits, self.keys[1:], strict=True):
            if limit.call_rate is not None:
                rates.append((key, limit.call_rate))
        return rates

    def time_for_call(self, time_left: TimeLeft) -> float | None:
        """The Lambda time left (None: no bound); too little for a call, the record goes back
        at once (raises Deferring)."""
        timeout = time_left()
        if timeout is not None and timeout < MIN_CALL_SECONDS:
            raise Deferring(Deferral(0.0, None))
        return timeout

    def horizon(self, time_left: TimeLeft) -> float:
        """How far ahead a slot may be waited for in place: the throttle's longest wait, less
        than the Lambda time left for a call. No time left: the record goes back at once."""
        timeout = self.time_for_call(time_left)
        horizon = self.policy.throttle.max_wait_seconds
        if timeout is not None:
            horizon = max(0.0, min(horizon, timeout - MIN_CALL_SECONDS))
        return horizon

    def let_go(self, slot_at: float, usable_for: float, spend_late: Callable[[], None]) -> None:
        """The call goes now, for its slot at `slot_at`, which it may use up to `usable_for`
        after: its request must have left by then (`leave_by`, on clocks.monotonic), else
        `spend_late` gives up a slot for it. A wrapper's `last_look` comes first: it may keep
        the call from going on this slot (it raises)."""
        if self.last_look is not None:
            self.last_look()
        clocks = self.clocks
        self.called = True
        self.sent_at = clocks.now()
        self.leave_by = clocks.monotonic() + (slot_at + usable_for - self.sent_at)
        self.spend_late = spend_late
        self.slots.calling(self.job.scope, self)

    def sit_out(self, denial: Denial, now: float, horizon: float, waited: bool) -> None:
        """A denial at `now`: wait for its retry in place if it comes within `horizon` (a
        gate's with the reopening jitter), else the record goes back (raises Deferring). The
        call's first wait (`waited` False) is counted: the rate's, or a gate's deferral."""
        clocks = self.clocks
        wait = denial.retry_at - now
        if denial.reason != "rate":
            wait += clocks.rng.uniform(0.0, self.policy.throttle.reopen_jitter_seconds)
        if not waited:
            metric = Metric.LIMITER_WAITS if denial.reason == "rate" else Metric.GATE_DEFERRALS
            clocks.metrics.add_metric(metric, "Count", 1)
        if wait > horizon:
            self.defer(denial, wait)
        clocks.sleep(max(0.0, wait))  # a short wait in place: no queue round trip

    def defer(self, denial: Denial, wait: float) -> NoReturn:
        """Leave the wait: the record goes back for `wait` seconds."""
        raise Deferring(Deferral(wait, denial.reason))

    def gate_closed(self, state: ScopeState, at: float) -> None:
        """A gate read before the call: closed at `at`, the record goes back until it reopens."""
        if state.closed(at) and state.closed_until is not None:
            self.clocks.metrics.add_metric(Metric.GATE_DEFERRALS, "Count", 1)
            self.defer(
                Denial(state.closed_until, "throttled"), state.closed_until - self.clocks.now()
            )

    def throttled_keys(self, limit_value: str | None) -> list[str]:
        """The limiter keys a 429 closes, for a call held by several limits.

        The limit the response names (`action.limit_header`, mapped by `limit_header_values`)
        alone; without a name, the narrowest (the first, the job's scope), and with it each
        wider rate limit under which another key of the narrowest drew a 429 within the
        narrowest's period (several stores refused at once: the app's limit is what refuses).
        """
        policy = self.policy
        every = self.keys  # in the order of the policy's limits
        values = policy.action.limit_values
        named = values.get(limit_value) if limit_value is not None else None
        if named is not None:
            index = [limit.name for limit in policy.limits].index(named)
            return [every[index]]
        keys = [every[0]]
        notes = self.abilities.notes
        if notes is not None:
            period = policy.quota.period_seconds
            for wider, _ in self.rates()[1:]:
                if notes.note_throttle(wider, every[0], within=period):
                    keys.append(wider)
        return keys

    def release_leases(self) -> None:
        """Give back the leases this call holds (after its answer, or when it is not made):
        to a thread of the batch waiting for one, else to the table."""
        handed = False
        while self.leases:
            key, index, holder = self.leases.pop()
            if self.slots.hand_off(key, index, holder):
                handed = True
            else:
                self.release_to_table([(key, index, holder)])
        if handed:
            # Let the woken thread send before this one goes on (HAND_OFF_YIELD_SECONDS).
            self.clocks.sleep(HAND_OFF_YIELD_SECONDS)

    def lease_store(self) -> LeaseCap | None:
        """The limiter's concurrency leases (None: it holds none), asked once per record."""
        if self.lease_cap is None and self.abilities.leases is not None:
            self.lease_cap = self.abilities.leases.leases()
        return self.lease_cap

    def release_to_table(self, leases: list[tuple[str, int, str]]) -> None:
        if not leases:
            return
        cap = self.lease_store()
        if cap is None:
            return
        for key, index, holder in leases:
            self.slots.gave_back(key)
            cap.release(key, index, holder)


class TicketAdmission:
    """The part of `Admission` every regime shares; a regime's wait is its `take`."""

    def __init__(self, ticket: Ticket) -> None:
        self.ticket = ticket

    def take(self, time_left: TimeLeft) -> float | None:
        """Wait for the call's admission in place; the call's timeout. Raises Deferring."""
        raise NotImplementedError

    def admit(self, time_left: TimeLeft) -> Permit | Deferral:
        try:
            return Permit(self.take(time_left))
        except Deferring as deferring:
            return deferring.deferral

    def ended(self, request_sent_at: float | None, reading: VendorReading | None = None) -> None:
        """The request is over: its leases go at once, before the idempotency record's
        completion and the ledger's write. A lease whose release fails expires by itself. Then,
        if the request left later than its slot allows, a slot is spent (`late`). A reading
        is a learning wrapper's (learned.py), not this regime's."""
        del reading
        t = self.ticket
        try:
            t.release_leases()
        except LimiterError:
            logger.warning("lease release failed; it expires by itself", extra=dict(t.ids))
        if request_sent_at is not None and t.leave_by is not None:
            self.late(request_sent_at, t.leave_by)

    def late(self, request_sent_at: float, leave_by: float) -> None:
        """Spend one slot without a call when the request left later than the slot allows (its
        tolerance and the rate's slack).

        The slot was checked just before the call; between that check and the request's last
        byte the environment may stall (Lambda pauses an environment that used its CPU share
        for the rest of a 20 ms period; a loaded host deschedules it). The headroom pays for
        the tolerance and the arrival jitter, not for that stall: measured on a loaded machine,
        such a call arrived 80 ms after its slot and the tenth call after it on time, eleven in
        the vendor's one second. A slot given up empty now keeps the window that late call
        falls in to the rate; how is the regime's (`Ticket.spend_late`)."""
        if request_sent_at <= leave_by:
            return
        t = self.ticket
        t.clocks.metrics.add_metric(Metric.LATE_SENDS, "Count", 1)
        try:
            if t.spend_late is not None:
                t.spend_late()
        except LimiterError:
            logger.warning("a late send's slot could not be spent", extra=dict(t.ids))

    def close(
        self, outcome: OutcomeClass, retry_after_seconds: float | None, limit_value: str | None
    ) -> Closure:
        t = self.ticket
        clocks, limiter, throttle = t.clocks, t.limiter, t.policy.throttle
        now = clocks.now()
        closing = [t.job.scope]
        if outcome is OutcomeClass.THROTTLED and t.policy.further_limits:
            closing = t.throttled_keys(limit_value)  # several limits: the one the 429 names
        if outcome is OutcomeClass.THROTTLED:
            # The limit's last closure (its length and end) and when this call went out
            # decide whether a bare 429 doubles it or starts afresh (backoff.close_delay).
            last = limiter.state(closing[0])
            delay = close_delay(
                retry_after_seconds,
                last.last_close_seconds,
                last.closed_until,
                t.sent_at if t.sent_at is not None else now,
                base=throttle.close_base_seconds,
                cap=throttle.close_cap_seconds,
                jitter=throttle.reopen_jitter_seconds,
                rng=clocks.rng,
            )
            clocks.metrics.add_metric(Metric.THROTTLE_EVENTS, "Count", 1)
        else:
            delay = throttle.auth_cooloff_seconds
            clocks.metrics.add_metric(Metric.AUTH_CIRCUIT_OPEN, "Count", 1)
        until = now + delay
        reason: Reason = (
            "auth"
            if outcome is OutcomeClass.AUTH
            else "throttled"
            if retry_after_seconds is not None
            else "backoff"  # a bare 429: status says the delay is sweeper's own
        )
        paired = t.slots.paired
        for key in closing:
            until = max(until, limiter.close(key, now + delay, reason))
            pairs = t.abilities.paired
            if paired is not None and pairs is not None and key == t.job.scope:
                # its slots are reserved on the wide limit's item: its gate is kept there too
                pairs.close_narrow(paired.wide, key, now + delay)
            t.slots.forget(key)  # this batch's other records use no banked slot
        return Closure(now, delay, until, len(closing))

    def done(self) -> None:
        t = self.ticket
        t.release_leases()
        t.slots.done(t.job.scope, t.called, t)
        t.release_to_table(t.slots.leftover_leases())

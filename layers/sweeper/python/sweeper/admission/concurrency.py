"""Concurrency caps (`max_in_flight`): a call holds a lease of each cap while at the vendor.

A cap's N leases are one DynamoDB item (sweeper.limiter.leases). A call takes a lease of each
cap it is under before its rate slot, so a full cap spends no slot; its request's end gives the
lease back at once (`Admission.ended`), to a thread of its batch waiting for one when there is
one (handoff.py: no write), else to the table. While its batch holds a lease of every cap it
misses the call waits in place for one to be handed on; it goes back to the queue only when
the batch holds none and the throttle's longest wait has passed. `Capped` wraps the rate's
admission (rate.py) in that wait; a call under further rates as well takes its leases once it
holds every rate's slot (composed.py).
"""

from __future__ import annotations

from functools import cached_property

from sweeper.admission.base import TimeLeft
from sweeper.admission.handoff import LEASE_POLL_HOLDING_SECONDS
from sweeper.admission.rate import OneRate
from sweeper.admission.ticket import Ticket, TicketAdmission
from sweeper.config import reach
from sweeper.errors import LimiterError
from sweeper.limiter import Denial

#: A full concurrency cap is asked again after this long (a call at the vendor ends meanwhile).
LEASE_RETRY_SECONDS = 0.05


class Leases:
    """The call's leases of the concurrency caps it is under, taken for its ticket."""

    def __init__(self, ticket: Ticket) -> None:
        self.ticket = ticket

    @cached_property
    def caps(self) -> list[tuple[str, int]]:
        """The concurrency caps the call is under, (limiter key, its cap): rendered once per
        record, not on each of its waits for a lease."""
        t = self.ticket
        return [
            (key, limit.max_in_flight)
            for limit, key in zip(t.policy.further_limits, t.keys[1:], strict=True)
            if limit.max_in_flight is not None
        ]

    @cached_property
    def _shared_caps(self) -> frozenset[str]:
        """The limiter keys of the caps every call of the policy shares (a constant key, or
        one naming only the policy and the action's host)."""
        t = self.ticket
        return frozenset(
            key
            for limit, key in zip(t.policy.further_limits, t.keys[1:], strict=True)
            if limit.max_in_flight is not None and reach(limit.key) == "policy"
        )

    def take(self, look: bool = True) -> bool:
        """A lease of each concurrency cap the call is under (those already held are kept):
        one handed on within the batch, else, if it may `look`, from the table: one read, and
        one write taking a lease for each of the batch's threads waiting (this one's kept, the
        others handed on to them)."""
        capped = self.caps
        if not capped:
            return True
        t = self.ticket
        leases = t.lease_store()
        if leases is None:
            raise LimiterError("this limiter cannot hold concurrency leases")
        for key, cap in capped:
            if any(k == key for k, _, _ in t.leases):
                continue  # handed on by a call of the batch that ended
            handed = t.slots.take_handed(key)
            if handed is not None:
                t.leases.append((key, *handed))
                continue
            if not look:
                return False
            # at most the consumer's timeout: a killed environment's lease frees itself by then
            taken = leases.acquire_some(
                key,
                cap,
                t.holder,
                t.policy.consumer.timeout_seconds,
                t.slots.leases_wanted(key),
            )
            if not taken:
                return False  # those held are kept while it waits (or given back at the end)
            t.leases.append((key, taken[0], t.holder))
            t.slots.took_leases(key, len(taken), [(i, t.holder) for i in taken[1:]])
        return True

    def wait(self, rate: OneRate, time_left: TimeLeft) -> None:
        """A lease of every concurrency cap (a call of the batch that ends hands its lease on
        to a waiting thread without a write). The record waits in place while its batch holds
        a lease of each cap it misses (one comes free here when that call ends) and its Lambda
        has time left; it goes back to the queue only when the batch holds none and the
        longest wait in place has passed (a deferral costs the idempotency record's put and
        delete and a queue round trip), and not while its thread would only take another
        record of the batch waiting for the same leases (`_would_swap`)."""
        t = self.ticket
        clocks, slots = t.clocks, t.slots
        waited = 0.0
        while True:
            # a batch whose calls will hand it every lease missing looks in the table seldom
            if slots.may_poll_leases(holding=self._coming()[1]):
                if self.take():
                    slots.lease_found()
                    return
            elif self.take(look=False):  # only what the batch's ended calls handed on
                return
            t.time_for_call(time_left)
            missing, coming = self._coming()
            if (
                waited > t.policy.throttle.max_wait_seconds
                and not coming
                and not self._would_swap(missing)
            ):
                t.defer(Denial(clocks.now() + 1.0, "rate"), 1.0)
            started = clocks.now()
            # A lease handed on wakes this thread at once (handoff.py: one condition per cap
            # key). While the batch holds one of each cap missing, that is how the lease comes:
            # sleep as long as the batch's looks in the table are apart, not a poll's interval.
            # One waiter per scope wakes sooner, to read the gate before the batch's look at it
            # is too old to cover a call (bank.py LOOK_KEPT_FRESH_SECONDS): the call sent when
            # a lease comes then reads nothing first.
            nap = LEASE_POLL_HOLDING_SECONDS if coming else LEASE_RETRY_SECONDS
            self._adopt_handed(min(nap, slots.look_stale_in(t.job.scope)))
            if len(t.leases) == len(self.caps):
                return
            # One waiter per scope keeps the look fresh meanwhile, and a slot banked for the
            # call that gets the next lease: a reservation is a look too.
            if not self._restock() and slots.look_stale_in(t.job.scope) <= 0:
                rate.look_at_gate()
            waited += max(LEASE_RETRY_SECONDS, clocks.now() - started)

    def _restock(self) -> bool:
        """As the scope's lease waiter keeping its look, bank a block when the bank is empty
        (BatchSlots.restock): the call that gets the next lease then writes nothing before
        its send. True when it did (the block's write is a look at an open gate)."""
        t = self.ticket
        scope = t.job.scope
        if not t.slots.restock_due(scope):
            return False
        # Only slots usable by then: a block further off would outlast the calls it is for.
        return t.slots.restock(scope, t.policy.quota.interval_seconds, t.slots.usable_for)

    def _coming(self) -> tuple[list[str], bool]:
        """The caps whose lease this call still misses, and whether its batch holds a lease of
        each of them (at the vendor, or handed on): one comes free here when that call ends."""
        missing = self._missing()
        return missing, all(self.ticket.slots.holds_lease(key) for key in missing)

    def _missing(self) -> list[str]:
        """The caps whose lease this call still misses."""
        held = {k for k, _, _ in self.ticket.leases}
        return [key for key, _ in self.caps if key not in held]

    def _would_swap(self, missing: list[str]) -> bool:
        """Whether going back to the queue would only swap this record for another of its
        batch that waits for the same leases: each cap missing is shared by every call of the
        policy (its key names no field of the job) and the batch has records no thread took
        yet. Its thread would take one of them and wait as long, and the deferral would cost
        the idempotency record's put and delete and a queue round trip for nothing."""
        untaken = self.ticket.slots.records_untaken()
        return untaken and all(key in self._shared_caps for key in missing)

    def _adopt_handed(self, seconds: float) -> None:
        """Wait up to `seconds` for leases handed on within the batch, for the caps still
        missing (the first waits, the others only take what is there)."""
        t = self.ticket
        for i, key in enumerate(self._missing()):
            got = t.slots.wait_for_lease(key, seconds) if i == 0 else t.slots.take_handed(key)
            if got is None:
                return
            t.leases.append((key, *got))


class Capped(TicketAdmission):
    """Concurrency caps beside the scope's rate: a lease of each first, then the scope's slot
    as for one limit (banked in blocks), so a full cap spends no slot."""

    def __init__(self, rate: OneRate) -> None:
        super().__init__(rate.ticket)
        self.rate = rate
        self.leases = Leases(rate.ticket)

    def take(self, time_left: TimeLeft) -> float | None:
        slots = self.ticket.slots
        slots.waiting_for_leases(1)
        try:
            self.leases.wait(self.rate, time_left)
        finally:
            slots.waiting_for_leases(-1)
            slots.stop_keeping(self.ticket.job.scope)
        return self.rate.take(time_left)

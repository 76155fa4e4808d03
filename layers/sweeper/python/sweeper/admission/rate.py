"""One rate limit: a call takes its scope's next slot, banked in blocks by its batch.

The rate is the GCRA of the shared DynamoDB limiter (sweeper.limiter.dynamodb), reserved a
block at a time by the batch (bank.py). A slot within the throttle's longest wait is waited for
in place; one further, or a closed gate, defers the record. A slot past its use (the late-slot
tolerance, and the rate's slack) is let go and another taken. A slot further away than
GATE_RECHECK_LEAD_SECONDS after the batch's last look at an open gate is looked at again just
before it (GATE_READ_LEAD_SECONDS), in one read with the gates of the batch's other scopes that
look covers. With paired limits (pairing.py) the slot is both limits' slot; a call whose pair
the wide limit's item is too full to take holds its limits one at a time (composed.py).
"""

from __future__ import annotations

from collections.abc import Callable

from sweeper.admission.base import (
    GATE_READ_LEAD_SECONDS,
    GATE_RECHECK_LEAD_SECONDS,
    TimeLeft,
)
from sweeper.admission.ticket import TicketAdmission
from sweeper.config import LATE_SLOT_TOLERANCE_SECONDS
from sweeper.limiter import MAX_GATES_PER_READ, Denial, ScopeState
from sweeper.limiter.paired import PairedItemFull
from sweeper.observability import Metric


class OneRate(TicketAdmission):
    """A call under its scope's rate (the policy's quota), its slot from the batch's bank.

    `on_full`: with paired limits, how the call is admitted when the wide limit's item is too
    full to take its key (composed.py's `EveryLimit.take` on the same ticket)."""

    on_full: Callable[[TimeLeft], float | None] | None = None

    def take(self, time_left: TimeLeft) -> float | None:
        """Wait for this scope's next slot (in place, or by going back to the queue)."""
        t = self.ticket
        clocks, slots = t.clocks, t.slots
        scope = t.job.scope
        quota = t.policy.quota
        waited = False
        while True:
            horizon = t.horizon(time_left)
            try:
                requested, decision = slots.reserve(scope, quota.interval_seconds, horizon, t)
            except PairedItemFull:
                # The wide limit's item is too full to take this call's key (logged by the
                # limiter): this call holds its slots one limit at a time.
                assert self.on_full is not None
                return self.on_full(time_left)
            now = clocks.now()
            if isinstance(decision, Denial):
                t.sit_out(decision, now, horizon, waited)
                waited = True
                continue
            usable = slots.usable_for  # the late tolerance, and the rate's slack if any
            wait = decision.slot_at - now
            if wait < -usable:
                # The reservation itself took long enough that its slot has passed: calling now
                # would arrive late and bunch up with the next slot's call. Let it go unused.
                clocks.metrics.add_metric(Metric.LATE_SLOTS, "Count", 1)
                continue
            if wait > 0 and not waited:
                clocks.metrics.add_metric(Metric.LIMITER_WAITS, "Count", 1)
            if decision.slot_at - requested > GATE_RECHECK_LEAD_SECONDS:
                # The reservation saw the gate open, but its slot is further away than the lead:
                # the gate may close meanwhile. Look once more before the slot, unless another
                # thread's look by then covers it. Every call is thus sent at most the lead
                # after the batch's last look at an open gate.
                if wait > GATE_READ_LEAD_SECONDS:
                    clocks.sleep(wait - GATE_READ_LEAD_SECONDS)
                if not slots.covers(scope, decision.slot_at):
                    self.look_at_gate()
                wait = decision.slot_at - clocks.now()
                if wait < -usable:
                    clocks.metrics.add_metric(Metric.LATE_SLOTS, "Count", 1)
                    continue  # the read was slow: this slot has passed, take another
            if wait > 0:
                clocks.sleep(wait)
                if clocks.now() - decision.slot_at > usable:
                    # Woken too late (a loaded machine, a paused environment): sent now, this
                    # call could arrive in the next slot's window. Let it go, take another.
                    clocks.metrics.add_metric(Metric.LATE_SLOTS, "Count", 1)
                    continue
                if not slots.covers(scope, decision.slot_at):
                    # The batch saw the gate close while this call waited for its slot (an
                    # answer's 429, or a lowering learned.py closed on): no earlier look
                    # counts. Look again rather than call on a slot of the old pace.
                    self.look_at_gate()
                    if clocks.now() - decision.slot_at > usable:
                        clocks.metrics.add_metric(Metric.LATE_SLOTS, "Count", 1)
                        continue
            now = clocks.now()
            if now - decision.slot_at > LATE_SLOT_TOLERANCE_SECONDS and not slots.covers(
                scope, now
            ):
                # Called within its slack (only a rate with one gets here): the batch's last look
                # at the gate may be older than the lead before now. Look again, so that this
                # call too is sent at most the lead (and the tolerance) after an open look.
                self.look_at_gate()
                if clocks.now() - decision.slot_at > usable:
                    clocks.metrics.add_metric(Metric.LATE_SLOTS, "Count", 1)
                    continue
            t.let_go(decision.slot_at, slots.usable_for, self._spend_one)
            return time_left()

    def _spend_one(self) -> None:
        """A late request's slot: the next banked one, else one reserved within the period
        (with paired limits, a slot of both)."""
        t = self.ticket
        quota = t.policy.quota
        t.slots.spend_one(t.job.scope, quota.interval_seconds, quota.period_seconds)

    def look_at_gate(self) -> None:
        """Read this call's gate before its call: closed, its slot is given up, no other thread
        of the batch calls on an earlier look, and the record goes back until the reopening;
        open, the look covers the batch's calls for the lead after it.

        In the same request (a limiter that is a GateReader, or paired limits) it reads the
        gates of the batch's other scopes whose slots it will cover (BatchSlots.gates_to_read):
        each found open is covered for their calls too, each found closed is forgotten (its
        threads look again and go back). Paired limits' gates are all on the wide limit's item,
        so their look reads that one item (a GetItem) however many scopes it covers, and learns
        the wide limit's gate with them: closed, every scope is."""
        t = self.ticket
        clocks, slots, limiter = t.clocks, t.slots, t.limiter
        scope = t.job.scope
        paired = slots.paired
        looked = clocks.now()
        states: dict[str, ScopeState] = {}
        pairs = t.abilities.paired
        if paired is not None and pairs is not None:
            look = slots.gates_to_read(scope, looked, most=None)
            states = pairs.paired_states(paired.wide, look.scopes)
        else:
            reader = t.abilities.gates
            look = slots.gates_to_read(scope, looked, MAX_GATES_PER_READ if reader else 1)
            if reader is not None and len(look.scopes) > 1:  # one gate: a GetItem costs less
                states = reader.states(look.scopes)
            if scope not in states:  # one gate to read, or its key left unread
                states[scope] = limiter.state(scope)
        state = states[scope]
        answered = clocks.now()
        slots.looked(look, states, answered)
        t.gate_closed(state, answered)

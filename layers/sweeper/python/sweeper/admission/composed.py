"""Several limits on one call: a slot in each rate, and a lease of each concurrency cap.

A call held by several rate limits (2/s per store and 40/s for the app) takes a slot in each,
all within LIMITS_SPREAD_SECONDS before its send (`reserve_all`, sweeper.limiter.several), one
call at a time, not banked; then a lease of each cap it is under (concurrency.py). Waits and
deferrals are as for one limit (rate.py), and a far call reads every limit's gate again just
before it, in one request. Two rates whose wide key is one for every call (a constant, `{host}`)
are reserved together on the wide limit's item instead (pairing.py, through rate.py's bank), and
fall back to this when that item is too full. A scope that learns its rate (learned.py) is
reserved at the rate it holds. Which limit a 429 closes is the ticket's (ticket.py
`throttled_keys`).
"""

from __future__ import annotations

from sweeper.admission.base import (
    GATE_READ_LEAD_SECONDS,
    GATE_RECHECK_LEAD_SECONDS,
    TimeLeft,
    read_gates,
)
from sweeper.admission.concurrency import LEASE_RETRY_SECONDS, Leases
from sweeper.admission.learned import learned_spec
from sweeper.admission.ticket import Ticket, TicketAdmission
from sweeper.config import LATE_SLOT_TOLERANCE_SECONDS, Quota
from sweeper.errors import LimiterError
from sweeper.limiter import Denial
from sweeper.limiter.several import CallSlots, LimitAsk, reserve_all
from sweeper.observability import Metric

#: A call held by several limits is sent at most this long after the earliest of its slots
#: (sweeper.limiter.several): half the late-slot tolerance, the other half is for waking late.
LIMITS_SPREAD_SECONDS = LATE_SLOT_TOLERANCE_SECONDS / 2


class EveryLimit(TicketAdmission):
    """A slot in each of the call's rate limits, then a lease of each of its caps."""

    def __init__(self, ticket: Ticket) -> None:
        super().__init__(ticket)
        self.leases = Leases(ticket)

    def take(self, time_left: TimeLeft) -> float | None:
        """A slot in each of the call's limits, all within LIMITS_SPREAD_SECONDS before the
        call (sweeper.limiter.several); waits and deferrals as for one limit."""
        t = self.ticket
        clocks = t.clocks
        throttle = t.policy.throttle
        source = t.abilities.several
        if source is None:
            raise LimiterError("this limiter cannot hold a call in several limits")
        asks = [
            LimitAsk(key, rate.interval_seconds, self._tolerance(rate)) for key, rate in t.rates()
        ]
        learned = learned_spec(t.policy)
        if learned is not None:  # the scope's rate is the one the vendor stated (learned.py)
            asks[0] = LimitAsk(asks[0].key, asks[0].interval, 0.0, learned)
        waited = False
        lease_waits = 0
        while True:
            horizon = t.horizon(time_left)
            requested = clocks.now()
            got = reserve_all(source, asks, horizon, LIMITS_SPREAD_SECONDS, now=requested)
            if isinstance(got, Denial):
                t.sit_out(got, clocks.now(), horizon, waited)
                waited = True
                continue
            if got.send_at - requested > GATE_RECHECK_LEAD_SECONDS:
                self._recheck_gates(got)
            wait = got.send_at - clocks.now()
            if wait > 0:
                if not waited:  # a sleep to the slots is a wait, as one limit's (rate.py)
                    waited = True
                    clocks.metrics.add_metric(Metric.LIMITER_WAITS, "Count", 1)
                clocks.sleep(wait)
            if clocks.now() - got.earliest > LATE_SLOT_TOLERANCE_SECONDS:
                clocks.metrics.add_metric(Metric.LATE_SLOTS, "Count", 1)
                continue  # woken too late for one of its limits: let the slots go, take others
            if not self.leases.take():
                # A concurrency cap is full: these slots are spent without a call. A call at
                # the vendor ends within moments, so wait a little in place and take new ones;
                # past the longest wait in place, the record goes back to the queue.
                lease_waits += 1
                if lease_waits * LEASE_RETRY_SECONDS > throttle.max_wait_seconds:
                    t.defer(Denial(clocks.now() + 1.0, "rate"), 1.0)
                clocks.sleep(LEASE_RETRY_SECONDS)
                continue
            t.let_go(got.earliest, LATE_SLOT_TOLERANCE_SECONDS, self._spend_in_every_limit)
            return time_left()

    def _recheck_gates(self, got: CallSlots) -> None:
        """Look at every limit's gate once more just before a far call (as for one limit): all
        in one request when the limiter reads several gates at once (a GateReader; a key it
        leaves unread is read alone)."""
        t = self.ticket
        clocks, limiter = t.clocks, t.limiter
        wait = got.send_at - clocks.now()
        if wait > GATE_READ_LEAD_SECONDS:
            clocks.sleep(wait - GATE_READ_LEAD_SECONDS)
        keys = list(got.slots)
        states = read_gates(limiter, t.abilities.gates, keys)
        for key in keys:
            t.gate_closed(states[key], clocks.now())

    def _spend_in_every_limit(self) -> None:
        """A late request's slots: one of each rate limit the call held, reserved within the
        limit's period and not called in, one write each."""
        t = self.ticket
        source = t.abilities.several
        assert source is not None  # `take` made the call with it
        for key, rate in t.rates():
            source.reserve(
                key,
                rate.interval_seconds,
                rate.period_seconds,
                tolerance=self._tolerance(rate),
            )

    def _tolerance(self, rate: Quota) -> float:
        """A rate's burst tolerance (`Quota.pacing`); none as paired limits' fallback (the
        rule is not shown for their items)."""
        return 0.0 if self.ticket.slots.paired is not None else rate.pacing().tolerance_seconds

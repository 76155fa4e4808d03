"""A learned limit: the rate the vendor states in its answers, held for the fleet (a wrapper).

A policy whose first limit (the job's scope) has `learn` (sweeper.config.learn) paces its scope
by what the vendor says. After each call, the answer's reading (the http action reads it with
the limit's `Reader`, sweeper.vendor_limits) is applied here, on the scope's limiter item, so
every environment follows it from its next reservation:

- the steady rate is the lower of the told rate and the stated `quota / window`
  (`vendor_limits.pace.learned_pace`), the rate's headroom applied: a lowering is held from
  the answer that states it, a raise never past the told rate;
- `remaining = 0` with a reset closes the scope's gate until the reset, for every consumer, as
  a Retry-After does, when the window is over: not when it is full at the pace already held
  (sweeper.vendor_limits.full: sweeper's own calls at that pace fill it, and the next slot
  finds one of them gone). The gate is closed before the rate is written: on a lowering, the
  closure is what stops the fleet's calls at the old pace;
- a lowering, once this process knows it (its own write, or another consumer's read from the
  scope's item), drops what the batch banked at the old rate at its next admission
  (`BatchSlots.paced_at`: the rate's version on the item against the one the bank knew);
- every call looks at the scope's item just before it goes (`_last_look`: one strongly
  consistent GetItem, no write): a gate closed since its slot was granted sends the record
  back until the reopening; a rate lowered since its admission began (another consumer read
  the vendor's answer first), below what the old pace needs, gives the slot up unused and
  admits the call again at the new rate. No call goes on the old state once the lowering is
  on the item: those sent at the old pace after a change are sent before any answer says it,
  or while an answer is read and written. Of a quota others spend too, the write that holds a
  rate records beside it what the vendor's statement alone allows (`ar_stated`,
  sweeper.limiter.held), so that only the vendor's lowering gives a slot up, never a pace their
  spend moved (of a quota sweeper has alone, the rate held is the statement: none recorded);
- a quota others spend too is split into sweeper's share and theirs, and paced at what they
  leave less the reserve kept for them, the gate closed at the reserve (shared.py);
- with a cost (`learn.cost`), a call takes its expected cost in units of the rate (cost units
  per second) with its slot, and the answer's actual cost corrects it both ways (costs.py); a
  points bucket whose level (the vendor's) is below the next call's requested cost closes the
  gate until it has restored that much, and its restore rate is the pace (never above the
  told rate).

A scope starts from the vendor's first answer: until one is read, it is paced at one call per
round trip of the vendor (`start_rate`: the policy's stated p95 latency, else the longest a call
may take with the action's timeouts), never at the told rate, which may be above what the vendor
allows (its first window would be overspent before it said so). The first answer moves it: to
the rate it states, or, stating nothing this scope paces by, to the told rate (once: only from
the start, so a silent answer never undoes a rate another answer stated).

The rate is held where the adaptive rate is (the item's `ar`, conditional on its version:
sweeper.limiter.dynamodb `hold_rate`), and reserved at through the same spec (`learned_spec`,
which never climbs on its own). Why a wrapper and not a regime: what is learned changes the
rate one regime reserves at and closes the gate every regime obeys; the reservation itself,
its banking and its leases stay the wrapped regime's.
"""

from __future__ import annotations

import logging
import math
from typing import Final

from sweeper.adaptive_rate import Adaptive
from sweeper.admission.base import Admission, Closure, Deferral, Permit, RateHolder, TimeLeft
from sweeper.admission.costs import correct, correction, next_cost
from sweeper.admission.shared import SHARED_HOLD_WITHIN, SharedQuota
from sweeper.admission.ticket import StaleSlot, Ticket
from sweeper.config import Policy
from sweeper.config.learn import CostError, LearnConfig
from sweeper.config.limit import LimitConfig
from sweeper.errors import LimiterError
from sweeper.limiter.held import HeldRate
from sweeper.models import OutcomeClass
from sweeper.observability import Metric
from sweeper.vendor_limits import Reader, policy_for
from sweeper.vendor_limits.full import window_over
from sweeper.vendor_limits.pace import bucket_pace, learned_pace
from sweeper.vendor_limits.unread import report_unread
from sweeper.vendor_reading import MAX_WAIT_SECONDS, LimitReading, VendorReading

logger = logging.getLogger(__name__)

#: The lowest rate a learned limit is paced at (calls per second): below it a vendor is
#: closing, which its remaining and reset say (the gate), not a pace.
MIN_LEARNED_RATE: Final = 0.001
#: A stated rate within this share of the one held is not written again: an answer per call
#: would otherwise cost a write per call. Below the rate's headroom (at least 5 %), so a
#: lowering the vendor states is always followed within the headroom.
HOLD_WITHIN: Final = 0.01
#: How often a call's admission starts again because the rate its slot was granted at was
#: lowered before it went (each time a newer rate another consumer wrote): past it, the record
#: goes back to the queue at once rather than wait for yet another slot.
MAX_READMISSIONS: Final = 3


def learned_limit(policy: Policy) -> LimitConfig | None:
    """The policy's limit that learns (its first, the job's scope), if it has one."""
    first = policy.limits[0] if policy.limits else None
    return first if first is not None and first.learn is not None else None


def reader_for(policy: Policy) -> Reader | None:
    """What the http action reads each answer with (None: the policy learns nothing)."""
    limit = learned_limit(policy)
    if limit is None or limit.learn is None:
        return None
    return limit.learn.reader(limit.name)


def learned_spec(policy: Policy) -> Adaptive | None:
    """The spec a learned scope reserves at: the rate its item holds, between the floor and
    the told rate (its headroom applied), never raised on its own (no increase)."""
    if learned_limit(policy) is None:
        return None
    ceiling = policy.quota.rate_per_second
    return Adaptive(
        floor=min(MIN_LEARNED_RATE, ceiling),
        cap=ceiling,
        increase=0.0,
        cut=1.0,  # a 429 cuts nothing: the vendor's next statement says the rate
        cooldown=policy.quota.period_seconds,
    )


def start_rate(policy: Policy) -> float:
    """The rate a learned scope starts at, before any answer: one call per round trip of the
    vendor, its stated p95 latency (`action.latency_p95_seconds`), else the longest a call may
    take (`action.call_seconds`, its timeouts); never above the told rate. A limit counting
    costs starts at the told rate still: its slots are cost units, a call takes several at
    once (their pace is the first answer's bucket, its level the gate)."""
    told = policy.quota.rate_per_second
    limit = learned_limit(policy)
    if limit is not None and limit.learn is not None and limit.learn.cost is not None:
        return told
    latency = policy.action.latency
    round_trip = policy.action.call_seconds if latency is None else latency[1]
    return max(min(MIN_LEARNED_RATE, told), min(told, 1.0 / round_trip))


class LearnedRate:
    """`inner`'s admission, with the scope paced and gated by what the vendor states."""

    @classmethod
    def around(cls, inner: Admission, ticket: Ticket) -> Admission:
        """`inner` wrapped when the policy's scope learns and the limiter can hold a rate."""
        limit = learned_limit(ticket.policy)
        holder = ticket.abilities.rates
        if limit is None or limit.learn is None or holder is None:
            return inner
        return cls(inner, ticket, limit.learn, holder)

    def __init__(
        self, inner: Admission, ticket: Ticket, learn: LearnConfig, holder: RateHolder
    ) -> None:
        self._inner = inner
        self._ticket = ticket
        self._learn = learn
        self._holder = holder
        quota = ticket.policy.quota
        self._name = ticket.policy.limits[0].name
        self._window = learn.window_seconds or quota.period_seconds
        self._ceiling = quota.limit / quota.period_seconds  # the told rate, before headroom
        self._headroom = quota.effective_headroom
        self._expected = 1
        self._reserved = 1  # the units this call holds of its scope's rate (costs.py)
        self._shared = SharedQuota.of(ticket, learn, self._window)
        self._start = start_rate(ticket.policy)
        self._granted: HeldRate | None = None  # the rate as this admission began
        ticket.last_look = self._last_look

    def admit(self, time_left: TimeLeft) -> Permit | Deferral:
        t = self._ticket
        for _ in range(MAX_READMISSIONS + 1):
            # a scope no consumer has paced yet starts at one call per round trip, until an
            # answer says more (a LimiterError returns the record, as a reservation's does)
            self._holder.hold_rate(t.job.scope, self._start, unset_only=True)
            self._granted = self._holder.held_rate(t.job.scope)  # what its slot is paced at
            t.slots.paced_at(t.job.scope, self._granted)
            try:
                admitted = self._inner.admit(time_left)
            except StaleSlot:
                t.release_leases()  # taken beside the slot given up (a cap): taken again
                continue
            return self._costed(admitted)
        return Deferral(0.0, "rate")

    def _last_look(self) -> None:
        """Just before the call goes on its slot (`Ticket.last_look`): read the scope's item,
        strongly consistent, which learns a rate another consumer wrote (`HeldRates.seen`).
        Its gate closed: the record goes back until the reopening (Deferring). Its rate lower
        than when this admission began, below what the vendor now allows at the old pace
        (`lowered_since`): the slot is given up with what the batch banked at that pace, and
        the call admitted again (StaleSlot). Of a shared quota, only when the vendor's own
        statement fell so (the item records it beside the rate): its pace moves with the
        others' spend too, whose reserve the gate read here keeps, and a slot given up for that
        only went unused (bench (g): 0.70-0.75 of what is left with it, 0.93 without). A read slow
        enough to make the call late does not give its slot up: the call goes, and a request
        that left late spends another slot (`TicketAdmission.late`); given up, a scope at its
        start (a call per round trip) would wait a round trip more for the answer that says
        its rate."""
        t = self._ticket
        clocks, slots, scope = t.clocks, t.slots, t.job.scope
        look = slots.gates_to_read(scope, clocks.now(), 1)
        state = t.limiter.state(scope)
        answered = clocks.now()
        slots.looked(look, {scope: state}, answered)
        t.gate_closed(state, answered)
        held = self._holder.held_rate(scope)
        if lowered_since(self._granted, held, self._headroom, shared=self._shared is not None):
            slots.paced_at(scope, held)
            clocks.metrics.add_metric(Metric.STALE_SLOTS, "Count", 1)
            raise StaleSlot(f"scope {scope}: its rate was lowered since its slot was granted")

    def _costed(self, admitted: Permit | Deferral) -> Permit | Deferral:
        """A permit's call takes its expected cost with its slot (costs.py)."""
        t = self._ticket
        if isinstance(admitted, Permit) and self._learn.cost is not None:
            try:
                self._expected = max(1, math.ceil(self._learn.cost.expected(t.job.params)))
            except CostError as exc:
                logger.warning("cost unknown: one unit taken", extra={**t.ids, "code": exc.code})
            taken = t.slots.units  # what the call's slot weighed
            self._reserved = max(taken, self._expected)
            correct(t, self._expected - taken, learned_spec(t.policy))
        return admitted

    def ended(self, request_sent_at: float | None, reading: VendorReading | None = None) -> None:
        self._inner.ended(request_sent_at, reading)
        if reading is not None:  # what it left aside, counted and logged by the call's ids
            clocks = self._ticket.clocks
            report_unread(reading, self._ticket.ids, clocks.metrics, clocks.monotonic())
        try:
            if self._shared is not None and request_sent_at is not None:
                self._shared.called()  # the vendor counted it, whatever it answered
            paced = reading is not None and reading.learned and self._apply(reading)
            if reading is not None and not paced:
                self._leave_start()
        except LimiterError:
            # what was learned is lost for this answer only: the next one says it again
            logger.warning("the vendor's limits could not be held", extra=dict(self._ticket.ids))

    def close(
        self, outcome: OutcomeClass, retry_after_seconds: float | None, limit_value: str | None
    ) -> Closure:
        return self._inner.close(outcome, retry_after_seconds, limit_value)

    def done(self) -> None:
        self._inner.done()

    # -- what an answer teaches --------------------------------------------------------------

    def _apply(self, reading: VendorReading) -> bool:
        """Pace and gate the scope by `reading`; True when it held a rate (stated a pace)."""
        paced = False
        stated = self._stated(reading)
        if stated is not None:
            scope = self._ticket.job.scope
            held = self._holder.held_rate(scope)  # the pace before this answer
            steady = learned_pace(
                self._ceiling,
                LimitReading(stated.name, stated.quota, stated.window_seconds),
                self._window,
            )
            share = None
            rate = allowed = None
            if steady is not None and steady.rate_per_second > 0:
                rate = steady.rate_per_second
                if self._shared is not None:  # its pace moves with the others' spend too
                    allowed = max(MIN_LEARNED_RATE, rate * self._headroom)  # the vendor's alone
                    share = self._shared.pace(stated, rate, MIN_LEARNED_RATE)
                rate = rate if share is None else share.rate_per_second
                rate = max(MIN_LEARNED_RATE, rate * self._headroom)
            if share is not None and share.wait_seconds:
                self._close_for(share.wait_seconds)
            elif stated.reset_seconds and window_over(
                stated,
                held_per_second=None if held is None else held.rate,
                stated_per_second=None if steady is None else steady.rate_per_second,
                headroom=self._headroom,
                window_seconds=stated.window_seconds or self._window,
                within=HOLD_WITHIN,
            ):
                self._close_for(stated.reset_seconds)
            if rate is not None:
                self._hold(rate, HOLD_WITHIN if share is None else SHARED_HOLD_WITHIN, allowed)
                self._ticket.slots.paced_at(scope, self._holder.held_rate(scope))
                paced = True
        cost = reading.cost
        if cost is None:
            return paced
        units = correction(self._reserved, cost.actual)  # both ways: what the estimate missed
        correct(self._ticket, units, learned_spec(self._ticket.policy))
        self._reserved += units
        bucket = cost.bucket
        restored = None if bucket is None else bucket_pace(self._ceiling, bucket)
        if restored is not None:  # a bucket's pace is what it restores (the store's plan)
            self._hold(max(MIN_LEARNED_RATE, restored * self._headroom), HOLD_WITHIN)
            paced = True
        if bucket is not None and bucket.level is not None and bucket.restore_rate:
            short = next_cost(self._expected, cost.requested) - bucket.level  # not there yet
            if short > 0:
                self._close_for(short / bucket.restore_rate)
        return paced

    def _leave_start(self) -> None:
        """An answer that stated no pace for this scope: a scope still at its start goes to
        the told rate (only from the start: a rate another answer stated stands)."""
        t = self._ticket
        told = t.policy.quota.rate_per_second
        if self._holder.hold_rate(t.job.scope, told, only_from=self._start):
            t.slots.forget(t.job.scope)

    def _stated(self, reading: VendorReading) -> LimitReading | None:
        """The limit the reading states for this scope's limit: an IETF policy by name or
        window (`policy_for`); from a source that states one limit, that one."""
        if self._learn.source == "ratelimit":
            return policy_for(
                reading.limits,
                limit_name=self._name,
                policy=self._learn.policy,
                told_window_seconds=self._window,
            )
        return reading.limits[0] if len(reading.limits) == 1 else reading.limit(self._name)

    def _hold(self, rate: float, within: float, stated: float | None = None) -> None:
        """Hold `rate`, with what the vendor's statement alone allows (`stated`) beside it."""
        t = self._ticket
        if self._holder.hold_rate(t.job.scope, rate, within=within, stated=stated):
            t.slots.forget(t.job.scope)  # slots banked at the rate before are not used

    def _close_for(self, seconds: float) -> None:
        """Close the scope's gate for every consumer until `seconds` from now (at most
        MAX_WAIT_SECONDS, as any wait a vendor states: a vendor's window is at most an hour,
        and a wrong clock must not hold a scope for a day)."""
        t = self._ticket
        now = t.clocks.now()
        t.limiter.close(t.job.scope, now + min(seconds, MAX_WAIT_SECONDS), "throttled")
        t.slots.forget(t.job.scope)  # this batch's banked slots are not used meanwhile
        t.clocks.metrics.add_metric(Metric.LEARNED_CLOSURES, "Count", 1)


def lowered_since(
    before: HeldRate | None, now: HeldRate | None, headroom: float, *, shared: bool
) -> bool:
    """Whether the rate held `now` is a lowering since `before` that a slot paced at `before`
    would overspend: a newer version whose vendor's statement, before its `headroom`, is below
    the rate held `before` (the old pace is faster than the vendor now allows). Of a quota
    sweeper has alone the statement is the rate held; of a `shared` one, whose rate moves with
    the others' spend too, it is the one recorded beside the rate (none recorded: no lowering
    known), so a pace their spend alone moved never gives a slot up. A smaller lowering takes
    only the headroom of the calls already granted, as the slots banked before it are dropped
    at the next admission."""
    if before is None or now is None or now.version <= before.version:
        return False
    allowed = now.stated if shared else now.rate
    return allowed is not None and allowed < before.rate * headroom


__all__ = ["LearnedRate", "learned_spec", "lowered_since", "reader_for", "start_rate"]

"""Slot banking: the limiter slots of one batch, reserved several in one write per scope.

A record takes its slot from the limiter its scope shares with every consumer. BatchSlots
reserves a block of slots for a scope in one DynamoDB write and hands them out one per call,
sized by the batch's free threads (BLOCK_SHARE_OF_THREADS) and a span (BLOCK_SPAN_SECONDS);
it also keeps, per scope, the batch's last look at an open gate, so a call is sent at most
GATE_RECHECK_LEAD_SECONDS (plus the late-slot tolerance) after it: a closure takes back every
banked slot and every earlier look. A look reads, in the same request, the gates of the batch's
other scopes with a slot it will cover (`gates_to_read`, `looked`); for paired limits that
request is the one read of the wide limit's item, which holds every scope's gate. A rate with
a slack (`quota.slack_seconds`) lets a banked slot be used up to the slack after its time, so a
call that waited for a concurrency lease takes one at once instead of reserving its own. Shared
by the batch's threads, never locked across a write. The batch's concurrency leases handed on
(handoff.py) and its paired writes (pairing.py) are mixins under the same lock.
"""

from __future__ import annotations

import functools
import math
import threading
from collections import Counter, deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sweeper.admission.base import (
    BLOCK_SHARE_OF_THREADS,
    BLOCK_SPAN_SECONDS,
    GATE_RECHECK_LEAD_SECONDS,
    CostSlots,
)
from sweeper.admission.handoff import LeaseHandOff
from sweeper.admission.pairing import PairedBank, PairedLimits
from sweeper.config import LATE_SLOT_TOLERANCE_SECONDS
from sweeper.limiter import Adaptive, Denial, Grant, Limiter, ScopeState
from sweeper.limiter.held import HeldRate
from sweeper.observability import Metric, MetricSink

#: With a slack, a block also covers the calls its scope is expected to start within the slack:
#: their rate is taken from the last this many calls of the batch's scope.
SLACK_RATE_SAMPLE = 8


@dataclass(frozen=True, slots=True)
class GateLook:
    """A look at the gates of some of a batch's scopes, asked at `at`: the scopes to read (the
    asking call's first) and, for each, how many closures the batch had seen of it then; for a
    paired batch, also how many of the wide limit's (`wide_closures`), whose gate the same read
    tells."""

    at: float
    closures: Mapping[str, int]
    wide_closures: int | None = None

    @property
    def scopes(self) -> list[str]:
        return list(self.closures)


class BatchSlots(LeaseHandOff, PairedBank):
    """The limiter slots of one batch: reserved several in one write, handed out one per call.

    When a record needs a slot and none is banked for its scope, one write reserves a slot for
    each thread that may ask within moments: at most the batch's records of that scope not yet
    called, and at most BLOCK_SPAN_SECONDS from the first slot to the last. A free thread comes
    for a banked slot whatever the scope of the batch's next record (`offer`, BankedFirst). The
    slots keep the limiter's times; a banked slot whose time has passed beyond `usable_for` (the
    rate's slack and the late tolerance) is let go, never used later. Within it, a thread takes
    the slot at once, with no write and no wait (the rate's headroom paid for the slack:
    config/quota.py `safe_headroom`), and a block also covers the calls of its scope expected
    within the slack (SLACK_RATE_SAMPLE). A paired slot is both limits' slot, so it is usable
    for the smaller of the two slacks. With `parallel_calls = 1` this is one slot
    per write, as before. Shared by the batch's threads.
    """

    def __init__(
        self,
        limiter: Limiter,
        parallel_calls: int,
        calls_by_scope: Mapping[str, int],
        now: Callable[[], float],
        metrics: MetricSink,
        adaptive: Adaptive | None = None,
        paired: PairedLimits | None = None,
        slack_seconds: float = 0.0,
        tolerance_seconds: float = 0.0,
        costs: tuple[CostSlots, int] | None = None,
    ) -> None:
        self.paired = paired
        #: With `costs` (a limiter that weighs slots, and a call's cost in units of the rate):
        #: each slot weighs that many units, taken in its write (sweeper.admission.costs).
        self.units = 1
        self._weighed: Callable[..., Grant | Denial] | None = None
        if costs is not None and costs[1] > 1:
            self.units = costs[1]
            self._weighed = functools.partial(costs[0].reserve, units=self.units)
        if paired is not None:
            slack_seconds = min(slack_seconds, paired.wide_slack)
        self._slack = slack_seconds
        #: The rate's burst tolerance (`Quota.pacing`), passed on every write of this batch's
        #: own rate; none for paired limits, whose one write holds both limits' slots.
        self._tolerance = tolerance_seconds if paired is None else 0.0
        #: How long after its time a slot of this batch may still be called on.
        self.usable_for = slack_seconds + LATE_SLOT_TOLERANCE_SECONDS
        # per scope, when its last calls started (with a slack: the block covers those expected)
        self._starts: dict[str, deque[float]] = {}
        self._limiter = limiter
        self._adaptive = adaptive
        self._parallel = parallel_calls
        self._pending = Counter(calls_by_scope)  # records of each scope yet to take a slot
        self._now = now
        self._metrics = metrics
        self._banked: dict[str, deque[float]] = {}
        self._open_at: dict[str, float] = {}  # per scope: the latest look that saw it open
        self._calling = 0  # threads between their slot and their outcome
        # record -> (scope, slot time): a slot granted, not yet called on
        self._holding: dict[object, tuple[str, float]] = {}
        self.used = 0  # slots taken and called in (a slot let go unused does not count)
        self._lock = threading.Lock()  # the state above; never held across a network call
        self._writing: dict[str, threading.Lock] = {}  # per scope: one reservation at a time
        self._closures: Counter[str] = Counter()  # per scope: how often `forget` was called
        self._coming: dict[int, str] = {}  # thread id -> scope of the banked slot it was offered
        self._paced: dict[str, HeldRate] = {}  # per scope: its held rate at the last admission
        self._init_hand_off()

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
        paired = self.paired
        with self._scope_lock(paired.wide if paired else scope):
            with self._lock:
                self._coming.pop(threading.get_ident(), None)
                self._holding.pop(holder, None)  # asking again: a slot it held was let go
                banked = self._take_banked(scope)
                if banked is not None:
                    self._holding[holder] = (scope, banked)
                    return self._open_at[scope], Grant(banked)
                if paired is not None:
                    wants, most = self._paired_block(scope, interval, paired)
                    closures = Counter(self._closures)
                count = self._block_size(scope, interval * self.units)
                closed_before = self._closures[scope]
            if paired is not None:
                return self._reserve_paired(scope, holder, horizon, paired, wants, most, closures)
            requested, decision = self._write_block(scope, interval, horizon, count)
            if not isinstance(decision, Grant):
                return requested, decision
            with self._lock:
                self._holding[holder] = (scope, decision.slot_at)
                first, *rest = decision.slots
                if self._bank_if_open(scope, closed_before, requested, rest) and rest:
                    return requested, Grant(first)
            return requested, decision

    def _write_block(
        self, scope: str, interval: float, horizon: float, count: int
    ) -> tuple[float, Grant | Denial]:
        """One reservation write of up to `count` slots of `scope` (its caller holds the
        scope's lock, never the batch's), and when it was asked."""
        requested = self._now()
        # with a slack, its slots are usable that long after their time: the lead is cut
        decision = (self._weighed or self._limiter.reserve)(
            scope,
            interval,
            horizon,
            count,
            self._adaptive,
            slack=self._slack,
            tolerance=self._tolerance,
        )
        return requested, decision

    def _bank_if_open(
        self, scope: str, closed_before: int, requested: float, slots: Sequence[float]
    ) -> bool:
        """(Under the lock.) A granted write asked at `requested`: a look at an open gate, and
        its `slots` banked, only if the gate did not close during the write (see `forget`,
        `closed_before` the scope's closures before it). False when it did."""
        if self._closures[scope] != closed_before:
            return False
        self._saw_open(scope, requested)
        if slots:
            self._banked.setdefault(scope, deque()).extend(slots)
        return True

    def restock(self, scope: str, interval: float, horizon: float) -> bool:
        """Reserve a block of `scope` for the bank, with no record holding its first slot: a
        lease waiter does it (`restock_due`) so that the calls that get a lease next take a
        banked slot at once rather than write first. As `reserve`'s write: its size, one write
        per scope at a time (none if another is under way), a look at an open gate when
        granted, nothing banked if the gate closed meanwhile. True when slots were banked."""
        lock = self._scope_lock(scope)
        if not lock.acquire(blocking=False):
            return False
        try:
            with self._lock:
                if self._live_bank(scope):
                    return False
                count = self._block_size(scope, interval * self.units)
                closed_before = self._closures[scope]
            requested, decision = self._write_block(scope, interval, horizon, count)
            if not isinstance(decision, Grant):
                return False
            with self._lock:
                return self._bank_if_open(scope, closed_before, requested, decision.slots)
        finally:
            lock.release()

    def spend_one(self, scope: str, interval: float, horizon: float) -> bool:
        """Give up one slot of `scope` without a call (a call of it left late, see
        ticket.py `TicketAdmission.late`): the next banked one, with no write, else one reserved now
        within `horizon` (one write; with paired limits, a slot of both, as their blocks'
        are). True when a slot was given up."""
        paired = self.paired
        with self._scope_lock(paired.wide if paired else scope):
            with self._lock:
                if self._take_banked(scope) is not None:
                    return True
            if paired is None:
                _, decision = self._write_block(scope, interval, horizon, 1)
                return isinstance(decision, Grant)
            return self._spend_paired(scope, interval, horizon, paired)

    def covers(self, scope: str, send_at: float) -> bool:
        """Whether the batch's last look at an open gate of `scope` (a gate read or a granted
        reservation, by any of its threads) is recent enough for a call sent at `send_at` (its
        slot's time, or later within the slack)."""
        with self._lock:
            return self._covers(scope, send_at)

    def _covers(self, scope: str, send_at: float) -> bool:
        seen = self._open_at.get(scope)
        return seen is not None and send_at - seen <= GATE_RECHECK_LEAD_SECONDS

    def gates_to_read(self, scope: str, at: float, most: int | None = 1) -> GateLook:
        """What a look at the gate of `scope`, asked at `at`, reads: that gate, and (up to
        `most` gates in all; None: no bound) the gate of each other scope with a slot of the
        batch that the look will cover and no earlier look does: banked, or held by a thread
        and not yet called on, its time at most GATE_RECHECK_LEAD_SECONDS after `at` and not
        past use. A paired batch's look also reads the wide limit's gate (the one item it
        reads holds it and every scope's).

        At 10/s a scope's slots are 0.1 s apart and a batch calls each scope seldom, so a look
        serves few calls of its own scope; within any 0.1 s, though, the batch has calls of
        other scopes coming, whose threads then find them covered and read nothing. The
        earliest slots first when there are more than `most`.
        """
        with self._lock:
            closures = {scope: self._closures[scope]}
            wide = None if self.paired is None else self._closures[self.paired.wide]
            if most is None or most > 1:
                reach = at + GATE_RECHECK_LEAD_SECONDS
                since = self._now() - self.usable_for
                due: dict[str, tuple[float, float]] = {}  # scope -> its first and last slot
                slots = [(key, t) for key in list(self._banked) for t in self._live_bank(key)]
                slots += self._holding.values()
                for key, t in slots:
                    if key != scope and since <= t <= reach:
                        first, last = due.get(key, (t, t))
                        due[key] = (min(first, t), max(last, t))
                for key, (_, last) in sorted(due.items(), key=lambda kv: kv[1]):
                    if most is not None and len(closures) >= most:
                        break
                    if not self._covers(key, last):
                        closures[key] = self._closures[key]
            return GateLook(at, closures, wide)

    def looked(self, look: GateLook, states: Mapping[str, ScopeState], now: float) -> None:
        """What `look` found (`states`, answered by `now`): a scope read closed is forgotten
        (`forget`: its banked slots, the batch's earlier looks; a thread holding its slot is
        no longer covered, looks itself and goes back); a scope read open is seen open as of
        when the look was asked, unless the batch saw it close meanwhile. A scope left unread
        (missing from `states`) is neither: its threads look themselves.

        A paired batch's wide limit read closed (its key in `states`) is forgotten as a 429 of
        the wide limit is: every scope's banked slots and looks go, whether read or not; and no
        scope is seen open by a look during which the batch saw the wide limit close."""
        with self._lock:
            wide_open = True
            if self.paired is not None and look.wide_closures is not None:
                wide = states.get(self.paired.wide)
                if wide is not None and wide.closed(now):
                    self._forget(self.paired.wide)
                wide_open = self._closures[self.paired.wide] == look.wide_closures
            for scope, state in states.items():
                if scope not in look.closures:
                    continue
                if state.closed(now):
                    self._forget(scope)
                elif wide_open and self._closures[scope] == look.closures[scope]:
                    self._saw_open(scope, look.at)

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
        """The next banked slot of `scope` still usable (those past are let go and counted)."""
        bank = self._live_bank(scope)
        return bank.popleft() if bank else None

    def _live_bank(self, scope: str) -> deque[float]:
        """The banked slots of `scope`, those past `usable_for` let go (and counted)."""
        bank = self._banked.setdefault(scope, deque())
        while bank and bank[0] < self._now() - self.usable_for:
            bank.popleft()
            self._metrics.add_metric(Metric.LATE_SLOTS, "Count", 1)
        return bank

    def _block_size(self, scope: str, interval: float) -> int:
        """How many slots one write reserves for `scope` (see the class docstring)."""
        # Threads that may ask within moments: those neither calling nor already holding a
        # slot they wait for (counting these too banked slots nobody came for, let go late),
        # and at least a share of the threads: some calls end within the block's span. Not cut
        # to this scope's share of the records: a free thread takes a banked slot's record first.
        free = self._parallel - self._calling - len(self._holding) - self._for_leases
        asking = max(free, self._parallel * BLOCK_SHARE_OF_THREADS, self._within_slack(scope))
        # + 1e-9: a span of a whole number of intervals counts them all (0.3 / 0.1 is 2.999...)
        span = 1 + math.floor(BLOCK_SPAN_SECONDS / interval + 1e-9)
        return max(1, min(self._pending[scope], math.ceil(asking), span))

    def _within_slack(self, scope: str) -> float:
        """With a slack: the calls of `scope` expected to start within it, at the rate its last
        calls started (a call that waited for a lease asks when another call ends, at no time
        the limiter knows). A slot banked for one of them is still usable when it asks."""
        starts = self._starts.get(scope)
        if not self._slack or starts is None or len(starts) < 2 or starts[-1] <= starts[0]:
            return 0.0
        return (len(starts) - 1) / (starts[-1] - starts[0]) * self._slack

    def calling(self, scope: str, holder: object) -> None:
        """A record took its slot and is calling."""
        with self._lock:
            self._holding.pop(holder, None)
            self._pending[scope] -= 1
            self._calling += 1
            self.used += 1
            if self._slack:
                starts = self._starts.setdefault(scope, deque(maxlen=SLACK_RATE_SAMPLE))
                starts.append(self._now())

    def done(self, scope: str, called: bool, holder: object) -> None:
        """A record is finished with (called or not): it will ask for no more slots."""
        with self._lock:
            self._coming.pop(threading.get_ident(), None)
            self._holding.pop(holder, None)
            if called:
                self._calling -= 1
            else:
                self._pending[scope] -= 1

    def paced_at(self, scope: str, held: HeldRate | None) -> bool:
        """An admission of `scope` knows its shared rate `held` (sweeper.admission.learned): if
        it is a lowering since the batch's last admission of the scope (a newer version, a
        lower rate), what the batch banked at the old rate is not used (`forget`: its threads
        look at the gate again). True when it was dropped."""
        if held is None:
            return False
        with self._lock:
            before = self._paced.get(scope)
            self._paced[scope] = held
            if before is None or held.version <= before.version or held.rate >= before.rate:
                return False
            self._forget(scope)
            return True

    def forget(self, scope: str) -> None:
        """The gate of `scope` closed: banked slots are not used, and no earlier look at it
        counts as open."""
        with self._lock:
            self._forget(scope)

    def _forget(self, scope: str) -> None:
        self._closures[scope] += 1
        if self.paired is not None and scope == self.paired.wide:
            # the wide limit closed: no slot of any scope is used, no look counts as open
            self._banked.clear()
            self._open_at.clear()
            return
        self._banked.pop(scope, None)
        self._open_at.pop(scope, None)


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
        slots.expect_records(len(records))

    def take(self) -> int | None:
        with self._lock:
            scope = self._slots.offer(self._has_left)
            index = None if scope is None else self._first(self._by_scope[scope])
            if index is None:  # no bank offered, or (not expected) none of its records left
                index = self._first(self._next)
            if index is None:
                return None
            self._taken[index] = True
            self._slots.took_record()
            return index

    def _has_left(self, scope: str) -> bool:
        queue = self._by_scope.get(scope)
        return queue is not None and self._first(queue) is not None

    def _first(self, queue: deque[int]) -> int | None:
        while queue and self._taken[queue[0]]:
            queue.popleft()
        return queue[0] if queue else None

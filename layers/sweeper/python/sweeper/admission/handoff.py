"""Concurrency leases handed on within a batch: the batch side of the concurrency regime.

A call under a concurrency cap (`max_in_flight`, sweeper.limiter.leases) holds a lease while
its request is at the vendor. When it ends and a thread of its batch waits for a lease of the
same cap, the lease is handed on as it is (no release and no acquire write); one thread looks in
the table at a time while a cap is full. A mixin of `BatchSlots` (bank.py): it shares the
batch's one lock, so a lease handed on and a slot banked are seen consistently; concurrency.py
is the call's side.
"""

from __future__ import annotations

import math
import threading
from collections import Counter, deque
from collections.abc import Callable
from typing import TYPE_CHECKING

from sweeper.admission.pairing import PairedLimits

#: While a concurrency cap is full, a batch looks for a free lease in the table at most this
#: often: one read of the cap's item (sweeper.limiter.leases), then one write taking as many of
#: the leases it shows free as the batch has threads waiting. A lease given back to the table
#: by another consumer stays unused until some batch looks.
LEASE_POLL_SECONDS = 0.05
#: How often a batch that already holds a lease of every cap its waiting thread misses looks:
#: its own calls hand theirs on as they end, and a lease freed elsewhere is found sooner by a
#: batch holding none, which looks every LEASE_POLL_SECONDS.
LEASE_POLL_HOLDING_SECONDS = 0.2
#: While a thread waits for a concurrency lease, the batch's look at its gate is read again
#: once it is this old, so that the call sent when the lease comes is still covered (sent at
#: most GATE_RECHECK_LEAD_SECONDS after a look at an open gate) and reads nothing between
#: its lease and its send. The lease comes when another call ends, at no time the limiter
#: knows: looking then put a read on the path from one call's answer to the next call's
#: send, the gap that keeps a cap from being full (measured in scenario (c): 41 % of calls
#: read there, 4.4 ms median). Less than the lead by a read's time and some. Only for a rate
#: with a slack (`BatchSlots.look_stale_in`).
LOOK_KEPT_FRESH_SECONDS = 0.08


class LeaseHandOff:
    """The batch's concurrency leases handed on, and its lease waiters' looks (see the module)."""

    _lock: threading.Lock
    _slack: float
    paired: PairedLimits | None
    _open_at: dict[str, float]
    _writing: dict[str, threading.Lock]

    _now: Callable[[], float]

    if TYPE_CHECKING:

        def _live_bank(self, scope: str) -> deque[float]: ...

    def _init_hand_off(self) -> None:
        # Concurrency leases handed from a call that ended to a thread of the batch waiting for
        # one (no release and no acquire write): (key, index, holder), and how many wait.
        # One condition per cap key, all on the one lock: a lease handed on wakes a thread
        # waiting for that cap's lease, never one waiting for another key's (which would go
        # back to sleep while the right thread slept out its timeout).
        self._lease_ready: dict[str, threading.Condition] = {}
        self._handed: list[tuple[str, int, str]] = []
        self._lease_waiters = 0
        self._last_lease_poll = -math.inf  # while a cap is full, one thread polls the table
        self._for_leases = 0  # threads waiting for a lease: they ask for no slot meanwhile
        self._leases_held: Counter[str] = Counter()  # per cap key: taken from the table, not back
        self._untaken: int | None = None  # records no thread has taken yet (None: not counted)
        self._keepers: dict[str, int] = {}  # scope -> the lease waiter keeping its look fresh

    def hand_off(self, key: str, index: int, holder: str) -> bool:
        """A call ended holding lease `index` of `key`: True if a thread of this batch waits for
        a lease, which will take this one as it is (its item still names `holder`, its expiry is
        past the invocation's end, since the batch's invocation took it); else the caller
        releases it."""
        with self._lock:
            # waiting: in `wait_for_lease`, or between two of its waits (looking in the table)
            if max(self._lease_waiters, self._for_leases) <= len(self._handed):
                return False
            self._handed.append((key, index, holder))
            self._ready(key).notify()
            return True

    def _ready(self, key: str) -> threading.Condition:
        """The condition a thread waiting for a lease of `key` waits on (under the lock)."""
        ready = self._lease_ready.get(key)
        if ready is None:
            ready = self._lease_ready[key] = threading.Condition(self._lock)
        return ready

    def waiting_for_leases(self, delta: int) -> None:
        """A thread starts (+1) or stops (-1) waiting for a lease: no slot is banked for it."""
        with self._lock:
            self._for_leases += delta

    def may_poll_leases(self, holding: bool = False) -> bool:
        """Whether the calling thread may look for free leases in the table now: while a cap
        is full, one look per LEASE_POLL_SECONDS for the whole batch (a read, and a write only
        when it shows leases free); the batch's ending calls hand theirs on meanwhile. A thread
        whose batch is `holding` a lease of each cap it misses (its calls will hand one on)
        looks only once the batch's last look is LEASE_POLL_HOLDING_SECONDS old."""
        with self._lock:
            now = self._now()
            every = LEASE_POLL_HOLDING_SECONDS if holding else LEASE_POLL_SECONDS
            if now < self._last_lease_poll + every:
                return False
            self._last_lease_poll = now
            return True

    def look_stale_in(self, scope: str) -> float:
        """For a thread waiting for a lease: seconds until it should read the gate of `scope`
        (0: now). One waiter per scope keeps the batch's look fresh, the first to ask, until
        it stops waiting (`stop_keeping`); for it, the time until the look is
        LOOK_KEPT_FRESH_SECONDS old (0 when there is none, or it is already). For every other
        waiter, never (math.inf): it sleeps as it would without. Only with a slack on the
        rate: without one, a call that gets its lease takes a slot no older than the late
        tolerance, whose reservation or block's look covers it."""
        if not self._slack:
            return math.inf
        me = threading.get_ident()
        with self._lock:
            if self._keepers.setdefault(scope, me) != me:
                return math.inf
            seen = self._open_at.get(scope)
            if seen is None:
                return 0.0
            return max(0.0, seen + LOOK_KEPT_FRESH_SECONDS - self._now())

    def restock_due(self, scope: str) -> bool:
        """Whether the calling lease waiter should reserve a block for the batch's bank of
        `scope` now (`restock`): it keeps the look at `scope` fresh (`look_stale_in`), the bank
        holds no live slot, and no reservation of the scope is under way. Not for paired
        limits, whose write reserves every scope's slots from the asking call's."""
        if not self._slack or self.paired is not None:
            return False
        me = threading.get_ident()
        with self._lock:
            if self._keepers.get(scope) != me or self._live_bank(scope):
                return False
            writing = self._writing.get(scope)
            return writing is None or not writing.locked()

    def stop_keeping(self, scope: str) -> None:
        """The calling thread stops waiting for a lease: if it kept the look at `scope` fresh,
        the next waiter to ask does."""
        me = threading.get_ident()
        with self._lock:
            if self._keepers.get(scope) == me:
                del self._keepers[scope]

    def leases_wanted(self, key: str) -> int:
        """How many leases of `key` one look should take: one for each thread of the batch
        waiting for a lease, less those already handed on to them (at least one, the asker's)."""
        with self._lock:
            handed = sum(1 for k, _, _ in self._handed if k == key)
            return max(1, self._for_leases - handed)

    def took_leases(self, key: str, count: int, others: list[tuple[int, str]]) -> None:
        """A look took `count` leases of `key` from the table; `others` of them, taken for the
        batch's other waiting threads, are handed on to them as an ending call's would be
        (those nobody takes are released at the end)."""
        with self._lock:
            self._leases_held[key] += count
            if others:
                self._handed.extend((key, index, holder) for index, holder in others)
                self._ready(key).notify(len(others))

    def gave_back(self, key: str) -> None:
        """A lease of `key` went back to the table."""
        with self._lock:
            self._leases_held[key] -= 1

    def holds_lease(self, key: str) -> bool:
        """Whether the batch holds a lease of `key` (at the vendor, or handed on): a thread
        waiting for one gets it when that call ends, with no write and no queue round trip."""
        with self._lock:
            return self._leases_held[key] > 0

    def lease_found(self) -> None:
        """A look found a free lease: the next waiting thread may look at once."""
        with self._lock:
            self._last_lease_poll = -math.inf

    def wait_for_lease(self, key: str, seconds: float) -> tuple[int, str] | None:
        """A lease of `key` handed on by a call of this batch within `seconds`, or None."""
        with self._lock:
            self._lease_waiters += 1
            try:
                self._ready(key).wait_for(
                    lambda: any(k == key for k, _, _ in self._handed), timeout=seconds
                )
                return self._take_handed(key)
            finally:
                self._lease_waiters -= 1

    def take_handed(self, key: str) -> tuple[int, str] | None:
        """A lease of `key` already handed on and not yet taken, or None."""
        with self._lock:
            return self._take_handed(key)

    def _take_handed(self, key: str) -> tuple[int, str] | None:
        for i, (k, index, holder) in enumerate(self._handed):
            if k == key:
                del self._handed[i]
                return index, holder
        return None

    def leftover_leases(self) -> list[tuple[str, int, str]]:
        """Leases handed on that no waiting thread took (it went back to the queue): released
        by the caller."""
        with self._lock:
            if self._lease_waiters or self._for_leases:
                return []
            left, self._handed = self._handed, []
            return left

    def expect_records(self, count: int) -> None:
        """The batch's threads take its `count` records one at a time (`took_record`)."""
        with self._lock:
            self._untaken = count

    def took_record(self) -> None:
        """A thread took one of the batch's records."""
        with self._lock:
            if self._untaken is not None:
                self._untaken -= 1

    def records_untaken(self) -> bool:
        """Whether some record of the batch is known to be taken by no thread yet."""
        with self._lock:
            return bool(self._untaken)

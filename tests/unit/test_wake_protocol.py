"""The wake item's protocol over any interleaving of ledger writes and producer runs.

A model of the ledger's rows, of writes that take the policy's wake lock shared, lower the item
(the real `MemoryWakeStore`) and commit later, and of producer runs that read the item first
(the real `may_skip`), claim, and raise the item in two steps (read under the exclusive lock,
raise later with the version read). The invariant, checked after every step: no row claimable
now is hidden behind a later wake time, so a run reading the item never skips due work.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from sweeper.ledger.executor import WAKE_EARLY
from sweeper.ledger.wake import MemoryWakeStore, Wake, may_skip

POLICY = "exports"
T0 = datetime(2026, 12, 1, tzinfo=UTC)
LEASE = timedelta(seconds=300)
OFFSETS = st.integers(min_value=-600, max_value=3600)


@dataclass
class Row:
    status: str  # pending, leased, held, done
    next_at: datetime
    lease_until: datetime | None = None


@dataclass
class Write:
    """A write between its lowering and its commit: it holds the wake lock shared."""

    row: int
    status: str
    next_at: datetime


class WakeProtocol(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.now = T0
        self.rows: dict[int, Row] = {}
        self.open: list[Write] = []
        self.store = MemoryWakeStore()
        self.ids = iter(range(1_000_000))
        #: A run's read under the exclusive lock, waiting for its raise.
        self.raising: list[tuple[Wake, datetime | None]] = []

    # --- the ledger's writes: lock shared, lower, (anything may happen), commit --------------

    def _begin(self, write: Write, wakes_at: datetime) -> None:
        self.store.lower(POLICY, wakes_at - WAKE_EARLY)
        self.open.append(write)

    @rule(offset=OFFSETS)
    def schedule(self, offset: int) -> None:
        """A door: a new row due at any time, past or future (UPSERT_STAGED_JOBS)."""
        due = self.now + timedelta(seconds=offset)
        self._begin(Write(next(self.ids), "pending", due), due)

    @rule(data=st.data(), backoff=st.integers(min_value=0, max_value=900))
    def retry(self, data: st.DataObject, backoff: int) -> None:
        """The consumer's RECORD_UNSETTLED (or a snooze): a leased row due again after a wait."""
        leased = [i for i, r in self.rows.items() if r.status == "leased"]
        if leased:
            at = self.now + timedelta(seconds=backoff)
            self._begin(Write(data.draw(st.sampled_from(leased)), "pending", at), at)

    @rule(data=st.data())
    def unhold(self, data: st.DataObject) -> None:
        """An operator's unhold: pending again at its old next attempt (maybe long past)."""
        held = [i for i, r in self.rows.items() if r.status == "held"]
        if held:
            i = data.draw(st.sampled_from(held))
            self._begin(Write(i, "pending", self.rows[i].next_at), self.now)

    @rule(data=st.data())
    def retry_failed(self, data: st.DataObject) -> None:
        """An operator's retry: a terminal row pending again, due now."""
        done = [i for i, r in self.rows.items() if r.status == "done"]
        if done:
            self._begin(Write(data.draw(st.sampled_from(done)), "pending", self.now), self.now)

    @precondition(lambda self: bool(self.open))
    @rule(data=st.data())
    def commit(self, data: st.DataObject) -> None:
        write = self.open.pop(data.draw(st.integers(0, len(self.open) - 1)))
        self.rows[write.row] = Row(write.status, write.next_at)

    # --- writes that make nothing due earlier: no lowering --------------------------------

    @rule(data=st.data())
    def hold_or_settle(self, data: st.DataObject) -> None:
        live = [i for i, r in self.rows.items() if r.status in ("pending", "leased")]
        if live:
            row = self.rows[data.draw(st.sampled_from(live))]
            row.status = "held" if row.status == "pending" else "done"
            row.lease_until = None

    # --- time and the producer -------------------------------------------------------------

    @rule(seconds=st.integers(min_value=0, max_value=1800))
    def tick(self, seconds: int) -> None:
        self.now += timedelta(seconds=seconds)

    @rule()
    def producer_run(self) -> None:
        """Read the item; skip, or reclaim expired leases and claim what is due."""
        if may_skip(self.store.read(POLICY), self.now):
            return
        for row in self.rows.values():
            expired = row.lease_until is not None and row.lease_until <= self.now
            if row.status == "leased" and expired:
                row.status, row.lease_until = "pending", None
            if row.status == "pending" and row.next_at <= self.now:
                row.status, row.lease_until = "leased", self.now + LEASE

    @precondition(lambda self: not self.open)  # the exclusive lock waits for every writer
    @rule()
    def producer_reads_next(self) -> None:
        """After a run: under the exclusive wake lock, the item's version and the next time."""
        self.raising.append((self.store.read(POLICY), self._earliest()))

    @precondition(lambda self: bool(self.raising))
    @rule()
    def producer_raises(self) -> None:
        wake, at = self.raising.pop(0)
        self.store.raise_to(POLICY, at, wake.version)

    # --- the invariant -----------------------------------------------------------------------

    def _earliest(self) -> datetime | None:
        times = [r.next_at for r in self.rows.values() if r.status == "pending"]
        times += [r.lease_until for r in self.rows.values() if r.lease_until is not None]
        return min(times, default=None)

    @invariant()
    def no_run_skips_claimable_work(self) -> None:
        earliest = self._earliest()
        wake = self.store.items.get(POLICY)
        if earliest is not None and earliest <= self.now:
            assert wake is not None, earliest
            assert not may_skip(wake, self.now), (wake, earliest, self.now)
        if earliest is not None and wake is not None and wake.at is not None:
            # Ahead of time too: a later run, at the earliest time or after, will not skip.
            assert wake.at <= max(earliest, self.now), (wake, earliest, self.now)


WakeProtocol.TestCase.settings = settings(max_examples=300, stateful_step_count=40, deadline=None)
test_wake_protocol = WakeProtocol.TestCase

"""No producer run skips a claimable row, over any interleaving of ledger writes and runs.

A hypothesis state machine drives the real code: `Ledger` writes (doors, consumer retries and
snoozes, holds, unholds, operator retries, settlements) on a real PostgreSQL, the real
`run_producer`, and the wake item in the DynamoDB stand-in (`DynamoWakeStore`, conditional
writes as DynamoDB makes them). The interleavings that matter are forced where they happen: a
producer run (or another write) inside a write's window, after its lowering and before its
commit (a hook on `lower`); a write while a run publishes, after it read the item; a write
between a run's read of the ledger and its raise (a hook on `raise_to`). Each writer has its
own connection, as separate processes do.

Checked at every run: a run that returned `not_due` found no row claimable (a pending row
whose next attempt, or a leased row whose lease expiry, had come). Checked after every step:
the item is no later than the ledger's next claimable time (or now).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from itertools import count

import psycopg
import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule, run_state_machine_as_test

from sweeper.config import Policy
from sweeper.ledger.store import Ledger
from sweeper.ledger.wake import DynamoWakeStore, Wake, may_skip
from sweeper.models import ControlAction, JobSelection, NewJob, OutcomeClass, operation_key
from sweeper.producer.run import NOT_DUE, run_producer
from sweeper.sqs_queue import OutgoingMessage
from sweeper_local.aws import LocalAws
from tests.fakes import FakePublisher

pytestmark = pytest.mark.integration

T0 = datetime(2026, 12, 1, tzinfo=UTC)
#: Writes that can make work claimable earlier, and writes that cannot.
KINDS = ("door", "retry", "snooze", "unhold", "hold", "fail_retry", "succeed")
WRITES = st.tuples(
    st.sampled_from(KINDS), st.integers(min_value=-600, max_value=3600), st.integers(0, 50)
)
#: The ledger's next claimable time, and how many rows are claimable at %(now)s.
CLAIMABLE = """
SELECT LEAST((SELECT min(next_attempt_at) FROM sweeper_jobs
              WHERE policy = %(policy)s AND status = 'pending'),
             (SELECT min(lease_expires_at) FROM sweeper_jobs
              WHERE policy = %(policy)s AND status = 'leased')),
       (SELECT count(*) FROM sweeper_jobs WHERE policy = %(policy)s
          AND ((status = 'pending' AND next_attempt_at <= %(now)s)
               OR (status = 'leased' AND lease_expires_at <= %(now)s)))
"""

Write = tuple[str, int, int]


class Hooked:
    """The real store, running the steps queued for a moment: right after a lowering (inside
    the writer's transaction) or right before a raise (after the run read the ledger)."""

    def __init__(self, inner: DynamoWakeStore) -> None:
        self.inner = inner
        self.after_lower: list[Callable[[], None]] = []
        self.before_raise: list[Callable[[], None]] = []

    def read(self, policy: str) -> Wake:
        return self.inner.read(policy)

    def lower(self, policy: str, at: datetime, writer: int) -> None:
        self.inner.lower(policy, at, writer)
        steps, self.after_lower = self.after_lower, []
        for step in steps:
            step()

    def raise_to(
        self, policy: str, at: datetime | None, version: int, checked_at: datetime
    ) -> bool:
        steps, self.before_raise = self.before_raise, []
        for step in steps:
            step()
        return self.inner.raise_to(policy, at, version, checked_at)


class Publishing(FakePublisher):
    """Accepts every message, running the steps queued for a publish first."""

    def __init__(self) -> None:
        super().__init__()
        self.during: list[Callable[[], None]] = []

    def send_batch(self, messages: Sequence[OutgoingMessage]) -> list[str]:
        steps, self.during = self.during, []
        for step in steps:
            step()
        return super().send_batch(messages)


class WakeInterleavings(RuleBasedStateMachine):
    def __init__(self, db_url: str, store: DynamoWakeStore) -> None:
        super().__init__()
        # A policy of its own per example: its rows and its wake item start empty.
        self.policy = Policy(
            name=f"w{uuid.uuid4().hex[:8]}",
            page_size=5,
            lease_seconds=300,
            producer_idle_check_seconds=86_400,
        )
        self.store = Hooked(store)
        self.writer = Ledger(db_url, wake=self.store)  # a write at the top level
        self.nested = Ledger(db_url, wake=self.store)  # a write inside another's window
        self.producer = Ledger(db_url, wake=self.store)
        self.check = psycopg.connect(db_url, autocommit=True)
        self.now = T0
        self.keys: list[str] = []
        self.ids = count()
        self.publisher = Publishing()
        self.runs = 0

    def teardown(self) -> None:
        for ledger in (self.writer, self.nested, self.producer):
            ledger.close()
        self.check.close()

    # -- writes ----------------------------------------------------------------------------------

    def _write(self, ledger: Ledger, write: Write) -> None:
        kind, offset, pick = write
        if kind == "door" or not self.keys:
            n = next(self.ids)
            job = NewJob(f"t{n % 2}", f"o{n}", self.now + timedelta(seconds=offset))
            self.keys.append(
                operation_key(self.policy.name, job.tenant_id, job.object_id, self.policy.version)
            )
            ledger.schedule(self.policy.name, self.policy.version, lambda j: "s", [job], self.now)
            return
        key = self.keys[pick % len(self.keys)]
        selection = JobSelection(keys=(key,))
        at = self.now + timedelta(seconds=offset)
        if kind == "retry":
            ledger.record_unsettled(
                key, self.now, next_attempt_at=at, lease_until=self.now, count_attempt=True
            )
        elif kind == "snooze":
            ledger.record_snooze(
                key,
                self.now,
                seconds=abs(offset) + 1,
                lease_until=self.now,
                code="later",
                max_snooze_seconds=10**7,
            )
        elif kind in ("unhold", "hold"):
            action = ControlAction.UNHOLD if kind == "unhold" else ControlAction.HOLD
            ledger.control(action, self.policy.name, selection, actor="t", now=self.now, limit=1)
        elif kind == "fail_retry":
            ledger.mark_failed(key, OutcomeClass.PERMANENT, "gone", self.now, count_attempt=True)
            ledger.retry_failed(self.policy.name, "t", self.now, keys=[key])
        else:
            ledger.mark_succeeded(key, OutcomeClass.ACCEPTED, self.now)

    @rule(write=WRITES)
    def write(self, write: Write) -> None:
        self._write(self.writer, write)

    @rule(write=WRITES)
    def run_inside_a_write(self, write: Write) -> None:
        """A run between a write's lowering and its commit."""
        self.store.after_lower.append(self._run)
        self._write(self.writer, write)
        self.store.after_lower.clear()  # a write that needed no lowering ran no run

    @rule(write=WRITES, inner=WRITES)
    def write_inside_a_write(self, write: Write, inner: Write) -> None:
        self.store.after_lower.append(lambda: self._write(self.nested, inner))
        self._write(self.writer, write)
        self.store.after_lower.clear()

    @rule(write=WRITES)
    def write_while_a_run_publishes(self, write: Write) -> None:
        self.publisher.during.append(lambda: self._write(self.writer, write))
        self._run()
        self.publisher.during.clear()

    @rule(write=WRITES)
    def write_between_a_runs_read_and_its_raise(self, write: Write) -> None:
        self.store.before_raise.append(lambda: self._write(self.writer, write))
        self._run()
        self.store.before_raise.clear()

    # -- time and the producer -------------------------------------------------------------------

    @rule(seconds=st.integers(min_value=0, max_value=1200))
    def tick(self, seconds: int) -> None:
        self.now += timedelta(seconds=seconds)

    @rule()
    def run(self) -> None:
        self._run()

    def _claimable(self) -> tuple[datetime | None, int]:
        row = self.check.execute(CLAIMABLE, {"policy": self.policy.name, "now": self.now})
        found = row.fetchone()
        assert found is not None
        return found[0], int(found[1])

    def _run(self) -> None:
        _next, claimable = self._claimable()
        self.runs += 1
        now = self.now
        report = run_producer(
            self.policy,
            now + timedelta(microseconds=self.runs),  # each run its own scheduled time
            self.producer,
            self.publisher,
            clock=lambda: now,
            remaining_seconds=lambda: 100.0,
        )
        if report.stop_reason == NOT_DUE:
            assert claimable == 0, f"a run skipped {claimable} claimable row(s) at {now}"

    # -- the invariant ---------------------------------------------------------------------------

    @invariant()
    def the_item_is_never_later_than_the_ledger(self) -> None:
        earliest, claimable = self._claimable()
        wake = self.store.read(self.policy.name)
        bound = timedelta(seconds=self.policy.producer_idle_check_seconds)
        if claimable:
            assert not may_skip(wake, self.now, bound), (wake, earliest, self.now)
        if earliest is not None and wake.at is not None:
            assert wake.at <= max(earliest, self.now), (wake, earliest, self.now)


def test_no_run_skips_a_claimable_row(db_url: str, local_aws: LocalAws, table: str) -> None:
    store = DynamoWakeStore(local_aws.dynamodb(), table)

    class OnThisLedger(WakeInterleavings):
        def __init__(self) -> None:
            super().__init__(db_url, store)

    run_state_machine_as_test(
        OnThisLedger,
        settings=settings(
            max_examples=40,
            stateful_step_count=25,
            deadline=None,
            suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
        ),
    )

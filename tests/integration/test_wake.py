"""The wake item against the real ledger: every write that makes work due earlier lowers it
before it commits, and a producer run skips the ledger only while nothing can be claimable."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta

import pytest

from sweeper.config import Policy
from sweeper.ledger.store import Ledger
from sweeper.ledger.wake import NEVER, MemoryWakeStore
from sweeper.models import ControlAction, JobSelection, JobStatus, NewJob, OutcomeClass
from sweeper.producer import NOT_DUE, run_producer
from tests.fakes import FakePublisher

pytestmark = pytest.mark.integration

T0 = datetime(2026, 12, 1, 2, 0, tzinfo=UTC)
POLICY = Policy(name="exports", page_size=10)
LATER = T0 + timedelta(hours=6)


class Counted:
    """A conninfo provider that counts the connections a ledger opens."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.connections = 0

    def __call__(self, refresh: bool) -> str:
        self.connections += 1
        return self.url


@pytest.fixture
def store() -> MemoryWakeStore:
    return MemoryWakeStore()


@pytest.fixture
def waking(db_url: str, store: MemoryWakeStore) -> Iterator[Ledger]:
    ledger = Ledger(db_url, wake=store)
    yield ledger
    ledger.close()


def schedule(ledger: Ledger, due: datetime, n: int = 1) -> None:
    jobs = [NewJob("t1", f"o{due.timestamp():.0f}-{i}", due) for i in range(n)]
    ledger.schedule(POLICY.name, POLICY.version, lambda j: "s", jobs, T0)


def run(ledger: Ledger, at: datetime) -> str:
    report = run_producer(
        POLICY, at, ledger, FakePublisher(), clock=lambda: at, remaining_seconds=lambda: 100.0
    )
    return report.stop_reason


def raised_high(store: MemoryWakeStore) -> None:
    """As a run that found nothing would leave the item: nothing claimable before NEVER."""
    assert store.raise_to(POLICY.name, None, store.read(POLICY.name).version)


def wake_at(store: MemoryWakeStore) -> datetime | None:
    return store.read(POLICY.name).at


def test_a_run_with_nothing_due_does_not_connect_and_the_next_due_run_releases(
    db_url: str, store: MemoryWakeStore
) -> None:
    counted = Counted(db_url)
    producer_ledger = Ledger(counted, wake=store)
    writer = Ledger(db_url, wake=store)
    schedule(writer, LATER)  # lowers the item to (just before) its due time
    runs = [run(producer_ledger, T0 + timedelta(minutes=m)) for m in (0, 5, 10)]
    assert runs == [NOT_DUE] * 3
    assert counted.connections == 0  # no run touched the ledger
    schedule(writer, T0 + timedelta(minutes=12))
    at = T0 + timedelta(minutes=15)
    assert run(producer_ledger, at) == "drained"
    assert counted.connections == 1
    assert writer.counts(POLICY.name)[JobStatus.LEASED] == 1
    # Raised to the ledger's next time: the lease's expiry, before the later row's due time.
    assert wake_at(store) == at + timedelta(seconds=POLICY.lease_seconds) < LATER
    writer.close()
    producer_ledger.close()


def test_a_door_lowers_to_its_earliest_due_time(waking: Ledger, store: MemoryWakeStore) -> None:
    schedule(waking, LATER)
    raised_high(store)
    schedule(waking, LATER - timedelta(hours=1))
    at = wake_at(store)
    assert at is not None
    assert at <= LATER - timedelta(hours=1)


def _leased_key(ledger: Ledger) -> str:
    schedule(ledger, T0)
    claimed = ledger.claim(POLICY.name, "b1", T0, timedelta(minutes=30), 10)
    return claimed[0].operation_key


def _unsettled(ledger: Ledger, key: str) -> datetime:
    due = T0 + timedelta(minutes=2)
    ledger.record_unsettled(key, T0, next_attempt_at=due, lease_until=T0)
    return due


def _snoozed(ledger: Ledger, key: str) -> datetime:
    ledger.record_snooze(
        key, T0, seconds=120, lease_until=T0, code="later", max_snooze_seconds=3600
    )
    return T0 + timedelta(seconds=120)


def _retried(ledger: Ledger, key: str) -> datetime:
    ledger.mark_failed(key, OutcomeClass.PERMANENT, "gone", T0, count_attempt=True)
    ledger.retry_failed(POLICY.name, "ops", T0 + timedelta(minutes=1), keys=[key])
    return T0 + timedelta(minutes=1)


def _unheld(ledger: Ledger, key: str) -> datetime:
    selection = JobSelection(keys=(key,))
    ledger.control(ControlAction.HOLD, POLICY.name, selection, actor="ops", now=T0, limit=10)
    ledger.control(ControlAction.UNHOLD, POLICY.name, selection, actor="ops", now=T0, limit=10)
    return T0


@pytest.mark.parametrize("write", [_unsettled, _snoozed, _retried, _unheld])
def test_a_write_that_makes_work_due_lowers_the_item_before_it_commits(
    waking: Ledger, store: MemoryWakeStore, write: Callable[[Ledger, str], datetime]
) -> None:
    key = _leased_key(waking)
    raised_high(store)
    due = write(waking, key)
    at = wake_at(store)
    assert at is not None
    assert at <= due


def test_a_raise_never_overwrites_a_lowering_made_meanwhile(
    waking: Ledger, store: MemoryWakeStore
) -> None:
    found = waking.next_wake(POLICY.name)
    assert found is not None
    read, next_at = found
    assert next_at is None  # an empty ledger: nothing can become claimable
    schedule(waking, T0)  # lowers after the read
    assert not store.raise_to(POLICY.name, next_at, read.version)
    at = wake_at(store)
    assert at is not None
    assert at <= T0 < NEVER

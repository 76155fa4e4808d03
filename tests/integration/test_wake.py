"""The wake item against the real ledger and the DynamoDB stand-in: every write that can make
work claimable earlier lowers it before it commits, a producer run skips the ledger only while
nothing can be claimable and its last full read is within the trust bound, and a raise never
hides a write (sweeper.ledger.wake)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta

import psycopg
import pytest

from sweeper.config import Policy
from sweeper.ledger.store import Ledger
from sweeper.ledger.wake import NEVER, WAKE_EARLY, DynamoWakeStore, lower_in, wake_key
from sweeper.models import ControlAction, JobSelection, JobStatus, NewJob, OutcomeClass
from sweeper.producer.run import NOT_DUE, run_producer
from sweeper_local.aws import LocalAws
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
def store(local_aws: LocalAws, table: str) -> DynamoWakeStore:
    return DynamoWakeStore(local_aws.dynamodb(), table)


@pytest.fixture
def waking(db_url: str, store: DynamoWakeStore) -> Iterator[Ledger]:
    ledger = Ledger(db_url, wake=store)
    yield ledger
    ledger.close()


def schedule(ledger: Ledger, due: datetime, n: int = 1, policy: Policy = POLICY) -> None:
    jobs = [NewJob("t1", f"o{due.timestamp():.0f}-{i}", due) for i in range(n)]
    ledger.schedule(policy.name, policy.version, lambda j: "s", jobs, T0)


def run(ledger: Ledger, at: datetime, policy: Policy = POLICY) -> str:
    report = run_producer(
        policy, at, ledger, FakePublisher(), clock=lambda: at, remaining_seconds=lambda: 100.0
    )
    return report.stop_reason


def wake_at(store: DynamoWakeStore) -> datetime | None:
    return store.read(POLICY.name).at


def raised_high(store: DynamoWakeStore) -> None:
    """As a run that found nothing would leave the item: nothing claimable before NEVER."""
    assert store.raise_to(POLICY.name, None, store.read(POLICY.name).version, T0)


def test_a_run_with_nothing_due_does_not_connect_and_the_next_due_run_releases(
    db_url: str, store: DynamoWakeStore
) -> None:
    # Given a ledger whose only row is due in six hours, and one run that read it all
    counted = Counted(db_url)
    producer_ledger = Ledger(counted, wake=store)
    writer = Ledger(db_url, wake=store)
    schedule(writer, LATER)
    assert run(producer_ledger, T0) == "drained"
    assert counted.connections == 1
    # When the next runs come with nothing due
    runs = [run(producer_ledger, T0 + timedelta(minutes=m)) for m in (5, 10)]
    # Then none touches the ledger
    assert runs == [NOT_DUE] * 2
    assert counted.connections == 1
    # And a job scheduled due now is released by the next run
    schedule(writer, T0 + timedelta(minutes=12))
    at = T0 + timedelta(minutes=15)
    assert run(producer_ledger, at) == "drained"
    assert counted.connections == 2
    assert writer.counts(POLICY.name)[JobStatus.LEASED] == 1
    # Raised to the ledger's next time: the lease's expiry, before the later row's due time
    assert wake_at(store) == at + timedelta(seconds=POLICY.lease_seconds) < LATER
    writer.close()
    producer_ledger.close()


def test_a_door_lowers_to_its_earliest_due_time(waking: Ledger, store: DynamoWakeStore) -> None:
    schedule(waking, LATER)
    raised_high(store)
    schedule(waking, LATER - timedelta(hours=1))
    assert wake_at(store) == LATER - timedelta(hours=1) - WAKE_EARLY


def test_the_first_raise_creates_an_item_that_a_lowering_then_reads(
    waking: Ledger, store: DynamoWakeStore
) -> None:
    # Given no item: a raise creates it without a version (no lowering has counted one)
    raised_high(store)
    assert store.read(POLICY.name).version == 0
    # When a door writes, then Then its lowering reads the versionless item and counts one
    schedule(waking, LATER)
    read = store.read(POLICY.name)
    assert (read.at, read.version) == (LATER - WAKE_EARLY, 1)


def _leased_key(ledger: Ledger) -> str:
    schedule(ledger, T0)
    claimed = ledger.claim(POLICY.name, "b1", T0, timedelta(minutes=30), 10)
    return claimed[0].operation_key


def _reclaimed_key(ledger: Ledger) -> str:
    """A job whose lease expired and was reclaimed: pending, due at T0."""
    key = _leased_key(ledger)
    late = T0 + timedelta(hours=1)
    ledger.reclaim_expired(POLICY.name, late, 10)
    return key


def _unsettled(ledger: Ledger, key: str) -> datetime:
    due = T0 - timedelta(minutes=2)  # earlier than the row's next attempt (T0)
    ledger.record_unsettled(key, T0, next_attempt_at=due, lease_until=T0)
    return due


def _snoozed(ledger: Ledger, key: str) -> datetime:
    ledger.record_snooze(
        key,
        T0 - timedelta(minutes=5),
        seconds=120,
        lease_until=T0,
        code="later",
        max_snooze_seconds=3600,
    )
    return T0 - timedelta(minutes=3)


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
def test_a_write_that_makes_work_claimable_earlier_lowers_the_item(
    waking: Ledger, store: DynamoWakeStore, write: Callable[[Ledger, str], datetime]
) -> None:
    key = _reclaimed_key(waking)
    raised_high(store)
    due = write(waking, key)
    at = wake_at(store)
    assert at is not None
    assert at <= due


@pytest.mark.parametrize("seconds", [1, 3600])
def test_a_retry_of_a_leased_job_writes_no_wake_item(
    waking: Ledger, store: DynamoWakeStore, seconds: int
) -> None:
    # Given a leased job, and the item as a run leaves it (no later than the lease's expiry)
    key = _leased_key(waking)
    version = store.read(POLICY.name).version
    # When the consumer records a retry, sooner or later than the lease's end
    waking.record_unsettled(
        key,
        T0,
        next_attempt_at=T0 + timedelta(seconds=seconds),
        lease_until=T0,
        count_attempt=True,
    )
    # Then the row moved, and the item was neither read for it nor written
    job = waking.get(key)
    assert job is not None
    assert job.next_attempt_at == T0 + timedelta(seconds=seconds)
    assert store.read(POLICY.name).version == version


def test_a_raise_never_overwrites_a_lowering_made_meanwhile(
    waking: Ledger, store: DynamoWakeStore
) -> None:
    read = store.read(POLICY.name)
    next_at, settled = waking.next_wake(POLICY.name, read.writer)
    assert (next_at, settled) == (None, True)  # an empty ledger: nothing can become claimable
    schedule(waking, T0)  # lowers after the read
    assert not store.raise_to(POLICY.name, next_at, read.version, T0)
    at = wake_at(store)
    assert at is not None
    assert at <= T0 < NEVER


def test_a_raise_waits_for_a_write_that_lowered_and_has_not_committed(
    db_url: str, waking: Ledger, store: DynamoWakeStore
) -> None:
    # Given an empty ledger read whole (the item high), then a writer that lowered the item
    # for a row due now and has not committed
    assert run(waking, T0) == "drained"
    with psycopg.connect(db_url, autocommit=True) as conn, conn.transaction():
        lower_in(conn, store, POLICY.name, T0)
        # When a producer runs meanwhile: it reads the item after the lowering, the ledger
        # without the row
        assert run(waking, T0 + timedelta(minutes=5)) == "drained"
    # Then it did not raise the item past the row the writer commits (as if it had)
    at = wake_at(store)
    assert at is not None
    assert at <= T0
    # And once the writer has ended, the next run raises it again
    assert run(waking, T0 + timedelta(minutes=10)) == "drained"
    assert wake_at(store) == NEVER


def test_a_write_the_item_never_heard_of_is_released_within_the_trust_bound(
    db_url: str, store: DynamoWakeStore
) -> None:
    # Given a run that read the whole ledger at T0 (nothing due): the item high
    counted = Counted(db_url)
    producer_ledger = Ledger(counted, wake=store)
    assert run(producer_ledger, T0) == "drained"
    # When a writer that keeps no wake item (a bare database URL) schedules work due now
    bare = Ledger(db_url)
    schedule(bare, T0 + timedelta(minutes=1))
    bound = timedelta(seconds=POLICY.producer_idle_check_seconds)
    # Then runs within the bound trust the item...
    assert run(producer_ledger, T0 + bound - timedelta(minutes=5)) == NOT_DUE
    assert counted.connections == 1
    # ...and the first run at the bound reads the ledger and releases it
    assert run(producer_ledger, T0 + bound) == "drained"
    assert bare.counts(POLICY.name)[JobStatus.LEASED] == 1
    bare.close()
    producer_ledger.close()


def test_the_item_is_kept_under_the_policys_key(store: DynamoWakeStore, waking: Ledger) -> None:
    schedule(waking, LATER)
    assert store.read(POLICY.name).at == LATER - WAKE_EARLY
    assert wake_key(POLICY.name) == "wake#exports"

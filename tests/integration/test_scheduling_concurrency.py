"""Scheduling a file is all or nothing, and concurrent schedulers never deadlock each other.

Against the real local PostgreSQL: two schedulers upsert the same rows side by side in opposite
orders; a failure late in a file leaves nothing behind; a deadlock or serialization failure is
retried a bounded number of times, with a growing, jittered backoff.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest

from sweeper.config import Policy
from sweeper.errors import LedgerError
from sweeper.ledger import store
from sweeper.ledger.store import Ledger, ScheduleResult
from sweeper.models import JobStatus, NewJob
from sweeper.scheduling import schedule_jobs

pytestmark = pytest.mark.integration

POLICY = Policy(name="exports")
NOW = datetime(2026, 11, 1, tzinfo=UTC)


def jobs(n: int, due: datetime = NOW) -> list[NewJob]:
    return [NewJob(f"t{i % 7}", f"o{i:06d}", due) for i in range(n)]


def total(ledger: Ledger) -> int:
    return sum(ledger.counts(POLICY.name).values())


def wait_until(check: Callable[[], bool], timeout_seconds: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout_seconds
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.01)
    return check()


@pytest.fixture
def admin(db_url: str) -> Iterator[psycopg.Connection[Any]]:
    with psycopg.connect(db_url, autocommit=True) as conn:
        yield conn


def inject_fault(conn: psycopg.Connection[Any], sqlstate: str, times: int) -> None:
    """The first `times` upsert statements fail with `sqlstate`, raised by the server itself.

    A sequence counts the statements: it is not rolled back with the failed transaction.
    """
    conn.execute("CREATE SEQUENCE fault_count")
    conn.execute(
        f"""
        CREATE FUNCTION fault() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            IF nextval('fault_count') <= {times} THEN
                RAISE EXCEPTION 'injected fault' USING ERRCODE = '{sqlstate}';
            END IF;
            RETURN NULL;
        END $$"""
    )
    conn.execute(
        "CREATE TRIGGER fault BEFORE INSERT ON sweeper_jobs "
        "FOR EACH STATEMENT EXECUTE FUNCTION fault()"
    )


def statements_run(conn: psycopg.Connection[Any]) -> int:
    row = conn.execute("SELECT last_value FROM fault_count").fetchone()
    assert row is not None
    return int(row[0])


def test_two_schedulers_in_opposite_orders_both_complete_without_a_deadlock(
    db_url: str, ledger: Ledger
) -> None:
    # Given the same 4,000 obligations, handed to two schedulers in opposite orders
    batch = jobs(4_000)
    orders = {"forward": batch, "backward": list(reversed(batch))}
    barrier = threading.Barrier(len(orders))
    results: dict[str, ScheduleResult] = {}
    spans: dict[str, tuple[float, float]] = {}
    errors: list[BaseException] = []

    def run(name: str) -> None:
        own = Ledger(db_url)
        try:
            own.claim(POLICY.name, "warm-up", NOW, timedelta(seconds=1), 1)  # connect first
            barrier.wait()
            started = time.monotonic()
            results[name] = schedule_jobs(own, POLICY, orders[name], NOW)
            spans[name] = (started, time.monotonic())
        except BaseException as exc:
            errors.append(exc)
        finally:
            own.close()

    # When both run side by side
    threads = [threading.Thread(target=run, args=(name,)) for name in orders]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    # Then they overlapped in time, neither deadlocked (one transaction each, no retry), and
    # every obligation exists once
    assert not errors
    assert max(start for start, _ in spans.values()) < min(end for _, end in spans.values())
    assert {name: r.attempts for name, r in results.items()} == {"forward": 1, "backward": 1}
    assert sorted(r.inserted for r in results.values()) == [0, 4_000]
    assert total(ledger) == 4_000


def test_a_failure_late_in_a_file_writes_nothing(
    admin: psycopg.Connection[Any], ledger: Ledger
) -> None:
    # Given a file of many pages' worth of rows whose last row the database refuses
    admin.execute(
        """
        CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            IF NEW.object_id = 'zz-refused' THEN
                RAISE EXCEPTION 'refused' USING ERRCODE = '23514';
            END IF;
            RETURN NEW;
        END $$"""
    )
    admin.execute(
        "CREATE TRIGGER refuse BEFORE INSERT ON sweeper_jobs FOR EACH ROW EXECUTE FUNCTION refuse()"
    )
    batch = [*jobs(5_010), NewJob("zz", "zz-refused", NOW)]
    # When it is scheduled
    with pytest.raises(LedgerError, match=r"\(23514\); nothing of this input was written$"):
        schedule_jobs(ledger, POLICY, batch, NOW)
    # Then not one row of it was written
    assert total(ledger) == 0


def test_a_deadlock_with_another_writer_is_retried_and_the_schedule_completes(
    db_url: str, admin: psycopg.Connection[Any], ledger: Ledger
) -> None:
    # Given two scheduled rows, and another writer holding the later one
    later = NOW + timedelta(days=30)
    schedule_jobs(ledger, POLICY, [NewJob("t", "a", later), NewJob("t", "z", later)], NOW)
    other = psycopg.connect(db_url)
    try:
        other.execute("SET deadlock_timeout = '10s'")  # so that the scheduler detects it
    except psycopg.errors.InsufficientPrivilege:
        other.rollback()  # the scheduler waited first: its check still runs first
    other.execute("UPDATE sweeper_jobs SET updated_at = now() WHERE object_id = 'z'")
    result: list[ScheduleResult] = []
    scheduler = Ledger(db_url)
    # When the scheduler moves both earlier: it locks a, then waits for z ...
    thread = threading.Thread(
        target=lambda: result.append(
            schedule_jobs(scheduler, POLICY, [NewJob("t", "z", NOW), NewJob("t", "a", NOW)], NOW)
        )
    )
    thread.start()
    assert wait_until(
        lambda: (
            (
                admin.execute(
                    "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'sweeper' "
                    "AND wait_event_type = 'Lock'"
                ).fetchone()
                or (0,)
            )[0]
            == 1
        )
    )
    # ... and the other writer then waits for a: a deadlock, which the scheduler loses
    other.execute("UPDATE sweeper_jobs SET updated_at = now() WHERE object_id = 'a'")
    other.commit()
    thread.join(timeout=60)
    other.close()
    scheduler.close()
    # Then the scheduler ran its transaction again, whole, and both rows moved earlier
    assert [(r.moved_earlier, r.attempts) for r in result] == [(2, 2)]
    for key in ("exports:t:a:v1", "exports:t:z:v1"):
        job = ledger.get(key)
        assert job is not None
        assert (job.due_at, job.status) == (NOW, JobStatus.PENDING)


@pytest.mark.parametrize("sqlstate", ["40P01", "40001"])
def test_a_deadlock_or_serialization_failure_once_is_retried(
    db_url: str, admin: psycopg.Connection[Any], sqlstate: str
) -> None:
    # Given the database fails the first upsert statement with a retryable error
    inject_fault(admin, sqlstate, times=1)
    waits: list[float] = []
    ledger = Ledger(db_url, sleep=waits.append)
    # When a file is scheduled
    result = schedule_jobs(ledger, POLICY, jobs(3), NOW)
    # Then the second attempt wrote it, after one short backoff
    assert (result.inserted, result.attempts) == (3, 2)
    assert statements_run(admin) == 2
    assert len(waits) == 1
    assert 0.5 * store.SCHEDULE_BACKOFF_SECONDS <= waits[0] <= 1.5 * store.SCHEDULE_BACKOFF_SECONDS
    assert total(ledger) == 3
    ledger.close()


def test_retries_are_bounded_and_then_nothing_is_written(
    db_url: str, admin: psycopg.Connection[Any]
) -> None:
    # Given a database that fails every upsert with a serialization failure
    inject_fault(admin, "40001", times=1_000)
    waits: list[float] = []
    ledger = Ledger(db_url, sleep=waits.append)
    # When a file is scheduled
    with pytest.raises(LedgerError, match=r"after 5 attempt\(s\) \(40001\)"):
        schedule_jobs(ledger, POLICY, jobs(3), NOW)
    # Then it tried SCHEDULE_ATTEMPTS times with doubling, jittered waits, and wrote nothing
    assert statements_run(admin) == store.SCHEDULE_ATTEMPTS == 5
    assert len(waits) == store.SCHEDULE_ATTEMPTS - 1
    for attempt, wait in enumerate(waits, start=1):
        nominal = store.SCHEDULE_BACKOFF_SECONDS * 2 ** (attempt - 1)
        assert 0.5 * nominal <= wait <= 1.5 * nominal
    assert total(ledger) == 0
    ledger.close()

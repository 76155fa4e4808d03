"""The job store against the real local PostgreSQL."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta

import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from psycopg.conninfo import make_conninfo

from sweeper.errors import LedgerError
from sweeper.ledger import claim_sql
from sweeper.ledger.store import (
    SCHEDULE_BACKOFF_SECONDS,
    Ledger,
    PolicyState,
    ScheduleResult,
    _backoff,
    connect_failure,
)
from sweeper.models import JobStatus, LedgerTarget, NewJob, OutcomeClass
from sweeper_local.postgres import free_port

pytestmark = pytest.mark.integration

T0 = datetime(2026, 11, 29, 2, 0, tzinfo=UTC)
LEASE = timedelta(seconds=60)


def add(
    ledger: Ledger, n: int, due: datetime = T0, tenants: int = 3, policy: str = "exports"
) -> None:
    jobs = [NewJob(f"t{i % tenants}", f"o{i:05d}", due) for i in range(n)]
    ledger.schedule(policy, 1, lambda j: policy, jobs, T0)


def test_schedule_is_idempotent_and_only_moves_due_earlier(ledger: Ledger) -> None:
    # Given one obligation due at T0
    first = ledger.schedule("exports", 1, lambda j: "s", [NewJob("t", "o", T0)], T0)
    # When it is scheduled again later, then earlier
    later = ledger.schedule("exports", 1, lambda j: "s", [NewJob("t", "o", T0 + LEASE)], T0)
    earlier = ledger.schedule("exports", 1, lambda j: "s", [NewJob("t", "o", T0 - LEASE)], T0)
    # Then one row exists, due at the earliest time
    assert (first.inserted, later.unchanged, earlier.moved_earlier) == (1, 1, 1)
    job = ledger.get("exports:t:o:v1")
    assert job is not None
    assert job.due_at == T0 - LEASE
    assert job.next_attempt_at == T0 - LEASE
    assert sum(ledger.counts("exports").values()) == 1


def test_schedule_keeps_the_earliest_of_repeats_in_one_call(ledger: Ledger) -> None:
    jobs = [NewJob("t", "o", T0 + LEASE), NewJob("t", "o", T0), NewJob("t", "o", T0 + LEASE)]
    result = ledger.schedule("exports", 1, lambda j: "s", jobs, T0)
    assert result.inserted == 1
    job = ledger.get("exports:t:o:v1")
    assert job is not None
    assert job.due_at == T0


def test_claim_leases_due_rows_earliest_first_and_commits(ledger: Ledger, db_url: str) -> None:
    ledger.schedule(
        "exports",
        1,
        lambda j: "s",
        [
            NewJob("t", "late", T0),
            NewJob("t", "early", T0 - LEASE),
            NewJob("t", "future", T0 + LEASE),
        ],
        T0,
    )
    claimed = ledger.claim("exports", "batch-1", T0, LEASE, limit=10)
    assert [c.object_id for c in claimed] == ["early", "late"]
    # committed: another connection sees the leases
    with psycopg.connect(db_url) as conn:
        owners = conn.execute(
            "SELECT lease_owner, lease_expires_at FROM sweeper_jobs WHERE status = 'leased'"
        ).fetchall()
    assert owners == [("batch-1", T0 + LEASE)] * 2


def test_release_only_touches_the_batch_own_leases(ledger: Ledger) -> None:
    add(ledger, 4)
    mine = ledger.claim("exports", "mine", T0, LEASE, limit=2)
    theirs = ledger.claim("exports", "theirs", T0, LEASE, limit=2)
    released = ledger.release([j.id for j in mine + theirs], "mine", T0)
    assert released == 2
    assert ledger.counts("exports")[JobStatus.PENDING] == 2
    assert ledger.counts("exports")[JobStatus.LEASED] == 2


def test_settling_twice_is_refused_by_the_state_guard(ledger: Ledger) -> None:
    add(ledger, 1)
    (job,) = ledger.claim("exports", "b", T0, LEASE, limit=1)
    assert ledger.mark_succeeded(job.operation_key, OutcomeClass.ACCEPTED, T0) is True
    assert ledger.mark_succeeded(job.operation_key, OutcomeClass.ACCEPTED, T0) is False
    assert (
        ledger.mark_failed(
            job.operation_key, OutcomeClass.PERMANENT, "http_422", T0, count_attempt=True
        )
        is False
    )
    settled = ledger.get(job.operation_key)
    assert settled is not None
    assert (settled.status, settled.attempt_count, settled.lease_owner) == (
        JobStatus.SUCCEEDED,
        1,
        None,
    )


def test_concurrent_claimers_never_get_the_same_row(ledger: Ledger, db_url: str) -> None:
    # Given 3,000 due rows and eight claimers on their own connections
    add(ledger, 3000, tenants=7)
    claims: dict[str, list[int]] = {}
    barrier = threading.Barrier(8)

    def claimer(name: str) -> None:
        own = Ledger(db_url)
        got: list[int] = []
        barrier.wait()
        while True:
            page = own.claim("exports", name, T0, LEASE, limit=50)
            if not page:
                break
            got.extend(j.id for j in page)
        claims[name] = got
        own.close()

    threads = [threading.Thread(target=claimer, args=(f"c{i}",)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    # Then every row was claimed exactly once
    every = [i for got in claims.values() for i in got]
    assert len(every) == 3000
    assert len(set(every)) == 3000
    assert sum(1 for got in claims.values() if got) > 1  # they really did run side by side


def test_a_claimer_does_not_wait_for_another_claim_in_flight(ledger: Ledger, db_url: str) -> None:
    # Given ten due rows, and a claim whose transaction is still open (its locks held)
    add(ledger, 10)
    holder = psycopg.connect(db_url)  # not autocommit: the claim's transaction stays open
    held = holder.execute(
        claim_sql.CLAIM_DUE,
        {
            "policy": "exports",
            "owner": "held",
            "now": T0,
            "expires": T0 + LEASE,
            "limit": 4,
            "window": 8,
            "fallback": 32,
            "scope_cap": None,
            "expired_before": T0,
            "from": [JobStatus.PENDING.value],
            "closed": [],
            "closed_tenants": [],
        },
    ).fetchall()
    assert len(held) == 4
    # When another claimer asks for every due row, willing to wait for a lock for a minute
    other = Ledger(make_conninfo(db_url, options="-c lock_timeout=60s"))
    got: list[int] = []
    claimer = threading.Thread(
        target=lambda: got.extend(j.id for j in other.claim("exports", "o", T0, LEASE, limit=10))
    )
    claimer.start()
    claimer.join(timeout=2.0)
    waited = claimer.is_alive()
    holder.rollback()  # let a blocked claimer go, so a failure does not hang the run
    claimer.join()
    holder.close()
    other.close()
    # Then it did not wait for the open claim, and got the other rows (none of the held ones)
    assert not waited, "the second claimer waited for the first claim's row locks"
    assert len(got) == 6
    assert not set(got) & {row[0] for row in held}


OFFSETS = st.integers(min_value=-3, max_value=3)
ROW = st.tuples(st.sampled_from([JobStatus.PENDING, JobStatus.LEASED]), OFFSETS, OFFSETS)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(rows=st.lists(ROW, min_size=1, max_size=8))
def test_a_claim_never_returns_an_unexpired_lease_and_reclaims_expired_ones(
    db_url: str, rows: list[tuple[JobStatus, int, int]]
) -> None:
    # Given rows whose next attempt and lease expiry sit on either side of now, or exactly on it
    now = T0
    with psycopg.connect(db_url, autocommit=True) as conn:
        conn.execute("TRUNCATE sweeper_jobs")
        for i, (status, attempt_offset, lease_offset) in enumerate(rows):
            leased = status is JobStatus.LEASED
            conn.execute(
                "INSERT INTO sweeper_jobs (id, policy, policy_version, tenant_id, object_id, scope,"
                " operation_key, status, due_at, next_attempt_at, lease_owner, lease_expires_at)"
                " OVERRIDING SYSTEM VALUE"
                " VALUES (%s, 'p', 1, 't', %s, 's', %s, %s, %s, %s, %s, %s)",
                (
                    i + 1,
                    f"o{i}",
                    f"p:t:o{i}:v1",
                    status.value,
                    now - LEASE,
                    now + timedelta(seconds=attempt_offset),
                    "old" if leased else None,
                    now + timedelta(seconds=lease_offset) if leased else None,
                ),
            )
    store = Ledger(db_url)
    try:
        # When a producer reclaims and claims at `now`
        reclaimed = store.reclaim_expired("p", now, limit=100)
        claimed = {j.id for j in store.claim("p", "new", now, LEASE, limit=100)}
    finally:
        store.close()
    # Then exactly the expired leases were reclaimed, and exactly the due rows claimed
    expired = {i + 1 for i, (s, _a, lo) in enumerate(rows) if s is JobStatus.LEASED and lo <= 0}
    due = {
        i + 1
        for i, (s, a, _lo) in enumerate(rows)
        if a <= 0 and (s is JobStatus.PENDING or (i + 1) in expired)
    }
    assert reclaimed == len(expired)
    assert claimed == due
    unexpired = {i + 1 for i, (s, _a, lo) in enumerate(rows) if s is JobStatus.LEASED and lo > 0}
    assert not claimed & unexpired


def test_a_failed_login_fetches_the_credentials_again_once(db_url: str) -> None:
    # Given credentials whose cached copy went stale (here: a port nothing listens on)
    asked: list[bool] = []
    stale = psycopg.conninfo.make_conninfo(db_url, port=str(free_port()))

    def provider(refresh: bool) -> str:
        asked.append(refresh)
        return db_url if refresh else stale

    store = Ledger(provider)
    # When the ledger connects, Then it retries once with fresh credentials
    assert store.counts("exports")[JobStatus.PENDING] == 0
    assert asked == [False, True]
    store.close()


def test_a_ledger_it_cannot_reach_fails_with_one_line_naming_where_never_the_password() -> None:
    port = free_port()
    store = Ledger(f"postgresql://app:s3cr3t-pw@127.0.0.1:{port}/ledger")
    with pytest.raises(LedgerError) as caught:
        store.counts("exports")
    # libpq's first line ends in the reason after its last "failed: "; the rest is dropped
    assert str(caught.value) == (
        f"cannot connect to the ledger at 127.0.0.1:{port}/ledger (Connection refused); "
        "check the database URL and that PostgreSQL is running there"
    )


def test_a_connection_error_without_text_is_named_by_its_class() -> None:
    assert connect_failure(psycopg.OperationalError(""), "h:5432/d") == (
        "cannot connect to the ledger at h:5432/d (OperationalError); check the database URL "
        "and that PostgreSQL is running there"
    )
    multi = psycopg.OperationalError('connection to server at "h" failed: timeout expired\nmore')
    assert "(timeout expired)" in connect_failure(multi, "h:5432/d")


def test_a_malformed_database_url_is_named_as_such() -> None:
    with pytest.raises(LedgerError, match=r"\(the database URL is not a valid PostgreSQL URL"):
        Ledger("host=127.0.0.1 nonsense_option=1").counts("exports")


def test_credentials_that_still_fail_after_one_refresh_name_no_target(db_url: str) -> None:
    asked: list[bool] = []
    stale = psycopg.conninfo.make_conninfo(db_url, port=str(free_port()))

    def provider(refresh: bool) -> str:
        asked.append(refresh)
        return stale

    with pytest.raises(
        LedgerError, match=r"^cannot connect to the ledger at the configured ledger \("
    ):
        Ledger(provider).counts("exports")
    assert asked == [False, True]


def test_a_failed_statement_names_its_sqlstate(fresh_db_url: str) -> None:
    store = Ledger(fresh_db_url)  # no schema: the table is missing
    with pytest.raises(LedgerError, match=r"^ledger statement failed \(42P01\)$"):
        store.counts("exports")
    store.close()


def test_a_closed_or_broken_connection_is_opened_again(ledger: Ledger, db_url: str) -> None:
    add(ledger, 2)
    ledger.close()
    assert ledger.counts("exports")[JobStatus.PENDING] == 2  # closed: reopened
    with psycopg.connect(db_url, autocommit=True) as admin:
        admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
            " WHERE application_name = 'sweeper' AND datname = current_database()"
        )
    with pytest.raises(LedgerError):
        ledger.counts("exports")  # the statement on the dead connection fails ...
    assert ledger.counts("exports")[JobStatus.PENDING] == 2  # ... and the next one reconnects


def test_runs_lists_the_latest_ten_by_default_newest_first(ledger: Ledger) -> None:
    for minute in range(12):
        at = T0 + timedelta(minutes=minute)
        ledger.start_run("exports", at, f"b{minute}", at)
    runs = ledger.runs("exports")
    assert [r.batch_id for r in runs] == [f"b{m}" for m in range(11, 1, -1)]
    assert [r.batch_id for r in ledger.runs("exports", limit=2)] == ["b11", "b10"]


def test_a_schedule_reports_new_moved_and_unchanged_rows_exactly(ledger: Ledger) -> None:
    ledger.schedule("exports", 1, lambda j: "s", [NewJob("t", f"o{i}", T0) for i in range(3)], T0)
    result = ledger.schedule(
        "exports",
        1,
        lambda j: "s",
        [
            NewJob("t", "o0", T0 - LEASE),  # moved earlier
            NewJob("t", "o1", T0),  # unchanged
            NewJob("t", "o2", T0 + LEASE),  # unchanged: never moved later
            NewJob("t", "o3", T0),  # new
            NewJob("t", "o4", T0),  # new
            NewJob("t", "o5", T0),  # new
        ],
        T0,
    )
    assert result == ScheduleResult(inserted=3, moved_earlier=1, unchanged=2, attempts=1)


def test_a_policy_never_paused_reads_as_running_with_no_history(ledger: Ledger) -> None:
    assert ledger.policy_state("never-paused") == PolicyState(
        "never-paused", False, None, None, None, None
    )


def test_schedules_inside_one_outer_transaction_each_upsert_only_their_own_rows(
    ledger: Ledger,
) -> None:
    # Given a caller's transaction on the ledger's connection (the staging table is emptied
    # at a commit), in which one job is scheduled and then deleted again
    with ledger.transaction() as conn:
        first = ledger.schedule("exports", 1, lambda j: "s", [NewJob("t", "o", T0)], T0)
        conn.execute("DELETE FROM sweeper_jobs WHERE object_id = 'o'")
        # When another job is scheduled before anything commits
        second = ledger.schedule("exports", 1, lambda j: "s", [NewJob("t", "p", T0)], T0)
    # Then the second schedule upserted its own row only: the first's is not written again
    assert first.inserted == second.inserted == 1
    assert ledger.get("exports:t:o:v1") is None
    assert sum(ledger.counts("exports").values()) == 1


def test_a_schedule_after_a_refused_one_stages_nothing_of_it(ledger: Ledger) -> None:
    # Given a schedule whose extra work in the same transaction fails (its rows were staged)
    def refuse(conn: psycopg.Connection[object], inserted: int, moved: int) -> None:
        raise LedgerError("refused")

    with pytest.raises(LedgerError):
        ledger.schedule("exports", 1, lambda j: "s", [NewJob("t", "gone", T0)], T0, within=refuse)
    # When the next schedule runs on the same connection
    result = ledger.schedule("exports", 1, lambda j: "s", [NewJob("t", "kept", T0)], T0)
    # Then only its own row was written
    assert result.inserted == 1
    assert ledger.get("exports:t:gone:v1") is None
    assert sum(ledger.counts("exports").values()) == 1


# -- the store's smaller reads and writes, each on its own ------------------------------------


def claim_all(ledger: Ledger, owner: str = "b-1", at: datetime = T0) -> list[str]:
    return [job.operation_key for job in ledger.claim("exports", owner, at, LEASE, 100)]


def test_a_connection_closed_under_the_ledger_is_opened_again(ledger: Ledger) -> None:
    # Given the ledger's connection closed by a store that shared it (not broken, only closed)
    add(ledger, 1)
    with ledger.transaction() as conn:
        pass
    conn.close()
    # Then the next statement opens another
    assert ledger.counts("exports")[JobStatus.PENDING] == 1


def test_releasing_no_rows_releases_none(ledger: Ledger) -> None:
    add(ledger, 2)
    claim_all(ledger)
    assert ledger.release([], "b-1", T0) == 0
    assert ledger.counts("exports")[JobStatus.LEASED] == 2


def test_a_claim_with_a_cap_of_one_leases_one_row_per_scope(ledger: Ledger) -> None:
    jobs = [NewJob(f"t{i % 2}", f"o{i}", T0) for i in range(6)]
    ledger.schedule("exports", 1, lambda j: j.tenant_id, jobs, T0)
    claimed = ledger.claim("exports", "b-1", T0, LEASE, 100, scope_cap=1)
    assert sorted(job.scope for job in claimed) == ["t0", "t1"]


def test_the_oldest_eligible_age_counts_fractions_of_a_second(ledger: Ledger) -> None:
    add(ledger, 1)
    assert ledger.oldest_eligible_age("exports", T0 + timedelta(seconds=0.25)) == 0.25
    assert ledger.oldest_eligible_age("exports", T0 - timedelta(seconds=1)) is None


def test_a_job_retried_by_an_operator_is_targeted_in_its_next_round(ledger: Ledger) -> None:
    # Given a terminal job that an operator retried
    add(ledger, 1)
    (key,) = claim_all(ledger)
    assert ledger.mark_failed(key, OutcomeClass.PERMANENT, "http_400", T0, count_attempt=True)
    assert ledger.retry_failed("exports", "ops", T0, keys=[key]) == [key]
    # Then the consumer's read of it names the new round (its idempotency key changes with it)
    target = ledger.targets([key])[key]
    assert (target.operation_key, target.status, target.retry_round) == (key, JobStatus.PENDING, 1)


def test_an_unsettled_delivery_of_a_settled_job_records_nothing(ledger: Ledger) -> None:
    add(ledger, 1)
    (key,) = claim_all(ledger)
    assert ledger.mark_succeeded(key, OutcomeClass.ACCEPTED, T0)
    recorded = ledger.record_unsettled(
        key, T0, next_attempt_at=T0 + LEASE, lease_until=T0 + LEASE, code="wait_rate"
    )
    assert recorded is None
    job = ledger.get(key)
    assert job is not None
    assert (job.status, job.last_error_code) == (JobStatus.SUCCEEDED, None)


def actions(db_url: str) -> list[tuple[object, ...]]:
    with psycopg.connect(db_url) as conn:
        return conn.execute(
            "SELECT action, actor, detail FROM sweeper_operator_actions ORDER BY id"
        ).fetchall()


def test_a_retry_is_recorded_with_its_filters_never_the_keys(ledger: Ledger, db_url: str) -> None:
    # Given two terminal jobs
    add(ledger, 2, tenants=1)
    keys = claim_all(ledger)
    for key in keys:
        assert ledger.mark_failed(key, OutcomeClass.PERMANENT, "http_400", T0, count_attempt=True)
    # When an operator retries them by key, outcome and tenant, then by outcome alone
    ledger.retry_failed(
        "exports", "ops", T0, keys=keys, outcomes=[OutcomeClass.PERMANENT], tenant_id="t0", limit=5
    )
    ledger.retry_failed("exports", "ops", T0, outcomes=[OutcomeClass.TRANSIENT])
    # Then each action records how it chose (a count of keys, not the keys), and the default limit
    assert actions(db_url) == [
        ("retry", "ops", {"keys": 2, "outcomes": ["permanent"], "tenant_filter": True, "limit": 5}),
        (
            "retry",
            "ops",
            {"keys": None, "outcomes": ["transient"], "tenant_filter": False, "limit": 1000},
        ),
    ]


def test_a_prune_of_one_policy_keeps_another_policys_rows(ledger: Ledger) -> None:
    for policy in ("exports", "imports"):
        add(ledger, 1, policy=policy)
        (job,) = ledger.claim(policy, "b-1", T0, LEASE, 10)
        assert ledger.mark_succeeded(job.operation_key, OutcomeClass.ACCEPTED, T0)
    assert ledger.prune_settled_batch(T0 + timedelta(days=1), 100, "exports")[0] == 1
    assert ledger.counts("imports")[JobStatus.SUCCEEDED] == 1
    assert ledger.counts("exports")[JobStatus.SUCCEEDED] == 0


def test_the_last_run_at_or_before_a_time_is_found(ledger: Ledger) -> None:
    for minute in (0, 5, 10):
        ledger.start_run("exports", T0 + timedelta(minutes=minute), f"b-{minute}", T0)
    assert ledger.last_run_at_or_before("exports", T0 + timedelta(minutes=7)) == T0 + timedelta(
        minutes=5
    )
    assert ledger.last_run_at_or_before("exports", T0 - timedelta(minutes=1)) is None


def finish(ledger: Ledger, batch_id: str, stop_reason: str) -> None:
    ledger.finish_run(
        batch_id,
        T0,
        reclaimed=0,
        discovered=0,
        published=0,
        publish_failures=0,
        oldest_age_seconds=None,
        stop_reason=stop_reason,
    )


def test_a_run_skipped_while_paused_is_reopened_and_records_no_resend(ledger: Ledger) -> None:
    # Given a run recorded as skipped (paused), without a count of resent messages
    ledger.start_run("exports", T0, "b-0", T0)
    finish(ledger, "b-0", "paused")
    # Then it resent nothing, and it can be re-armed once under a new batch id
    (audit,) = ledger.batch_audit("exports", T0 - timedelta(hours=1), 10)
    assert (audit.batch_id, audit.stop_reason, audit.resent) == ("b-0", "paused", 0)
    assert ledger.reopen_skipped_run("exports", T0, "release-1", T0) is True
    assert ledger.reopen_skipped_run("exports", T0, "release-2", T0) is False


def test_redrive_reads_each_job_under_its_own_key(ledger: Ledger) -> None:
    add(ledger, 2)
    keys = sorted(claim_all(ledger))
    views = ledger.jobs_for_redrive([*keys, "exports:nobody:o:v1"])
    assert sorted(views) == keys
    assert [views[key].operation_key for key in keys] == keys


def test_the_consumer_and_redrive_read_one_row_and_only_the_consumer_counts_it(
    ledger: Ledger,
) -> None:
    # Given a job of batch b-1 that went back for a retry after a throttled attempt
    add(ledger, 1)
    ledger.start_run("exports", T0, "b-1", T0)
    (key,) = claim_all(ledger, owner="b-1")
    ledger.record_unsettled(
        key, T0, next_attempt_at=T0, lease_until=T0 + LEASE, outcome=OutcomeClass.THROTTLED
    )
    # When redrive reads it, then the consumer does
    view = ledger.jobs_for_redrive([key])[key]
    audit_after_redrive = ledger.batch_audit("exports", T0 - timedelta(hours=1), 10)[0]
    target = ledger.targets([key])[key]
    audit_after_consumer = ledger.batch_audit("exports", T0 - timedelta(hours=1), 10)[0]
    # Then both read the same row, every field of it ...
    assert (
        view
        == target
        == LedgerTarget(
            operation_key=key,
            status=JobStatus.LEASED,
            policy="exports",
            policy_version=1,
            tenant_id="t0",
            object_id="o00000",
            scope="exports",
            retry_round=0,
            last_outcome=OutcomeClass.THROTTLED,
            not_before=T0,
        )
    )
    # ... and only the consumer's read counts a delivery of its batch
    assert (audit_after_redrive.consumed, audit_after_consumer.consumed) == (0, 1)


OFFSET = st.integers(min_value=-2, max_value=2)  # seconds from now: before, on, after


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    status=st.sampled_from(JobStatus),
    due=OFFSET,
    attempt=OFFSET,
    postponed=st.none() | OFFSET,
)
def test_a_job_is_callable_only_in_a_callable_state_once_each_of_its_times_has_come(
    db_url: str, status: JobStatus, due: int, attempt: int, postponed: int | None
) -> None:
    # Given one row whose due time, next attempt and postponement (if any) sit around now
    now = T0
    at = [now + timedelta(seconds=s) for s in (due, attempt)]
    until = None if postponed is None else now + timedelta(seconds=postponed)
    with psycopg.connect(db_url, autocommit=True) as conn:
        conn.execute("TRUNCATE sweeper_jobs")
        # each state with the times its constraints require (a lease, a completion, ...)
        leased = status is JobStatus.LEASED
        conn.execute(
            "INSERT INTO sweeper_jobs (policy, policy_version, tenant_id, object_id, scope,"
            " operation_key, status, due_at, next_attempt_at, postponed_until, lease_owner,"
            " lease_expires_at, completed_at, held_at, cancelled_at)"
            " VALUES ('p', 1, 't', 'o', 's', 'p:t:o:v1', %s, %s, %s, %s, %s, %s, %s, %s, %s)",
            (
                status.value,
                *at,
                until,
                "b" if leased else None,
                now + LEASE if leased else None,
                now if status in (JobStatus.SUCCEEDED, JobStatus.FAILED) else None,
                now if status is JobStatus.HELD else None,
                now if status is JobStatus.CANCELLED else None,
            ),
        )
    # When the consumer and redrive read it
    store = Ledger(db_url)
    try:
        target = store.targets(["p:t:o:v1"])["p:t:o:v1"]
        view = store.jobs_for_redrive(["p:t:o:v1"])["p:t:o:v1"]
    finally:
        store.close()
    # Then a call is allowed exactly when it is pending or leased and every time is at or
    # before now; a pending or leased job short of its time is early, and nothing else is
    times_come = due <= 0 and attempt <= 0 and (postponed is None or postponed <= 0)
    callable_state = status in (JobStatus.PENDING, JobStatus.LEASED)
    for read in (target, view):
        assert read.callable_at(now) is (callable_state and times_come)
        assert read.early_at(now) is (callable_state and not times_come)
        assert read.not_before == max(t for t in (*at, until) if t is not None)


def test_inspect_lists_an_expired_lease_deferred_without_an_outcome(ledger: Ledger) -> None:
    # Given a leased job sent back for the rate (a code, no outcome), whose lease then expired
    add(ledger, 1)
    (key,) = claim_all(ledger)
    ledger.record_unsettled(key, T0, next_attempt_at=T0, lease_until=T0 + LEASE, code="wait_rate")
    # When the operator inspects after the lease expired
    rows = ledger.inspect("exports", T0 + 2 * LEASE, T0 - LEASE, 10)
    # Then the job is listed with its code and no outcome
    assert [(r.operation_key, r.status, r.last_outcome, r.last_error_code) for r in rows] == [
        (key, JobStatus.LEASED, None, "wait_rate")
    ]


def test_two_losers_of_one_scheduling_conflict_back_off_for_different_times() -> None:
    # (jittered by +-50 %: drawn across the range, not at one point of it)
    delays = [_backoff(1) for _ in range(200)]
    assert all(
        0.5 * SCHEDULE_BACKOFF_SECONDS <= d <= 1.5 * SCHEDULE_BACKOFF_SECONDS for d in delays
    )
    assert (
        min(delays) < 0.8 * SCHEDULE_BACKOFF_SECONDS < 1.2 * SCHEDULE_BACKOFF_SECONDS < max(delays)
    )


def test_active_scopes_are_those_with_unsettled_work_busiest_first(ledger: Ledger) -> None:
    # Given three scopes with 3, 2 and 1 unsettled jobs, and a scope whose one job settled
    jobs = [NewJob(t, f"o{i}", T0) for t, n in (("a", 1), ("b", 3), ("c", 2)) for i in range(n)]
    ledger.schedule("exports", 1, lambda j: j.tenant_id, [*jobs, NewJob("d", "o", T0)], T0)
    done = ledger.claim("exports", "b-1", T0, LEASE, 100, closed_scopes=["a", "b", "c"])
    assert ledger.mark_succeeded(done[0].operation_key, OutcomeClass.ACCEPTED, T0)
    # Then the scopes with pending or leased work are listed, busiest first, up to the limit
    assert ledger.active_scopes("exports", 10) == {"b": 3, "c": 2, "a": 1}
    assert list(ledger.active_scopes("exports", 2)) == ["b", "c"]


def test_a_counted_attempt_without_a_limit_is_a_retry_of_its_batch(ledger: Ledger) -> None:
    # Given a batch's run record and a job it carries
    add(ledger, 1)
    ledger.start_run("exports", T0, "b-1", T0)
    (key,) = claim_all(ledger, owner="b-1")
    # When an attempt is counted with no attempt limit given
    attempts = ledger.record_unsettled(
        key, T0, next_attempt_at=T0, lease_until=T0 + LEASE, code="http_503", count_attempt=True
    )
    # Then it is the job's first attempt and a retry of its batch
    assert attempts == 1
    (audit,) = ledger.batch_audit("exports", T0 - timedelta(hours=1), 10)
    assert (audit.batch_id, audit.retried) == ("b-1", 1)


def prepared_statements(ledger: Ledger) -> int:
    with ledger.transaction() as conn:
        row = conn.execute("SELECT count(*) FROM pg_prepared_statements").fetchone()
    assert row is not None
    return int(row[0])


def test_statements_are_prepared_on_the_server_unless_turned_off(db_url: str) -> None:
    # Given a ledger as the Lambdas build it, and one behind a proxy (prepare_threshold=None)
    default, proxied = Ledger(db_url), Ledger(db_url, prepare_threshold=None)
    # When each runs one statement many times
    for ledger in (default, proxied):
        for _ in range(10):
            ledger.counts("exports")
    # Then only the first has prepared it on the server
    assert (prepared_statements(default) > 0, prepared_statements(proxied)) == (True, 0)
    default.close()
    proxied.close()

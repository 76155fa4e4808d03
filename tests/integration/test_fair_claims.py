"""Fair claims: tenants take turns within a page, and no scope holds more leases than its cap."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest

from sweeper.config import Policy, Quota
from sweeper.ledger import claim_sql
from sweeper.ledger.store import CLAIM_FALLBACK_PAGES, CLAIM_WINDOW_PAGES, Ledger
from sweeper.models import JobMessage, JobStatus, NewJob, OutcomeClass
from sweeper.producer.backpressure import republish_delay_seconds
from sweeper.producer.run import run_producer
from tests.fakes import FakePublisher, unexpired_leases

pytestmark = pytest.mark.integration

T0 = datetime(2026, 11, 29, 2, 0, tzinfo=UTC)
LEASE = timedelta(seconds=60)
SMALL_TENANTS = [f"t{i}" for i in range(1, 10)]


def seed_backlog_and_fresh_work(ledger: Ledger, scope: str = "global") -> None:
    """Tenant `big` owes 1,000 rows due long ago; nine tenants owe 5 each, due just now.

    The backlog is older than every other tenant's work: the case where "earliest due first"
    would hand the whole page to `big`.
    """
    backlog = [NewJob("big", f"b{i:04d}", T0 - timedelta(hours=2, seconds=i)) for i in range(1000)]
    fresh = [
        NewJob(tenant, f"o{i}", T0 - timedelta(seconds=i))
        for tenant in SMALL_TENANTS
        for i in range(5)
    ]
    scope_of = (lambda j: "exports") if scope == "global" else (lambda j: j.tenant_id)
    ledger.schedule("exports", 1, scope_of, backlog + fresh, T0)


def seed(ledger: Ledger, counts: dict[str, int]) -> None:
    """`counts[tenant]` due rows per tenant, each tenant its own scope, earlier tenants older."""
    jobs = [
        NewJob(tenant, f"o{i:04d}", T0 - timedelta(hours=len(counts) - t, seconds=i))
        for t, (tenant, n) in enumerate(counts.items())
        for i in range(n)
    ]
    ledger.schedule("exports", 1, lambda j: j.tenant_id, jobs, T0)


def test_the_first_claim_takes_every_tenants_due_rows_despite_one_tenants_backlog(
    ledger: Ledger,
) -> None:
    # Given one tenant with 1,000 rows overdue for hours and nine with 5 rows each, one scope
    seed_backlog_and_fresh_work(ledger)
    # When one claim of a page of 100 runs
    claimed = ledger.claim("exports", "batch-1", T0, LEASE, 100)
    # Then every small tenant's rows are all in it, and the backlog fills the rest of the page
    per_tenant = Counter(job.tenant_id for job in claimed)
    assert {tenant: per_tenant[tenant] for tenant in SMALL_TENANTS} == dict.fromkeys(
        SMALL_TENANTS, 5
    )
    assert per_tenant["big"] == 55
    # and what the backlog gave was its oldest rows
    big = [job.eligible_since for job in claimed if job.tenant_id == "big"]
    assert T0 - timedelta(hours=2, seconds=999) in big


def test_tenants_take_turns_when_the_page_cannot_hold_everyones_work(ledger: Ledger) -> None:
    # Given two tenants with 30 due rows each, tenant a's all older than tenant b's
    seed(ledger, {"a": 30, "b": 30})
    # When a page of 10 is claimed
    claimed = ledger.claim("exports", "batch-1", T0, LEASE, 10)
    # Then it is shared: five rows each, each tenant's oldest first
    assert Counter(job.tenant_id for job in claimed) == {"a": 5, "b": 5}
    for tenant in ("a", "b"):
        mine = sorted(j.object_id for j in claimed if j.tenant_id == tenant)
        assert mine == [f"o{i:04d}" for i in range(25, 30)]


def test_the_producers_first_page_carries_every_tenants_work(ledger: Ledger) -> None:
    # Given the backlog and the nine tenants' fresh work, and a producer with pages of 100
    seed_backlog_and_fresh_work(ledger)
    policy = Policy(name="exports", page_size=100)
    publisher = FakePublisher()
    # When the producer runs
    report = run_producer(
        policy, T0, ledger, publisher, clock=lambda: T0, remaining_seconds=lambda: 100.0
    )
    # Then the first page it published holds every tenant's rows
    first_page = [JobMessage.model_validate_json(m.body) for m in publisher.sent[:100]]
    assert {b.tenant_id for b in first_page} == {"big", *SMALL_TENANTS}
    assert report.published == 1045


def test_a_scope_never_holds_more_leases_than_its_cap(ledger: Ledger) -> None:
    # Given three scopes: a and b with 50 due rows each (a's the oldest), c with 3
    seed(ledger, {"a": 50, "b": 50, "c": 3})
    # When a claim with room for 100 rows runs with a cap of 10 leases per scope
    claimed = ledger.claim("exports", "batch-1", T0, LEASE, 100, scope_cap=10)
    # Then no scope got more than its cap, and the capped ones left room to the others
    assert Counter(job.scope for job in claimed) == {"a": 10, "b": 10, "c": 3}
    # and while those leases run, a second claim adds nothing to the full scopes
    assert ledger.claim("exports", "batch-2", T0, LEASE, 100, scope_cap=10) == []
    # and a larger cap takes only the difference
    more = ledger.claim("exports", "batch-3", T0, LEASE, 100, scope_cap=12)
    assert Counter(job.scope for job in more) == {"a": 2, "b": 2}


def test_expired_leases_do_not_count_against_a_scopes_cap(ledger: Ledger) -> None:
    # Given a scope whose cap is full of leases
    seed(ledger, {"a": 20})
    assert len(ledger.claim("exports", "batch-1", T0, LEASE, 100, scope_cap=5)) == 5
    # When those leases have expired (not yet reclaimed)
    later = T0 + LEASE + timedelta(seconds=1)
    again = ledger.claim("exports", "batch-2", later, LEASE, 100, scope_cap=5)
    # Then the scope has its whole cap again
    assert len(again) == 5
    assert unexpired_leases(ledger, "exports", later) == 5


def test_a_scopes_cap_counts_its_rows_as_the_producers_depth_does(ledger: Ledger) -> None:
    # Given a scope whose cap of 5 is full of leases, 2 of them sent back to wait (a throttle:
    # next attempt five minutes ahead, lease renewed)
    seed(ledger, {"a": 20})
    held = ledger.claim("exports", "batch-1", T0, LEASE, 100, scope_cap=5)
    assert len(held) == 5
    for job in held[:2]:
        ledger.record_unsettled(
            job.operation_key,
            T0,
            next_attempt_at=T0 + timedelta(seconds=300),
            lease_until=T0 + timedelta(seconds=360),
            outcome=OutcomeClass.THROTTLED,
        )
    # When the next claim runs
    now = T0 + timedelta(seconds=1)
    again = ledger.claim("exports", "batch-2", now, LEASE, 100, scope_cap=5)
    # Then the 2 waiting rows hold no room: the consumers do not have them (the producer's
    # depth does not count them either)
    assert len(again) == 2
    assert ledger.count_on_consumers("exports", now, now) == 5
    # and a lease expired but not yet reclaimable (its message may still be on a consumer)
    # still holds its room, as in the producer's depth
    later = T0 + LEASE + timedelta(seconds=1)
    expired_before = later - timedelta(seconds=30)
    assert ledger.count_on_consumers("exports", later, expired_before) == 5
    assert (
        ledger.claim(
            "exports", "batch-3", later, LEASE, 100, scope_cap=5, expired_before=expired_before
        )
        == []
    )
    # and once they are reclaimable, they do not: the whole cap is free again
    assert len(ledger.claim("exports", "batch-4", later, LEASE, 100, scope_cap=5)) == 5


class RecordingLedger(Ledger):
    """The real ledger, remembering the scope cap of each claim and what it counts."""

    caps: list[int | None]
    expired_before: list[datetime | None]

    def claim(self, *args: Any, **kwargs: Any) -> Any:
        self.caps.append(kwargs.get("scope_cap"))
        self.expired_before.append(kwargs.get("expired_before"))
        return super().claim(*args, **kwargs)


def test_the_producer_caps_each_scope_at_what_its_rate_drains_within_the_horizon(
    db_url: str, ledger: Ledger
) -> None:
    # Given a policy at 2 calls/s with a 20 s lease: one scope drains 20 rows in half a lease
    policy = Policy(
        name="exports", quota=Quota(limit=2, period_seconds=1, headroom=1.0), lease_seconds=20
    )
    assert policy.max_in_flight == 20
    seed(ledger, {"a": 5})
    recording = RecordingLedger(db_url)
    recording.caps, recording.expired_before = [], []
    # When the producer runs
    run_producer(
        policy, T0, recording, FakePublisher(), clock=lambda: T0, remaining_seconds=lambda: 100.0
    )
    recording.close()
    # Then each claim carried that cap, counting the scope's rows as the producer's depth does
    # (a lease is not reclaimable within one visibility timeout of its publish)
    assert recording.caps
    assert set(recording.caps) == {20}
    assert set(recording.expired_before) == {
        T0 - timedelta(seconds=republish_delay_seconds(policy))
    }


def test_the_claim_reads_indexes_not_the_table(ledger: Ledger, db_url: str) -> None:
    # Given 20,000 due rows of 100 tenants in one scope, analysed
    jobs = [
        NewJob(f"t{i % 100}", f"o{i:05d}", T0 - timedelta(milliseconds=i)) for i in range(20_000)
    ]
    ledger.schedule("exports", 1, lambda j: "exports", jobs, T0)
    with psycopg.connect(db_url, autocommit=True) as conn:
        conn.execute("ANALYZE sweeper_jobs")
    # When the claim's plan is read (EXPLAIN without ANALYZE: nothing is leased)
    plan = claim_plan(db_url, limit=100)
    # Then no node scans sweeper_jobs whole
    scans = list(_nodes(plan))
    assert not [n for n in scans if n["Node Type"] == "Seq Scan"], scans
    used = {n.get("Index Name") for n in scans}
    assert {"sweeper_jobs_pending_tenant_due", "sweeper_jobs_pending_due"} <= used


def test_after_a_large_schedule_into_a_settled_ledger_the_claim_locks_rows_by_primary_key(
    ledger: Ledger, db_url: str
) -> None:
    # Given a ledger of settled rows, analysed (its statistics say nothing is pending), then a
    # large schedule before the next ANALYZE: the case of a daily run into a ledger of history
    old = [NewJob(f"t{i % 10}", f"old{i:05d}", T0) for i in range(3_000)]
    ledger.schedule("exports", 1, lambda j: j.tenant_id, old, T0)
    with psycopg.connect(db_url, autocommit=True) as conn:
        conn.execute("UPDATE sweeper_jobs SET status = 'succeeded', completed_at = %s", (T0,))
        conn.execute("VACUUM ANALYZE sweeper_jobs")
    new = [NewJob(f"t{i % 10}", f"new{i:05d}", T0) for i in range(5_000)]
    ledger.schedule("exports", 1, lambda j: j.tenant_id, new, T0)
    # When the claim's plan is read
    plan = claim_plan(db_url, limit=1000)
    # Then each row is locked, and updated, through the primary key: a walk of a pending
    # index per locked row (what the planner picks for "status = 'pending'" when it believes
    # few rows are) made such a claim of 1,000 of 75,000 rows take 10 s
    (lock,) = [n for n in _nodes(plan) if n["Node Type"] == "LockRows"]
    assert [n.get("Index Name") for n in _nodes(lock) if "Index Name" in n] == ["sweeper_jobs_pkey"]
    updated = [n for n in plan["Plans"] if n.get("Parent Relationship") != "InitPlan"]
    reads = [n.get("Index Name") for n in _nodes(updated[0]) if n.get("Alias") == "j"]
    assert reads == ["sweeper_jobs_pkey"], reads


def claim_plan(db_url: str, *, limit: int) -> dict[str, Any]:
    """The claim's plan for a page of `limit` (EXPLAIN without ANALYZE: nothing is leased)."""
    with psycopg.connect(db_url, autocommit=True) as conn:
        row = conn.execute(
            b"EXPLAIN (FORMAT JSON) " + claim_sql.CLAIM_DUE.encode(),
            {
                "policy": "exports",
                "owner": "explain",
                "now": T0,
                "expires": T0 + LEASE,
                "limit": limit,
                "window": limit * CLAIM_WINDOW_PAGES,
                "fallback": limit * CLAIM_FALLBACK_PAGES,
                "scope_cap": 1000,
                "expired_before": T0,
                "from": [JobStatus.PENDING.value],
                "closed": [],
                "closed_tenants": [],
            },
        ).fetchone()
    assert row is not None
    plan: dict[str, Any] = row[0][0]["Plan"]
    return plan


def _nodes(node: dict[str, Any]) -> Any:
    yield node
    for child in node.get("Plans", []):
        yield from _nodes(child)


def test_a_claim_returns_its_rows_tenants_taking_turns(ledger: Ledger) -> None:
    # Given the backlog of tenant big (a scope per tenant) and nine tenants' fresh work
    seed_backlog_and_fresh_work(ledger, scope="tenant")
    # When a page of 100 is claimed
    claimed = ledger.claim("exports", "batch-1", T0, LEASE, 100)
    # Then it comes back (and is published) in turns: each tenant's first row, then the seconds
    tenants = [job.tenant_id for job in claimed]
    assert tenants[:50] == ["big", *SMALL_TENANTS] * 5
    assert tenants[50:] == ["big"] * 50
    # each turn's rows oldest first, and big's own rows oldest first
    big = [job.object_id for job in claimed if job.tenant_id == "big"]
    assert big == [f"b{i:04d}" for i in range(999, 944, -1)]  # its 55 oldest

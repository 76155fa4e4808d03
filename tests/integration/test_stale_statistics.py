"""The ledger's statements that move many rows find each by primary key, whatever the planner's
statistics say about how many rows hold the state they move from.

PostgreSQL's statistics lag a large change until the next ANALYZE (for a big table, until 10 %
of its rows changed). When they say almost no row is pending (or leased, failed, settled), a
statement that joins its chosen ids back to sweeper_jobs on `id` plus `status = ...` may walk the
partial index of that status once per chosen row: measured, 10 s for a claim of 1,000 rows and
13.6 s for a reclaim of 1,000, after 75,000 rows changed state in a ledger analysed when none
held it (docs/decisions.md). Each test builds that state and reads the statement's plan.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, LiteralString

import psycopg
import pytest
from psycopg.types.json import Jsonb

from sweeper.ledger import claim_sql, control_sql, retention_sql
from sweeper.ledger.store import Ledger
from sweeper.models import JobStatus, NewJob

pytestmark = pytest.mark.integration

T0 = datetime(2026, 11, 29, 2, 0, tzinfo=UTC)
LONG_AGO = T0 - timedelta(days=30)


def stale(ledger: Ledger, db_url: str, move: LiteralString, analysed_as: str) -> None:
    """3,000 rows in state `analysed_as`, analysed; then 5,000 more moved by `move` (an UPDATE of
    the rows with object ids starting 'new'), not analysed."""
    old = [NewJob(f"t{i % 10}", f"old{i:05d}", T0) for i in range(3_000)]
    ledger.schedule("exports", 1, lambda j: j.tenant_id, old, T0)
    with psycopg.connect(db_url, autocommit=True) as conn:
        if analysed_as == "succeeded":
            conn.execute(
                "UPDATE sweeper_jobs SET status = 'succeeded', completed_at = %s", (LONG_AGO,)
            )
        conn.execute("VACUUM ANALYZE sweeper_jobs")
    new = [NewJob(f"t{i % 10}", f"new{i:05d}", T0) for i in range(5_000)]
    ledger.schedule("exports", 1, lambda j: j.tenant_id, new, T0)
    with psycopg.connect(db_url, autocommit=True) as conn:
        conn.execute(move, {"ago": LONG_AGO})


def modified_reads(statement: LiteralString, params: dict[str, Any], db_url: str) -> list[Any]:
    """For each node of the plan that updates or deletes sweeper_jobs: the indexes its reads of
    sweeper_jobs go through (None for a table scan)."""
    with psycopg.connect(db_url, autocommit=True) as conn:
        row = conn.execute(b"EXPLAIN (FORMAT JSON) " + statement.encode(), params).fetchone()
    assert row is not None
    reads = []
    for node in _nodes(row[0][0]["Plan"]):
        if node["Node Type"] == "ModifyTable" and node.get("Relation Name") == "sweeper_jobs":
            for child in node.get("Plans", []):
                if child.get("Parent Relationship") not in {"InitPlan", "SubPlan"}:
                    reads += [
                        n.get("Index Name")
                        for n in _nodes(child, skip_subplans=True)
                        if n.get("Relation Name") == "sweeper_jobs"
                    ]
    assert reads, "the plan modifies sweeper_jobs"
    return reads


def _nodes(node: dict[str, Any], *, skip_subplans: bool = False) -> Iterator[dict[str, Any]]:
    yield node
    for child in node.get("Plans", []):
        if skip_subplans and child.get("Parent Relationship") in {"InitPlan", "SubPlan"}:
            continue
        yield from _nodes(child, skip_subplans=skip_subplans)


@dataclass(frozen=True)
class Case:
    statement: LiteralString
    params: dict[str, Any]
    move: LiteralString  # how the 5,000 new rows got the state the statement moves them from
    analysed_as: str  # the state of every row when the statistics were taken


CASES = {
    "reclaim": Case(
        claim_sql.RECLAIM_EXPIRED,
        {
            "policy": "exports",
            "now": T0,
            "expired_before": T0,
            "limit": 1000,
            "from": [JobStatus.LEASED.value],
        },
        "UPDATE sweeper_jobs SET status = 'leased', lease_owner = 'b-1', lease_expires_at = "
        "%(ago)s WHERE object_id LIKE 'new%%'",
        analysed_as="succeeded",
    ),
    # The 02:00 case: a vendor outage failed thousands of jobs, and the operator retries them
    "retry": Case(
        control_sql.RETRY_FAILED,
        {
            "policy": "exports",
            "actor": "test",
            "reason": "test",
            "detail": Jsonb({}),
            "now": T0,
            "keys": None,
            "outcomes": None,
            "tenant_id": None,
            "limit": 1000,
            "from": [JobStatus.FAILED.value],
        },
        "UPDATE sweeper_jobs SET status = 'failed', completed_at = %(ago)s, "
        "last_outcome = 'permanent' WHERE object_id LIKE 'new%%'",
        analysed_as="pending",
    ),
    "prune": Case(
        retention_sql.PRUNE_SETTLED,
        {
            "before": T0,
            "failed_before": T0,
            "limit": 1000,
            "policy": "exports",
            "action_id": None,
            "now": T0,
        },
        "UPDATE sweeper_jobs SET status = 'succeeded', completed_at = %(ago)s "
        "WHERE object_id LIKE 'new%%'",
        analysed_as="pending",
    ),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_statement_moving_many_rows_finds_each_by_primary_key(
    name: str, ledger: Ledger, db_url: str
) -> None:
    # Given 5,000 rows moved to the state the statement moves rows from, after the statistics
    # were taken with no row in it
    case = CASES[name]
    stale(ledger, db_url, case.move, analysed_as=case.analysed_as)
    # Then its plan reads the rows it updates or deletes by primary key only
    assert set(modified_reads(case.statement, case.params, db_url)) == {"sweeper_jobs_pkey"}

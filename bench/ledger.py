"""The ledger's cost is the work, not the table: the claim -> settle cycle at two ledger sizes.

Each size gets its own database (on a durable local cluster unless --database-url is given),
seeded with every row pending and due, the hard case for "earliest due first", then ANALYZEd
once (autovacuum would do the same soon after a bulk load). A round is what the consumers do:
`claimers` threads, each with its own connection, claim pages through the production
`Ledger.claim` (select + lease + commit) and settle every claimed row one at a time through
`Ledger.mark_succeeded`, as a consumer settles each record, until the round's rows are done.
Between rounds, untimed, as many fresh due rows are added as were settled, so the pending set
keeps its size; there is no VACUUM between rounds (autovacuum runs as it would in an account),
so dead row versions pile up as they do under load. Reported per size: the median round, the
first and the last (a last round much slower than the first is bloat), and the dead row
versions at the end. Compare the sizes of one run: the ratio is what matters here.
"""

from __future__ import annotations

import contextlib
import statistics
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any, Final

import psycopg
from psycopg import sql

from sweeper.config import Policy
from sweeper.ledger.migrate import migrate
from sweeper.ledger.store import Ledger
from sweeper.models import OutcomeClass
from sweeper_local.postgres import LocalPostgres

POLICY: Final = "bench"
NOW: Final = datetime(2026, 11, 29, 2, 0, tzinfo=UTC)
LEASE: Final = timedelta(minutes=15)
#: The per-scope cap the producer claims with, for the default quota and this lease: the claim
#: counts each scope's leases, as in production (the bench's in-flight rows stay below it).
SCOPE_CAP: Final = Policy(name=POLICY, lease_seconds=int(LEASE.total_seconds())).max_in_flight

# Bench-only bulk seed: rows `first`..`last`, pending and due, due times spread over the past.
SEED_ROWS: Final = """
INSERT INTO sweeper_jobs (policy, policy_version, tenant_id, object_id, scope, operation_key,
                          due_at, next_attempt_at)
SELECT %(policy)s, 1, 't' || (g %% 100), 'o' || g, %(policy)s,
       %(policy)s || ':t' || (g %% 100) || ':o' || g || ':v1',
       %(now)s - g * interval '1 ms', %(now)s - g * interval '1 ms'
FROM generate_series(%(first)s::bigint, %(last)s::bigint) AS g
"""
COUNT_BY_STATUS: Final = "SELECT status, count(*) FROM sweeper_jobs GROUP BY status"
DEAD_TUPLES: Final = (
    "SELECT n_dead_tup, n_live_tup FROM pg_stat_user_tables WHERE relname = 'sweeper_jobs'"
)


@contextlib.contextmanager
def _server(database_url: str | None) -> Iterator[str]:
    if database_url:
        yield database_url
        return
    with LocalPostgres(durable=True) as pg:
        yield pg.url


def _database(admin_url: str, name: str) -> str:
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
        )
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    info = psycopg.conninfo.conninfo_to_dict(admin_url)
    info["dbname"] = name
    return psycopg.conninfo.make_conninfo(**info)  # type: ignore[arg-type]


def _seed(url: str, first: int, last: int) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(SEED_ROWS, {"policy": POLICY, "now": NOW, "first": first, "last": last})


def _claimer(url: str, owner: str, share: int, page: int, start: threading.Barrier) -> int:
    """Claim and settle up to `share` rows; how many were settled."""
    ledger = Ledger(url)
    settled = 0
    try:
        start.wait()
        while settled < share:
            jobs = ledger.claim(
                POLICY, owner, NOW, LEASE, min(page, share - settled), scope_cap=SCOPE_CAP
            )
            if not jobs:
                break
            for job in jobs:
                settled += ledger.mark_succeeded(job.operation_key, OutcomeClass.ACCEPTED, NOW)
    finally:
        ledger.close()
    return settled


def _round(url: str, round_no: int, claimers: int, rows: int, page: int) -> tuple[int, float]:
    """One timed round: (rows settled, seconds)."""
    start = threading.Barrier(claimers + 1)
    counts = [0] * claimers
    shares = [rows // claimers + (1 if i < rows % claimers else 0) for i in range(claimers)]

    def work(i: int) -> None:
        counts[i] = _claimer(url, f"r{round_no}c{i}", shares[i], page, start)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(claimers)]
    for thread in threads:
        thread.start()
    start.wait()
    t0 = time.perf_counter()
    for thread in threads:
        thread.join()
    return sum(counts), time.perf_counter() - t0


def measure(
    url: str, rows: int, *, claimers: int, page: int, rows_per_round: int, rounds: int
) -> dict[str, Any]:
    """Seed `rows`, then `rounds` timed claim -> settle rounds of `rows_per_round` rows."""
    migrate(url)
    started = time.monotonic()
    _seed(url, 1, rows)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("ANALYZE sweeper_jobs")
    seed_seconds = time.monotonic() - started
    per_round: list[float] = []
    settled_total = 0
    next_row = rows + 1
    for round_no in range(rounds):
        settled, seconds = _round(url, round_no, claimers, rows_per_round, page)
        settled_total += settled
        per_round.append(settled / seconds)
        _seed(url, next_row, next_row + settled - 1)  # untimed: keep the pending set's size
        next_row += settled
    with psycopg.connect(url, autocommit=True) as conn:
        statuses: dict[str, int] = {
            str(k): int(v) for k, v in conn.execute(COUNT_BY_STATUS).fetchall()
        }
        dead = conn.execute(DEAD_TUPLES).fetchone()
    return {
        "rows_in_ledger": rows,
        "rows_settled": settled_total,
        "rows_per_second": round(statistics.median(per_round)),
        "first_round_rows_per_second": round(per_round[0]),
        "last_round_rows_per_second": round(per_round[-1]),
        "rounds": [round(r) for r in per_round],
        "statuses_at_end": statuses,
        "dead_row_versions_at_end": int(dead[0]) if dead else None,
        "seed_seconds": round(seed_seconds, 1),
    }


def run_ledger_bench(
    sizes: list[int],
    *,
    claimers: int = 8,
    page: int = 100,
    rows_per_round: int = 4000,
    rounds: int = 5,
    database_url: str | None = None,
) -> dict[str, Any]:
    """Measure every size in one run and give the ratio of the smallest to the largest."""
    # The same work at every size, and never more per round than the smallest ledger holds.
    rows_per_round = max(claimers, min(rows_per_round, min(sizes)))
    results = []
    with _server(database_url) as admin_url:
        for rows in sizes:
            url = _database(admin_url, f"sweeper_bench_{rows}")
            results.append(
                measure(
                    url,
                    rows,
                    claimers=claimers,
                    page=page,
                    rows_per_round=rows_per_round,
                    rounds=rounds,
                )
            )
    small, large = results[0], results[-1]
    return {
        "cycle": "claim a page, settle each row (mark_succeeded), no VACUUM between rounds",
        "claimers": claimers,
        "page_rows": page,
        "rows_per_round": rows_per_round,
        "results": results,
        "slowdown_largest_vs_smallest": round(
            small["rows_per_second"] / max(1, large["rows_per_second"]), 2
        ),
        "targets": {"slowdown_max": 2.0},
    }

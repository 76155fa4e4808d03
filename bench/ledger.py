"""The claim costs the page, not the table: claim-and-mark throughput at two ledger sizes.

Each size gets its own database (on a durable local cluster unless --database-url is given),
seeded with every row pending and due, the hard case for "earliest due first". A round claims
`pages` pages of `page` rows through the production `Ledger.claim` (select + lease + commit);
between rounds, untimed, the rows go back to pending and the table is vacuumed. The median
round is reported. Compare the two figures of one run: the ratio is what matters here.
"""

from __future__ import annotations

import contextlib
import statistics
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any, Final

import psycopg
from psycopg import sql

from sweeper.ledger.migrate import migrate
from sweeper.ledger.store import Ledger
from sweeper.local.postgres import LocalPostgres

POLICY: Final = "bench"
ROUNDS: Final = 5
NOW: Final = datetime(2026, 11, 29, 2, 0, tzinfo=UTC)

# Bench-only bulk seed: every row pending and due, due times spread over the past.
SEED_ROWS: Final = """
INSERT INTO sweeper_jobs (policy, policy_version, tenant_id, object_id, scope, operation_key,
                          due_at, next_attempt_at)
SELECT %(policy)s, 1, 't' || (g %% 100), 'o' || g, %(policy)s,
       %(policy)s || ':t' || (g %% 100) || ':o' || g || ':v1',
       %(now)s - g * interval '1 ms', %(now)s - g * interval '1 ms'
FROM generate_series(1, %(rows)s) AS g
"""
RESET_LEASES: Final = """
UPDATE sweeper_jobs SET status = 'pending', lease_owner = NULL, lease_expires_at = NULL
WHERE status = 'leased'
"""


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


def _vacuum(url: str) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("VACUUM ANALYZE sweeper_jobs")


def measure(url: str, rows: int, page: int, pages: int) -> dict[str, Any]:
    """Seed `rows`, then time `pages` claims of `page` rows per round."""
    migrate(url)
    started = time.monotonic()
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(SEED_ROWS, {"policy": POLICY, "now": NOW, "rows": rows})
    _vacuum(url)
    seed_seconds = time.monotonic() - started
    ledger = Ledger(url)
    per_round: list[float] = []
    try:
        for round_no in range(ROUNDS):
            claimed = 0
            t0 = time.perf_counter()
            for n in range(pages):
                claimed += len(
                    ledger.claim(POLICY, f"r{round_no}p{n}", NOW, timedelta(minutes=15), page)
                )
            elapsed = time.perf_counter() - t0
            per_round.append(claimed / elapsed)
            with psycopg.connect(url, autocommit=True) as conn:
                conn.execute(RESET_LEASES)
            _vacuum(url)
    finally:
        ledger.close()
    return {
        "rows_in_ledger": rows,
        "rows_claimed_per_round": pages * page,
        "rows_per_second": round(statistics.median(per_round)),
        "rounds": [round(r) for r in per_round],
        "seed_seconds": round(seed_seconds, 1),
    }


def run_ledger_bench(
    sizes: list[int], *, page: int = 1000, pages: int = 10, database_url: str | None = None
) -> dict[str, Any]:
    """Measure every size in one run and print the ratio of the largest to the smallest."""
    # The same work at every size: no more pages than the smallest ledger holds.
    pages = max(1, min(pages, min(sizes) // page))
    results = []
    with _server(database_url) as admin_url:
        for rows in sizes:
            url = _database(admin_url, f"sweeper_bench_{rows}")
            results.append(measure(url, rows, page, pages))
    small, large = results[0], results[-1]
    return {
        "page_rows": page,
        "results": results,
        "slowdown_largest_vs_smallest": round(
            small["rows_per_second"] / max(1, large["rows_per_second"]), 2
        ),
        "targets": {"rows_per_second_min": 10_000, "slowdown_max": 2.0},
    }

"""`sweeper bench discovery`: rows discovered and upserted per second, sql and s3 sources.

sql: a system-of-record database in the local cluster (its own database, an index on the keyset
order) seeded with `rows` exports, read by the production source and run logic into a fresh
ledger: one pass that inserts every row, then a second pass that finds every row unchanged. Then
the same source read by runs with a short budget, to show a pass spread over runs reading every
row once (checked by counting the ledger's rows and distinct keys). s3: `objects` objects in a
bucket of the AWS emulator, one pass (bounded by the emulator's ListObjectsV2, not by sweeper).
`parts` picks what runs: `passes` (first and second pass), `budgeted`, `s3`.

Figures are printed, never asserted by timing.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

from sweeper.config import Policy, S3Discovery, SqlDiscovery
from sweeper.discovery.run import COMPLETE, DiscoveryReport, run_discovery
from sweeper.discovery.s3 import S3Source
from sweeper.discovery.sql import SqlSource
from sweeper.discovery.store import DiscoveryStore
from sweeper.ledger.migrate import migrate
from sweeper.ledger.store import Ledger
from sweeper_bench.ledger import _database
from sweeper_local.aws import LocalAws
from sweeper_local.postgres import LocalPostgres
from sweeper_local.sources import (
    BUCKET_PREFIX,
    KEY_TEMPLATE,
    SOURCE_QUERY,
    seed_bucket,
    seed_source,
    source_database,
)

TENANTS = 50
PARTS = ("passes", "budgeted", "s3")
#: Distinct keys and rows the ledger holds for the bench policy: every row once means both
#: equal the source's row count.
COUNT_LEDGER = """
SELECT count(*), count(DISTINCT operation_key) FROM sweeper_jobs WHERE policy = 'bench'
"""


@contextlib.contextmanager
def _server(database_url: str | None) -> Iterator[str]:
    if database_url:
        yield database_url
        return
    with LocalPostgres(durable=True) as pg:
        yield pg.url


def _pass(
    policy: Policy, source: Any, ledger: Ledger, at: datetime, budget: float
) -> DiscoveryReport:
    started = time.monotonic()
    return run_discovery(
        policy,
        source,
        DiscoveryStore(ledger),
        scheduled_at=at,
        clock=lambda: datetime.now(UTC),
        remaining_seconds=lambda: budget - (time.monotonic() - started),
    )


def _figures(report: DiscoveryReport) -> dict[str, Any]:
    return {
        "scanned": report.scanned,
        "inserted": report.inserted,
        "unchanged": report.unchanged,
        "pages": report.pages,
        "seconds": report.elapsed_seconds,
        "rows_per_second": _per_second(report.scanned, report.elapsed_seconds),
        "stop_reason": report.stop_reason,
    }


def _per_second(rows: int, seconds: float) -> int:
    """Rows read per second of the run, 0 for a run that took no time."""
    return round(rows / seconds) if seconds > 0 else 0


def _sql(
    admin: str, rows: int, page_size: int, budget_run_seconds: float, parts: tuple[str, ...]
) -> dict[str, Any]:
    now = datetime.now(UTC)
    source_url = source_database(admin, "sweeper_bench_source")
    seed_source(source_url, rows, TENANTS, now - timedelta(days=1))
    ledger_url = _database(admin, "sweeper_bench_discovery")
    migrate(ledger_url)
    policy = Policy(
        name="bench",
        discovery=SqlDiscovery(query=SOURCE_QUERY, page_size=page_size),
    )
    assert isinstance(policy.discovery, SqlDiscovery)
    ledger = Ledger(ledger_url)
    source = SqlSource(policy.discovery, source_url)
    result: dict[str, Any] = {"rows": rows, "page_size": page_size}
    try:
        if "passes" in parts:
            result["first_pass"] = _figures(_pass(policy, source, ledger, now, 1e9))
            second = _pass(policy, source, ledger, now + timedelta(seconds=1), 1e9)
            result["second_pass"] = _figures(second)
        if "budgeted" in parts:
            # A pass spread over runs with a short budget each: every row once, across runs.
            with ledger.transaction() as conn:
                conn.execute("TRUNCATE sweeper_jobs, sweeper_discovery_cursors")
            result["budgeted"] = _budgeted(
                policy, source, ledger, now + timedelta(seconds=2), rows, budget_run_seconds
            )
    finally:
        source.close()
        ledger.close()
    return result


def _budgeted(
    policy: Policy, source: Any, ledger: Ledger, at: datetime, rows: int, budget: float
) -> dict[str, Any]:
    runs: list[DiscoveryReport] = []
    while not runs or runs[-1].stop_reason != COMPLETE:
        runs.append(_pass(policy, source, ledger, at, budget))
        at += timedelta(seconds=1)
    with ledger.transaction() as conn:
        held, distinct = conn.execute(COUNT_LEDGER).fetchone() or (0, 0)
    scanned = sum(r.scanned for r in runs)
    inserted = sum(r.inserted for r in runs)
    read_twice = sum(r.unchanged + r.moved_earlier for r in runs)
    seconds = sum(r.elapsed_seconds for r in runs)
    return {
        "budget_seconds_per_run": budget,
        "runs": len(runs),
        "scanned": scanned,
        "inserted": inserted,
        "read_twice": read_twice,
        "ledger_rows": held,
        "ledger_distinct_keys": distinct,
        "every_row_once": scanned == inserted == held == distinct == rows and read_twice == 0,
        "seconds": round(seconds, 3),
        "rows_per_second": _per_second(scanned, seconds),
    }


class _RecordedListing:
    """ListObjectsV2 answers kept from a live pass and served again from memory, so that a
    later pass measures sweeper's part (key matching, the upsert), not the emulator's listing."""

    def __init__(self, client: Any) -> None:
        self._client = client
        self._answers: dict[str, Any] = {}
        self.live_calls = 0

    def list_objects_v2(self, **request: Any) -> Any:
        key = json.dumps(request, sort_keys=True)
        if key not in self._answers:
            self.live_calls += 1
            self._answers[key] = self._client.list_objects_v2(**request)
        return self._answers[key]


def _s3(admin: str, objects: int, page_size: int) -> dict[str, Any]:
    now = datetime.now(UTC)
    ledger_url = _database(admin, "sweeper_bench_discovery_s3")
    migrate(ledger_url)
    with LocalAws() as aws:
        s3 = aws.s3()
        seed_bucket(s3, "sweeper-bench", objects, TENANTS)
        policy = Policy(
            name="bench",
            discovery=S3Discovery(
                bucket="sweeper-bench",
                prefix=BUCKET_PREFIX,
                key_template=KEY_TEMPLATE,
                min_age_seconds=0,
                page_size=page_size,
            ),
        )
        assert isinstance(policy.discovery, S3Discovery)
        ledger = Ledger(ledger_url)
        listing = _RecordedListing(s3)
        try:
            source = S3Source(policy.discovery, listing)  # live, and recorded
            first = _pass(policy, source, ledger, now + timedelta(seconds=1), 1e9)
            live = S3Source(policy.discovery, s3)
            second = _pass(policy, live, ledger, now + timedelta(seconds=2), 1e9)
            # The first pass again on an empty ledger, its listing answered from memory.
            with ledger.transaction() as conn:
                conn.execute("TRUNCATE sweeper_jobs, sweeper_discovery_cursors")
            recorded = listing.live_calls
            replayed = _pass(policy, source, ledger, now + timedelta(seconds=3), 1e9)
            from_memory = {
                **_figures(replayed),
                "listing_calls_to_the_emulator": listing.live_calls - recorded,
            }
        finally:
            ledger.close()
    return {
        "objects": objects,
        "first_pass": _figures(first),
        "second_pass": _figures(second),
        "first_pass_listing_from_memory": from_memory,
    }


def run_discovery_bench(
    *,
    rows: int,
    objects: int,
    page_size: int,
    budget_run_seconds: float,
    database_url: str | None,
    parts: tuple[str, ...] = PARTS,
) -> dict[str, Any]:
    result: dict[str, Any] = {}
    with _server(database_url) as admin:
        if "passes" in parts or "budgeted" in parts:
            result["sql"] = _sql(admin, rows, page_size, budget_run_seconds, parts)
        if "s3" in parts:
            result["s3"] = _s3(admin, objects, min(page_size, 1000))
    # The machine's load while it ran (figures from a shared machine are read with it).
    result["load_average"] = [round(n, 2) for n in os.getloadavg()]
    return result

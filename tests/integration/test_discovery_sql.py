"""Discovery from a system-of-record PostgreSQL: idempotent passes, a cursor that resumes exactly,
bad rows counted by position, a read-only session, one run per scheduled time."""

from __future__ import annotations

import itertools
import json
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sweeper.config import Policy, SqlDiscovery
from sweeper.discovery.rows import Cursor, Page, Rejected
from sweeper.discovery.run import (
    BUDGET,
    COMPLETE,
    DUPLICATE,
    SOURCE_ERROR,
    SUPERSEDED,
    DiscoveryReport,
    run_discovery,
)
from sweeper.discovery.sql import SqlSource
from sweeper.discovery.store import DiscoveryStore
from sweeper.errors import DiscoveryFailedError
from sweeper.ledger.store import Ledger
from sweeper.models import JobStatus
from sweeper_cli import main
from tests.conftest import PgServer

pytestmark = pytest.mark.integration

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
_counter = itertools.count()

SOURCE_TABLE = """
CREATE TABLE exports (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    tenant      text,
    export_id   text,
    expires_at  timestamptz
)
"""
QUERY = "SELECT tenant AS tenant_id, export_id AS object_id, expires_at AS due_at FROM exports"


@dataclass
class SourceDb:
    url: str

    def insert(self, rows: list[tuple[Any, Any, Any]]) -> None:
        with psycopg.connect(self.url, autocommit=True) as conn, conn.cursor() as cur:
            cur.executemany(
                "INSERT INTO exports (tenant, export_id, expires_at) VALUES (%s, %s, %s)", rows
            )

    def execute(self, statement: Any, params: Any = None) -> None:
        with psycopg.connect(self.url, autocommit=True) as conn:
            conn.execute(statement, params)

    def count(self) -> int:
        with psycopg.connect(self.url) as conn:
            row = conn.execute("SELECT count(*) FROM exports").fetchone()
            assert row is not None
            return int(row[0])


@pytest.fixture
def source_db(pg_server: PgServer) -> Iterator[SourceDb]:
    name = f"sor_t{os.getpid()}_{next(_counter)}"
    url = pg_server.create_database(name)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(SOURCE_TABLE)
    yield SourceDb(url)
    pg_server.drop_database(name)


def policy_for(query: str = QUERY, page_size: int = 100, **params: Any) -> Policy:
    return Policy(
        name="exports",
        discovery=SqlDiscovery(query=query, page_size=page_size, params=params),
    )


def unlimited() -> float:
    return 1e9


def pages_budget(pages: int) -> Callable[[], float]:
    """A budget that allows exactly `pages` pages (checked once before each)."""
    left = itertools.count(pages, -1)
    return lambda: 1e9 if next(left) > 0 else 0.0


def discover(
    policy: Policy,
    source: Any,
    store: DiscoveryStore,
    *,
    at: datetime = NOW,
    remaining: Callable[[], float] = unlimited,
) -> DiscoveryReport:
    return run_discovery(
        policy, source, store, scheduled_at=at, clock=lambda: NOW, remaining_seconds=remaining
    )


def rows(n: int, tenants: int = 3) -> list[tuple[Any, Any, Any]]:
    return [(f"t{i % tenants}", f"exp-{i:05d}", NOW - timedelta(hours=i % 7)) for i in range(n)]


def test_a_pass_upserts_every_row_and_records_the_run(source_db: SourceDb, ledger: Ledger) -> None:
    # Given 250 rows in the system of record
    source_db.insert(rows(250))
    policy = policy_for(page_size=100)
    store = DiscoveryStore(ledger)
    # When one run reads the whole source
    report = discover(policy, SqlSource(policy.discovery, source_db.url), store)  # type: ignore[arg-type]
    # Then every row is a pending job and the run is recorded with its figures
    assert report.stop_reason == COMPLETE
    assert (report.scanned, report.inserted, report.pages) == (250, 250, 3)
    assert ledger.counts("exports")[JobStatus.PENDING] == 250
    recorded = store.run(report.run_id)
    assert recorded is not None
    assert (recorded.scanned, recorded.inserted, recorded.unchanged, recorded.rejected) == (
        250,
        250,
        0,
        0,
    )
    assert recorded.stop_reason == COMPLETE
    assert recorded.finished_at is not None
    assert recorded.cursor_after is None  # the pass is complete: the next one starts afresh


def test_running_a_pass_twice_changes_nothing(source_db: SourceDb, ledger: Ledger) -> None:
    # Given a source already discovered once
    source_db.insert(rows(120))
    policy = policy_for(page_size=50)
    store = DiscoveryStore(ledger)
    source = SqlSource(policy.discovery, source_db.url)  # type: ignore[arg-type]
    discover(policy, source, store)
    before = ledger.get("exports:t0:exp-00000:v1")
    # When the next pass reads it again
    again = discover(policy, source, store, at=NOW + timedelta(hours=1))
    # Then nothing is inserted or moved, every row is unchanged, and the job is as it was
    assert again.stop_reason == COMPLETE
    assert (again.scanned, again.inserted, again.moved_earlier, again.unchanged) == (120, 0, 0, 120)
    assert ledger.get("exports:t0:exp-00000:v1") == before
    assert ledger.counts("exports")[JobStatus.PENDING] == 120


def test_a_due_time_moved_earlier_in_the_source_moves_the_job_earlier_only(
    source_db: SourceDb, ledger: Ledger
) -> None:
    # Given a discovered row
    source_db.insert([("t1", "e1", NOW), ("t1", "e2", NOW)])
    policy = policy_for()
    store = DiscoveryStore(ledger)
    source = SqlSource(policy.discovery, source_db.url)  # type: ignore[arg-type]
    discover(policy, source, store)
    # When the source moves one due time earlier and the other later
    source_db.execute(
        "UPDATE exports SET expires_at = expires_at - interval '1 day' WHERE export_id = 'e1'"
    )
    source_db.execute(
        "UPDATE exports SET expires_at = expires_at + interval '1 day' WHERE export_id = 'e2'"
    )
    report = discover(policy, source, store, at=NOW + timedelta(hours=1))
    # Then the earlier one moved, the later one did not
    assert (report.moved_earlier, report.unchanged) == (1, 1)
    first, second = ledger.get("exports:t1:e1:v1"), ledger.get("exports:t1:e2:v1")
    assert first is not None
    assert first.due_at == NOW - timedelta(days=1)
    assert second is not None
    assert second.due_at == NOW


def test_a_budget_stop_resumes_at_the_cursor_with_every_row_once(
    source_db: SourceDb, ledger: Ledger
) -> None:
    # Given 1,000 rows and a budget of 3 pages of 64 a run
    source_db.insert(rows(1000, tenants=2))
    policy = policy_for(page_size=64)
    store = DiscoveryStore(ledger)
    source = SqlSource(policy.discovery, source_db.url)  # type: ignore[arg-type]
    reports = []
    # When runs follow one another until the pass completes
    for n in range(20):
        report = discover(
            policy, source, store, at=NOW + timedelta(minutes=n), remaining=pages_budget(3)
        )
        reports.append(report)
        if report.stop_reason == COMPLETE:
            break
    # Then every run but the last stopped on its budget, and the runs read every row once
    assert [r.stop_reason for r in reports[:-1]] == [BUDGET] * (len(reports) - 1)
    assert reports[-1].stop_reason == COMPLETE
    assert sum(r.scanned for r in reports) == 1000
    assert sum(r.inserted for r in reports) == 1000
    assert sum(r.unchanged for r in reports) == 0  # nothing was read twice
    assert ledger.counts("exports")[JobStatus.PENDING] == 1000


class SpySource:
    """Delegates to the real source and remembers each row id it returned."""

    def __init__(self, inner: SqlSource) -> None:
        self.inner = inner
        self.kind = inner.kind
        self.read: list[tuple[str, str]] = []

    def pass_rejects(self, now: datetime) -> list[Rejected]:
        return self.inner.pass_rejects(now)

    def read_page(self, cursor: Cursor | None, limit: int, now: datetime) -> Page:
        page = self.inner.read_page(cursor, limit, now)
        self.read.extend((str(r.tenant_id), str(r.object_id)) for r in page.rows)
        return page


@settings(
    max_examples=20,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    keys=st.lists(
        st.tuples(st.integers(0, 3), st.sampled_from(["a", "b", "c"]), st.integers(0, 40)),
        min_size=0,
        max_size=60,
        unique=True,
    ),
    page_size=st.integers(1, 9),
    pages_per_run=st.integers(1, 4),
)
def test_pages_split_anywhere_among_equal_sort_keys_read_every_row_once(
    source_db: SourceDb,
    ledger: Ledger,
    keys: list[tuple[int, str, int]],
    page_size: int,
    pages_per_run: int,
) -> None:
    # Given rows sharing due times and tenants (few distinct values: many equal sort keys)
    source_db.execute("TRUNCATE exports")
    with ledger.transaction() as conn:
        conn.execute("TRUNCATE sweeper_jobs, sweeper_discovery_cursors, sweeper_discovery_runs")
    source_db.insert([(t, f"o{o}", NOW + timedelta(minutes=d)) for d, t, o in keys])
    policy = policy_for(page_size=page_size)
    store = DiscoveryStore(ledger)
    spy = SpySource(SqlSource(policy.discovery, source_db.url))  # type: ignore[arg-type]
    # When runs with a budget of a few pages each complete one pass
    for n in itertools.count():
        report = discover(
            policy, spy, store, at=NOW + timedelta(minutes=n), remaining=pages_budget(pages_per_run)
        )
        if report.stop_reason == COMPLETE:
            break
    spy.inner.close()
    # Then each row was read exactly once, and each obligation is one job (a pair of ids may
    # appear twice with two due times: one obligation)
    expected = sorted((t, f"o{o}") for _d, t, o in keys)
    assert sorted(spy.read) == expected
    assert sum(ledger.counts("exports").values()) == len(set(expected))


def test_bad_rows_are_counted_by_position_and_never_stop_the_run(
    pg_server: PgServer, ledger: Ledger
) -> None:
    # Given a source whose due time is text, with rows missing ids or a zone
    name = f"sor_t{os.getpid()}_{next(_counter)}"
    url = pg_server.create_database(name)
    try:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("CREATE TABLE uploads (tenant text, upload text, due text)")
            conn.execute(
                "INSERT INTO uploads VALUES "
                "('t1', 'u1', '2026-01-01T00:00:00+00:00'),"  # 1 good
                "('  ', 'u2', '2026-01-01T00:00:01+00:00'),"  # 2 blank tenant (never trimmed)
                "('t1', 'u3', '2026-01-01T00:00:02'),"  # 3 no zone
                "('t1', 'secret-value-u4', '2026-01-01T00:00:03 garbage'),"  # 4 not a time
                "('t2', 'u5', '2026-01-01T00:00:04Z'),"  # 5 good
                "('t2', NULL, '2026-01-01T00:00:05Z')"  # outside the order: counted once
            )
        policy = policy_for(
            "SELECT tenant AS tenant_id, upload AS object_id, due AS due_at FROM uploads",
            page_size=2,
        )
        store = DiscoveryStore(ledger)
        source = SqlSource(policy.discovery, url)  # type: ignore[arg-type]
        # When a pass reads it
        report = discover(policy, source, store)
        source.close()
    finally:
        pg_server.drop_database(name)
    # Then the good rows are jobs, the bad ones counted by position and reason, no values
    assert report.stop_reason == COMPLETE
    assert (report.scanned, report.inserted, report.rejected) == (6, 2, 4)
    assert report.rejected_sample == [
        {"position": None, "reason": "object_id missing"},
        {"position": 2, "reason": "tenant_id leading or trailing whitespace"},
        {"position": 3, "reason": "due_at has no time zone"},
        {"position": 4, "reason": "due_at is not an ISO 8601 time"},
    ]
    recorded = store.run(report.run_id)
    assert recorded is not None
    assert recorded.rejected == 4
    assert recorded.rejected_sample == report.rejected_sample
    assert "secret-value" not in repr(report.as_dict()) + repr(recorded)


def test_a_repeated_delivery_of_the_same_scheduled_time_does_nothing(
    source_db: SourceDb, ledger: Ledger
) -> None:
    source_db.insert(rows(10))
    policy = policy_for()
    store = DiscoveryStore(ledger)
    source = SqlSource(policy.discovery, source_db.url)  # type: ignore[arg-type]
    first = discover(policy, source, store)
    source_db.insert([("t9", "late", NOW)])
    second = discover(policy, source, store)  # the scheduler delivered the same event again
    assert first.stop_reason == COMPLETE
    assert first.inserted == 10
    assert second.stop_reason == DUPLICATE
    assert second.scanned == 0
    assert ledger.get("exports:t9:late:v1") is None
    recorded = store.run(first.run_id)
    assert recorded is not None
    assert recorded.invocations == 2


def test_a_run_that_lost_the_cursor_to_another_steps_aside_with_nothing_written(
    source_db: SourceDb, ledger: Ledger, db_url: str
) -> None:
    # Given two runs that read the same cursor
    source_db.insert(rows(10))
    policy = policy_for(page_size=5)
    store, other = DiscoveryStore(ledger), DiscoveryStore(Ledger(db_url))
    state = store.cursor("exports", "sql", NOW)
    source = SqlSource(policy.discovery, source_db.url)  # type: ignore[arg-type]
    page = source.read_page(None, 5, NOW)
    store.start_run("a", "exports", "sql", NOW, state, NOW)
    other.start_run("b", "exports", "sql", NOW + timedelta(seconds=1), state, NOW)
    from sweeper.discovery.rows import check_row

    jobs = [j for j in map(check_row, page.rows) if not isinstance(j, str)]
    common: dict[str, Any] = {
        "source": "sql",
        "state": state,
        "cursor_after": page.next_cursor,
        "complete": False,
        "scanned": 5,
        "not_due": 0,
        "rejected": [],
        "sample_room": 0,
        "now": NOW,
    }
    # When the first commits its page and the second then tries to commit the same page
    store.commit_page(policy, "a", jobs, **common)
    from sweeper.errors import CursorMovedError

    with pytest.raises(CursorMovedError):
        other.commit_page(policy, "b", jobs, **common)
    other.ledger.close()
    # Then the second wrote nothing: its run shows no rows, and the cursor is the first's
    b = store.run("b")
    assert b is not None
    assert (b.scanned, b.inserted, b.unchanged) == (0, 0, 0)
    assert store.cursor("exports", "sql", NOW).pass_scanned == 5


def test_a_superseded_run_stops_and_says_so(source_db: SourceDb, ledger: Ledger) -> None:
    source_db.insert(rows(10))
    policy = policy_for(page_size=5)
    store = DiscoveryStore(ledger)
    source = SqlSource(policy.discovery, source_db.url)  # type: ignore[arg-type]

    class Interleaved(SpySource):
        def read_page(self, cursor: Cursor | None, limit: int, now: datetime) -> Page:
            page = super().read_page(cursor, limit, now)
            with ledger.transaction() as conn:  # another run advanced the cursor meanwhile
                conn.execute("UPDATE sweeper_discovery_cursors SET pass_scanned = 99")
            return page

    report = discover(policy, Interleaved(source), store)
    assert report.stop_reason == SUPERSEDED
    assert report.inserted == 0
    assert ledger.counts("exports")[JobStatus.PENDING] == 0


def test_the_source_session_is_read_only(source_db: SourceDb, ledger: Ledger) -> None:
    # Given a query that would write to the system of record (through a function it calls)
    source_db.insert(rows(3))
    source_db.execute(
        "CREATE FUNCTION purge() RETURNS SETOF exports LANGUAGE sql AS "
        "'DELETE FROM exports RETURNING *'"
    )
    writing = (
        "SELECT tenant AS tenant_id, export_id AS object_id, expires_at AS due_at FROM purge()"
    )
    policy = policy_for(writing)
    store = DiscoveryStore(ledger)
    # When it runs, the run fails as a source error and the source keeps every row
    with pytest.raises(DiscoveryFailedError) as failed:
        discover(policy, SqlSource(policy.discovery, source_db.url), store)  # type: ignore[arg-type]
    report = failed.value.report
    assert isinstance(report, DiscoveryReport)
    assert report.stop_reason == SOURCE_ERROR
    assert report.error == "source query failed (25006)"  # read_only_sql_transaction
    assert source_db.count() == 3
    recorded = store.run(report.run_id)
    assert recorded is not None
    assert recorded.stop_reason == SOURCE_ERROR


def test_query_parameters_are_bound_not_formatted(source_db: SourceDb, ledger: Ledger) -> None:
    source_db.insert(
        [("t1", "a", NOW), ("t2", "b", NOW), ("t1'; DROP TABLE exports; --", "c", NOW)]
    )
    policy = policy_for(QUERY + " WHERE tenant = %(tenant)s AND expires_at <= %(now)s", tenant="t1")
    report = discover(policy, SqlSource(policy.discovery, source_db.url), DiscoveryStore(ledger))  # type: ignore[arg-type]
    assert (report.scanned, report.inserted) == (1, 1)
    assert source_db.count() == 3


def test_the_discover_command_runs_a_pass_and_reports_it(
    source_db: SourceDb, db_url: str, tmp_path: Path
) -> None:
    # Given a policy file with an sql discovery and a source of 30 rows
    source_db.insert(rows(30))
    config = tmp_path / "sweeper.toml"
    config.write_text(
        '[[policies]]\nname = "exports"\n[policies.discovery]\nkind = "sql"\n'
        f'query = "{QUERY}"\npage_size = 7\n'
    )
    args = [
        "discover",
        "--policy",
        "exports",
        "--config",
        str(config),
        "--database-url",
        db_url,
        "--local-file",
        str(tmp_path / "none.json"),
        "--source-url",
        source_db.url,
        "--json",
    ]
    # When it runs twice
    first = CliRunner().invoke(main, args)
    second = CliRunner().invoke(main, args)
    # Then the first inserted every row, the second changed nothing
    assert first.exit_code == 0, first.output
    report = json.loads(first.output)
    assert (report["scanned"], report["inserted"], report["stop_reason"]) == (30, 30, COMPLETE)
    assert json.loads(second.output)["unchanged"] == 30


def test_the_discover_command_needs_the_source_url_for_sql(db_url: str, tmp_path: Path) -> None:
    config = tmp_path / "sweeper.toml"
    config.write_text(
        f'[[policies]]\nname = "exports"\n[policies.discovery]\nkind = "sql"\nquery = "{QUERY}"\n'
    )
    result = CliRunner().invoke(
        main,
        [
            "discover",
            "--config",
            str(config),
            "--database-url",
            db_url,
            "--local-file",
            str(tmp_path / "none.json"),
        ],
        env={"SWEEPER_SOURCE_DATABASE_URL": ""},
    )
    assert result.exit_code == 2
    assert "--source-url" in result.output
    assert "Traceback" not in result.output


def test_a_source_that_cannot_be_read_exits_1_with_one_line(
    db_url: str, tmp_path: Path, pg_server: PgServer
) -> None:
    config = tmp_path / "sweeper.toml"
    config.write_text(
        f'[[policies]]\nname = "exports"\n[policies.discovery]\nkind = "sql"\nquery = "{QUERY}"\n'
    )
    missing = pg_server.url_for("no_such_database") + " password=hunter2"
    result = CliRunner().invoke(
        main,
        [
            "discover",
            "--config",
            str(config),
            "--database-url",
            db_url,
            "--local-file",
            str(tmp_path / "none.json"),
            "--source-url",
            missing,
        ],
    )
    assert result.exit_code == 1
    assert "cannot connect to the source database" in result.output
    assert "hunter2" not in result.output
    assert "Traceback" not in result.output


def test_status_lists_the_last_discovery_runs_without_their_cursor(
    source_db: SourceDb, ledger: Ledger
) -> None:
    # Given four discovery runs of a policy
    from sweeper.operator_api.reads import STATUS_DISCOVERY_RUNS, _discovery_runs

    source_db.insert(rows(12))
    policy = policy_for(page_size=5)
    source = SqlSource(policy.discovery, source_db.url)  # type: ignore[arg-type]
    for n in range(4):
        discover(policy, source, DiscoveryStore(ledger), at=NOW + timedelta(minutes=n))

    class Console:  # what the status helper reads: the ledger
        def __init__(self, ledger: Ledger) -> None:
            self.ledger = ledger

    # When status collects them
    shown = _discovery_runs(Console(ledger), policy)  # type: ignore[arg-type]
    # Then the newest three, with their figures, and no cursor
    assert len(shown) == STATUS_DISCOVERY_RUNS == 3
    assert [r["stop_reason"] for r in shown] == [COMPLETE] * 3
    assert shown[-1]["scanned"] == 12
    assert all("cursor" not in key for run in shown for key in run)
    assert _discovery_runs(Console(ledger), Policy(name="other")) == []  # type: ignore[arg-type]


def test_rows_whose_ids_break_the_id_rule_are_rejected_and_never_written(
    source_db: SourceDb, ledger: Ledger
) -> None:
    # Given rows whose ids are dot segments, untrimmed or hold a control character, and a good one
    source_db.insert(
        [
            ("..", "exp-1", NOW),
            ("t1", ".", NOW),
            (" t1", "exp-2", NOW),
            ("t1", "exp-3 ", NOW),
            ("t1", "exp\x1b[31m-4", NOW),
            ("t1", "exp-good", NOW),
        ]
    )
    policy = policy_for()
    # When a pass reads them
    report = discover(policy, SqlSource(policy.discovery, source_db.url), DiscoveryStore(ledger))  # type: ignore[arg-type]
    # Then only the good row is a job; the others are counted with a reason naming no value
    assert (report.scanned, report.inserted, report.rejected) == (6, 1, 5)
    assert sorted(r["reason"] for r in report.rejected_sample) == sorted(
        [
            "tenant_id a dot segment, . or ..",
            "object_id a dot segment, . or ..",
            "tenant_id leading or trailing whitespace",
            "object_id leading or trailing whitespace",
            "object_id a control, invisible or line-separator character",
        ]
    )
    assert ledger.counts("exports")[JobStatus.PENDING] == 1
    assert ledger.get("exports:t1:exp-good:v1") is not None

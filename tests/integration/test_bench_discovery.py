"""`sweeper bench discovery` counts what it claims: the budgeted pass read every row once."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from sweeper_bench.discovery import run_discovery_bench
from sweeper_cli import main
from tests.conftest import PgServer

pytestmark = pytest.mark.integration


def test_the_budgeted_pass_reads_every_row_once_after_the_full_passes(pg_server: PgServer) -> None:
    # Given a source of 3,000 rows read in pages of 200 (equal due times across page borders)
    result = run_discovery_bench(
        rows=3_000,
        objects=1,
        page_size=200,
        budget_run_seconds=2.0,
        database_url=pg_server.admin_url,
        parts=("passes", "budgeted"),
    )
    sql = result["sql"]
    # Then the first pass inserted every row, the second found every row unchanged, and the
    # budgeted runs, on an emptied ledger, read each row once: the ledger holds 3,000 keys
    assert (sql["first_pass"]["inserted"], sql["second_pass"]["unchanged"]) == (3_000, 3_000)
    budgeted = sql["budgeted"]
    assert (budgeted["scanned"], budgeted["inserted"], budgeted["read_twice"]) == (3_000, 3_000, 0)
    assert (budgeted["ledger_rows"], budgeted["ledger_distinct_keys"]) == (3_000, 3_000)
    assert budgeted["every_row_once"] is True
    assert "s3" not in result
    assert len(result["load_average"]) == 3


def test_a_budget_too_short_for_one_page_is_refused() -> None:
    result = CliRunner().invoke(main, ["bench", "discovery", "--budget", "0.5"])
    assert result.exit_code == 2
    assert "--budget" in result.output


def test_the_s3_pass_is_measured_again_with_its_listing_from_memory(pg_server: PgServer) -> None:
    # Given 300 objects in the emulated bucket, listed in pages of 100
    result = run_discovery_bench(
        rows=1,
        objects=300,
        page_size=100,
        budget_run_seconds=2.0,
        database_url=pg_server.admin_url,
        parts=("s3",),
    )
    s3 = result["s3"]
    # Then the live passes inserted, then found unchanged, every object
    assert (s3["first_pass"]["inserted"], s3["second_pass"]["unchanged"]) == (300, 300)
    # and the first pass again, on an emptied ledger, inserted every object with no call to the
    # emulator: what it measures is sweeper's part alone
    again = s3["first_pass_listing_from_memory"]
    assert (again["inserted"], again["listing_calls_to_the_emulator"]) == (300, 0)

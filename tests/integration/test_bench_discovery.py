"""`sweeper bench discovery` counts what it claims: the budgeted pass read every row once."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from sweeper.cli import main
from sweeper_bench.discovery import run_discovery_bench
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

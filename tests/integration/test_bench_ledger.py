"""`sweeper bench ledger` does the cycle it reports: every round claims and settles its rows
through the production ledger, the pending set keeps its size, nothing is left leased."""

from __future__ import annotations

from sweeper_bench.ledger import run_ledger_bench
from tests.conftest import PgServer


def test_every_round_settles_its_rows_and_tops_the_pending_set_up(pg_server: PgServer) -> None:
    # Given two small ledgers, 3 claimers, pages of 7 rows, 40 rows a round, 3 rounds
    result = run_ledger_bench(
        [60, 120],
        claimers=3,
        page=7,
        rows_per_round=40,
        rounds=3,
        database_url=pg_server.admin_url,
    )
    # Then each size settled 3 x 40 rows, each once, and still holds its pending rows
    for size, figures in zip([60, 120], result["results"], strict=True):
        assert figures["rows_in_ledger"] == size
        assert figures["rows_settled"] == 120
        assert figures["statuses_at_end"] == {"pending": size, "succeeded": 120}
        assert len(figures["rounds"]) == 3
        assert all(rate > 0 for rate in figures["rounds"])
    assert result["rows_per_round"] == 40
    assert result["slowdown_largest_vs_smallest"] > 0


def test_a_round_is_never_larger_than_the_smallest_ledger(pg_server: PgServer) -> None:
    result = run_ledger_bench(
        [30, 50],
        claimers=2,
        page=10,
        rows_per_round=1000,
        rounds=1,
        database_url=pg_server.admin_url,
    )
    assert result["rows_per_round"] == 30
    assert [r["rows_settled"] for r in result["results"]] == [30, 30]

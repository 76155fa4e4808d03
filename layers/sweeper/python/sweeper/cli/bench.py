"""`sweeper bench`: benchmarks that print their figures."""

from __future__ import annotations

import click

from sweeper.cli.base import (
    database_option,
    emit,
    friendly_errors,
    json_option,
    main,
)


@main.group()
def bench() -> None:
    """Benchmarks (figures printed, never asserted by timing)."""


@bench.command("ledger")
@click.option(
    "--sizes",
    default="10000,1000000",
    show_default=True,
    help="Ledger sizes (rows) to measure, comma-separated.",
)
@click.option("--page", default=1000, type=click.IntRange(1, 10_000), help="Rows per claim.")
@click.option("--pages", default=20, type=click.IntRange(1, 1000), help="Claims measured per size.")
@database_option
@json_option
@friendly_errors
def bench_ledger(
    sizes: str, page: int, pages: int, database_url: str | None, as_json: bool
) -> None:
    """Claim-and-mark throughput with small and large ledgers: the claim costs the page."""
    from sweeper_bench.ledger import run_ledger_bench

    result = run_ledger_bench(
        [int(s) for s in sizes.split(",")], page=page, pages=pages, database_url=database_url
    )
    emit(result, as_json)


@bench.command("rate")
@click.option("--consumers", default=8, type=click.IntRange(2, 64), help="Concurrent consumers.")
@click.option("--seconds", default=20.0, type=click.FloatRange(5), help="Each scenario's length.")
@click.option(
    "--quota",
    default="15/1s",
    metavar="N/PERIOD",
    help="The vendor's quota on the short window (the long window is 5 s at the same rate). "
    "15/s is what the local AWS emulator carries on 2 cores with room to spare.",
)
@database_option
@json_option
@friendly_errors
def bench_rate(
    consumers: int, seconds: float, quota: str, database_url: str | None, as_json: bool
) -> None:
    """Close to the quota, never over it: sweeper's shared limiter against two baselines,
    then a vendor incident. Utilization, self-caused 429s, the most calls in any window."""
    from sweeper_bench.rate import run_rate_bench

    result = run_rate_bench(
        consumers=consumers, seconds=seconds, quota=quota, database_url=database_url
    )
    emit(result, as_json)

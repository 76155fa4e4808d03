"""`sweeper`: the operator's command line. Every command calls the same logic as the Lambdas."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from datetime import UTC, datetime
from functools import wraps
from typing import Any, TypeVar

import click

from sweeper.config import Quota, SweeperConfig, load_config
from sweeper.errors import SweeperError

F = TypeVar("F", bound=Callable[..., Any])

DEFAULT_CONFIG = "sweeper.toml"


def _friendly_errors[F: Callable[..., Any]](fn: F) -> F:
    """A SweeperError becomes a one-line message and exit code 2, never a traceback."""

    @wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except SweeperError as exc:
            raise click.ClickException(f"{type(exc).__name__}: {exc}") from exc

    return wrapper  # type: ignore[return-value]


database_option = click.option(
    "--database-url",
    envvar=["DATABASE_URL", "SWEEPER_DATABASE_URL"],
    show_envvar=True,
    help="PostgreSQL URL of the ledger.",
)
config_option = click.option(
    "--config",
    "config_path",
    envvar="SWEEPER_CONFIG",
    show_envvar=True,
    default=DEFAULT_CONFIG,
    show_default=True,
    type=click.Path(dir_okay=False),
    help="The policy file (TOML).",
)
json_option = click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")


def _emit(data: dict[str, Any], as_json: bool) -> None:
    if as_json:
        click.echo(json.dumps(data, default=str))
        return
    width = max(len(k) for k in data)
    for key, value in data.items():
        click.echo(f"{key.ljust(width)}  {value}")


@click.group(context_settings={"help_option_names": ["-h", "--help"], "show_default": True})
@click.version_option(package_name="sweeper")
def main() -> None:
    """sweeper: scheduled cleanup obligations against a rate-limited API, none lost, none twice."""


@main.command()
@click.option("--jobs", default=500, type=click.IntRange(1, 1_000_000), help="Obligations to seed.")
@click.option(
    "--tenants", default=5, type=click.IntRange(1, 100_000), help="Tenants to spread them over."
)
@click.option(
    "--consumers",
    default=4,
    type=click.IntRange(2, 64),
    help="Consumer concurrency (the event source's maximum concurrency).",
)
@click.option(
    "--batch-size", default=10, type=click.IntRange(1, 10), help="Records per consumer batch."
)
@click.option(
    "--rate",
    default=None,
    metavar="N/PERIOD",
    help="The vendor's quota for the default scope, e.g. 40/1s (simulator and limiter).",
)
@database_option
@click.option(
    "--api-url",
    envvar="SWEEPER_API_URL",
    show_envvar=True,
    help="An external vendor speaking the same contract, instead of the simulator.",
)
@click.option(
    "--timeout",
    "timeout_seconds",
    default=300.0,
    type=click.FloatRange(1),
    help="Give up after this many seconds.",
)
@json_option
@_friendly_errors
def demo(
    jobs: int,
    tenants: int,
    consumers: int,
    batch_size: int,
    rate: str | None,
    database_url: str | None,
    api_url: str | None,
    timeout_seconds: float,
    as_json: bool,
) -> None:
    """Run the whole pipeline locally (PostgreSQL, moto, vendor simulator) and report.

    Exits 0 only when every obligation is final.
    """
    from sweeper.local.demo import DemoOptions, run_demo

    options = DemoOptions(
        jobs=jobs,
        tenants=tenants,
        consumers=consumers,
        batch_size=batch_size,
        database_url=database_url,
        api_url=api_url.rstrip("/") if api_url else None,
        rate=Quota.parse(rate) if rate else None,
        timeout_seconds=timeout_seconds,
    )
    if as_json or not sys.stderr.isatty():
        report = run_demo(options)
    else:
        with click.progressbar(length=jobs, label="settling", file=sys.stderr) as bar:
            seen = [0]

            def progress(done: int, total: int) -> None:
                bar.update(done - seen[0])
                seen[0] = done

            report = run_demo(options, progress)
    _emit(report.as_dict(), as_json)
    if not report.all_final:
        sys.exit(1)


@main.command()
@database_option
@_friendly_errors
def migrate(database_url: str | None) -> None:
    """Apply the ledger's pending migrations (safe to run concurrently)."""
    from sweeper.ledger.migrate import current_version
    from sweeper.ledger.migrate import migrate as apply

    if not database_url:
        raise click.UsageError("--database-url or DATABASE_URL is required")
    applied = apply(database_url)
    click.echo(f"applied {applied or 'nothing'}; schema version {current_version(database_url)}")


@main.command()
@click.argument("source", type=click.File("r", encoding="utf-8"), default="-")
@click.option(
    "--policy", "policy_name", required=True, help="The policy the obligations belong to."
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["csv", "jsonl"]),
    default=None,
    help="Input format (default: from the file name, else jsonl).",
)
@config_option
@database_option
@json_option
@_friendly_errors
def schedule(
    source: Any,
    policy_name: str,
    fmt: str | None,
    config_path: str,
    database_url: str | None,
    as_json: bool,
) -> None:
    """Add obligations from CSV (tenant_id,object_id[,due_at]) or JSON lines; idempotent.

    A repeat never duplicates an obligation and can only move its due time earlier.
    """
    from sweeper.ledger.store import Ledger
    from sweeper.scheduling import parse_jobs, schedule_jobs

    if not database_url:
        raise click.UsageError("--database-url or DATABASE_URL is required")
    config: SweeperConfig = load_config(config_path)
    policy = config.policy(policy_name)
    chosen = fmt or ("csv" if str(getattr(source, "name", "")).endswith(".csv") else "jsonl")
    now = datetime.now(UTC)
    ledger = Ledger(database_url)
    try:
        result = schedule_jobs(ledger, policy, parse_jobs(source, chosen, now), now)  # type: ignore[arg-type]
    finally:
        ledger.close()
    _emit(
        {
            "policy": policy.name,
            "inserted": result.inserted,
            "moved_earlier": result.moved_earlier,
            "unchanged": result.unchanged,
        },
        as_json,
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
@_friendly_errors
def bench_ledger(
    sizes: str, page: int, pages: int, database_url: str | None, as_json: bool
) -> None:
    """Claim-and-mark throughput with small and large ledgers: the claim costs the page."""
    from sweeper_bench.ledger import run_ledger_bench

    result = run_ledger_bench(
        [int(s) for s in sizes.split(",")], page=page, pages=pages, database_url=database_url
    )
    _emit(result, as_json)

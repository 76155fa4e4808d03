"""Keeping the ledger and the account right: `migrate`, `prune`, `doctor`."""

from __future__ import annotations

import sys
from typing import Any

import click

from sweeper.operator_api.requests import MAX_PRUNE_AGE_DAYS
from sweeper_cli.base import (
    actor_option,
    config_option,
    current_time,
    database_option,
    emit,
    execute,
    friendly_errors,
    interactive,
    json_option,
    main,
    policy_option,
    progress_bar,
    target_options,
    through_api,
)

#: Whether the migrations' record exists yet (NULL on a database never migrated), so the read
#: below is never run against a missing table.
SELECT_VERSION_TABLE = "SELECT to_regclass('sweeper_schema_version')"
#: The highest migration applied, 0 when the record holds none.
SELECT_CURRENT_VERSION = "SELECT coalesce(max(version), 0) FROM sweeper_schema_version"


@main.command()
@database_option
@friendly_errors
def migrate(database_url: str | None) -> None:
    """Apply the ledger's pending migrations (safe to run concurrently)."""
    from sweeper.ledger.migrate import migrate as apply

    if not database_url:
        raise click.UsageError(
            "--database-url or DATABASE_URL is required", click.get_current_context()
        )
    applied = apply(database_url)
    click.echo(f"applied {applied or 'nothing'}; schema version {current_version(database_url)}")


@main.command()
@click.option(
    "--older-than-days",
    required=True,
    type=click.FloatRange(1, MAX_PRUNE_AGE_DAYS),
    help="Delete settled jobs completed (and runs scheduled) more than this many days ago.",
)
@policy_option
@click.option(
    "--batch-rows", default=1000, type=click.IntRange(1, 50_000), help="Rows per transaction."
)
@click.option(
    "--reason",
    required=True,
    help="Why, as recorded in the ledger before anything is deleted (no customer data).",
)
@actor_option
@target_options
@json_option
@friendly_errors
def prune(
    older_than_days: float,
    policy_name: str | None,
    batch_rows: int,
    reason: str,
    actor: str,
    as_json: bool,
    **target: Any,
) -> None:
    """Metadata retention: delete old settled rows in small batches, each its own short
    transaction (SKIP LOCKED, so it never waits on live work). All policies unless --policy.

    Failed jobs (obligations not fulfilled) are kept for their policy's
    retention.failed_job_days whatever --older-than-days says. Recorded before the first
    batch, then batch by batch."""
    from sweeper.operator_api.requests import PruneRequest

    request = PruneRequest(
        older_than_days=older_than_days,
        policy=policy_name,
        batch_rows=batch_rows,
        reason=reason,
    )
    if interactive(as_json) and not through_api():
        click.echo(f"pruning (batches of {batch_rows})", err=True)
    with progress_bar(as_json or through_api(), 0, "pruning") as advance:
        report = execute(request, target=target, actor=actor, progress=advance)
    emit(report, as_json)


@main.command()
@click.option(
    "--stack",
    envvar="SWEEPER_STACK",
    show_envvar=True,
    default="Sweeper",
    help="The stack to deploy to; when it exists, its state is checked too.",
)
@click.option("--region", envvar="AWS_REGION", show_envvar=True, help="AWS region.")
@click.option("--profile", envvar="AWS_PROFILE", show_envvar=True, help="AWS profile.")
@config_option
@json_option
@friendly_errors
def doctor(
    stack: str, region: str | None, profile: str | None, config_path: str, as_json: bool
) -> None:
    """Preflight before a deploy: what in this account would make it fail, each with its fix.

    Exits 1 when a check fails (warnings alone exit 0).
    """
    from sweeper_tools.doctor import aws_clients, render, run_doctor

    client, region_name = aws_clients(region, profile)
    results = run_doctor(
        client,
        region=region_name,
        config_path=config_path,
        stack=stack,
        today=current_time().date(),
    )
    click.echo(render(results, as_json))
    if any(r.status == "fail" for r in results):
        sys.exit(1)


def current_version(conninfo: str) -> int:
    """The highest applied migration, 0 for an empty database."""
    from sweeper.ledger.migrate import connect

    with connect(conninfo) as conn:
        exists = conn.execute(SELECT_VERSION_TABLE).fetchone()
        if exists is None or exists[0] is None:
            return 0
        row = conn.execute(SELECT_CURRENT_VERSION).fetchone()
        return int(row[0]) if row else 0

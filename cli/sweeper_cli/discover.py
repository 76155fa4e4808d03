"""`sweeper discover`: one discovery pass now, the same logic the discovery function runs."""

from __future__ import annotations

import json
import sys
from typing import Any

import click

from sweeper_cli.base import (
    current_time,
    emit,
    friendly_errors,
    json_option,
    main,
    open_console,
    policy_option,
    target_options,
)


@main.command()
@policy_option
@click.option(
    "--source-url",
    envvar="SWEEPER_SOURCE_DATABASE_URL",
    show_envvar=True,
    help="PostgreSQL URL of the system of record (an sql source, run here; a read-only user).",
)
@click.option(
    "--budget",
    "budget_seconds",
    type=click.FloatRange(min=1),
    default=None,
    help="Stop starting pages after this many seconds (default: the policy's budget).",
)
@target_options
@json_option
@friendly_errors
def discover(
    policy_name: str | None,
    source_url: str | None,
    budget_seconds: float | None,
    as_json: bool,
    **target: Any,
) -> None:
    """Run one discovery pass of the policy now (or its budget's share; the next run resumes).

    With a ledger (--database-url, or the local stack) the pass runs here; otherwise the
    deployed stack's discovery function is invoked. Exits 1 when the source could not be read.
    """
    import time

    from sweeper.config import S3Discovery
    from sweeper.discovery.rows import Source
    from sweeper.discovery.run import SOURCE_ERROR, run_discovery
    from sweeper.discovery.s3 import S3Source
    from sweeper.discovery.sql import SqlSource
    from sweeper.discovery.store import DiscoveryStore
    from sweeper.endpoints import pascal_case
    from sweeper.errors import DiscoveryFailedError, OperatorError
    from sweeper_tools.discovery_invoke import invoke_discovery

    with open_console(**target) as console:
        policy = console.policy(policy_name)
        config = policy.discovery
        if config is None:
            raise click.UsageError(
                f"policy {policy.name} has no [policies.discovery] in {target['config_path']}"
            )
        if console.endpoints.database_url is None:
            outputs = console.endpoints.outputs()
            function = outputs.get(f"{pascal_case(policy.name)}DiscoveryFunctionName")
            if function is None:
                raise OperatorError(
                    f"stack {console.endpoints.stack!r} has no discovery function for "
                    f"{policy.name}; deploy it, or pass --database-url to run the pass here"
                )
            report = invoke_discovery(
                console.endpoints.lambda_client(),
                function,
                policy.name,
                current_time(),
                region=console.endpoints.region,
            )
        else:
            source: Source
            if isinstance(config, S3Discovery):
                source = S3Source(config, console.endpoints.s3())
            else:
                if not source_url:
                    raise click.UsageError(
                        "an sql source needs --source-url (or SWEEPER_SOURCE_DATABASE_URL): the "
                        "system of record's URL, for a read-only user"
                    )
                source = SqlSource(config, source_url)
            started = time.monotonic()
            budget = budget_seconds or config.budget_seconds
            try:
                result = run_discovery(
                    policy,
                    source,
                    DiscoveryStore(console.ledger),
                    scheduled_at=current_time(),
                    clock=current_time,
                    remaining_seconds=lambda: budget - (time.monotonic() - started),
                )
                report = result.as_dict()
            except DiscoveryFailedError as exc:
                report = exc.report.as_dict() if hasattr(exc.report, "as_dict") else {}
            finally:
                if isinstance(source, SqlSource):
                    source.close()
    if as_json:
        click.echo(json.dumps(report, default=str))
    else:
        emit(report, as_json=False)
    if report.get("stop_reason") == SOURCE_ERROR:
        click.echo(f"discovery failed: {report.get('error')}", err=True)
        sys.exit(1)

"""`sweeper redrive`: dead letters back to the work queue, as the redrive function does."""

from __future__ import annotations

import sys
from typing import Any

import click

from sweeper_cli.base import (
    OUTCOMES,
    current_time,
    emit,
    friendly_errors,
    json_option,
    main,
    open_console,
    policy_option,
    progress_bar,
    target_options,
)


@main.command()
@policy_option
@click.option("--tenant", "tenant_id", help="Only this tenant's jobs.")
@click.option("--scope", help="Only jobs of this limiter scope.")
@click.option(
    "--outcome",
    "outcomes",
    multiple=True,
    type=click.Choice(OUTCOMES),
    help="Only jobs whose last outcome is this class (repeatable).",
)
@click.option("--max", "max_messages", type=click.IntRange(1), help="Move at most this many.")
@click.option(
    "--rate",
    "rate_per_second",
    type=click.FloatRange(0, 1000, min_open=True),
    help="Moves per second (default: the policy's quota rate).",
)
@click.option("--dry-run", is_flag=True, help="Report what would move; change nothing.")
@click.option(
    "--include-terminal",
    is_flag=True,
    help="Also retry terminal jobs (fresh attempt budget, recorded) and move their messages.",
)
@click.option(
    "--budget",
    "budget_seconds",
    default=600.0,
    type=click.FloatRange(10),
    help="Stop moving after this many seconds.",
)
@target_options
@json_option
@friendly_errors
def redrive(
    policy_name: str | None,
    tenant_id: str | None,
    scope: str | None,
    outcomes: tuple[str, ...],
    max_messages: int | None,
    rate_per_second: float | None,
    dry_run: bool,
    include_terminal: bool,
    budget_seconds: float,
    as_json: bool,
    **target: Any,
) -> None:
    """Move dead letters back to the work queue, as the redrive function does on demand.

    Settled jobs' letters are dropped; terminal jobs' stay (unless --include-terminal); letters
    of scopes whose gate is closed stay. Exits 1 when some letter could not be handled.
    """
    import time

    from sweeper.dead_letters import SqsDeadLetterQueue
    from sweeper.errors import OperatorError
    from sweeper.models import OutcomeClass
    from sweeper.redrive import RedriveReport, RedriveRequest, run_redrive

    with open_console(**target) as console:
        policy = console.policy(policy_name)
        where = console.endpoints.policy(policy.name)
        gate = console.gate()
        if where.queue_url is None or where.dlq_url is None or gate is None:
            raise OperatorError(f"the target has no queue, DLQ or limiter table for {policy.name}")
        request = RedriveRequest(
            policy=policy.name,
            tenant_id=tenant_id,
            scope=scope,
            outcome=[OutcomeClass(o) for o in outcomes] or None,
            max_messages=max_messages,
            rate_per_second=rate_per_second,
            dry_run=dry_run,
            include_terminal=include_terminal,
        )
        dlq = SqsDeadLetterQueue(console.endpoints.sqs(), where.dlq_url, where.queue_url)
        deadline = time.monotonic() + budget_seconds
        with progress_bar(as_json, dlq.depth(), "redriving") as advance:

            def progress(report: RedriveReport) -> None:
                advance(report.examined + report.errors)

            report = run_redrive(
                request,
                console.ledger,
                dlq,
                gate,
                policy=policy.name,
                clock=current_time,
                remaining_seconds=lambda: deadline - time.monotonic(),
                default_rate_per_second=policy.quota.rate_per_second,
                progress=progress,
            )
    emit(report.as_dict(), as_json)
    if report.errors:
        click.echo(
            f"{report.errors} dead letter(s) could not be read or matched to a job; they stay "
            "in the DLQ (see `sweeper inspect` and the logs)",
            err=True,
        )
        sys.exit(1)

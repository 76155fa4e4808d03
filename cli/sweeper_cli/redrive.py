"""`sweeper redrive`: dead letters back to the work queue, as the redrive function does."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

import click

from sweeper.operator_api.requests import MAX_REDRIVE_MESSAGES
from sweeper_cli.base import (
    OUTCOMES,
    actor_option,
    emit,
    execute,
    friendly_errors,
    json_option,
    main,
    open_console,
    policy_option,
    progress_bar,
    target_options,
    through_api,
)

if TYPE_CHECKING:
    from sweeper.operator_api.backend import Backend


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
@click.option(
    "--max",
    "max_messages",
    type=click.IntRange(1, MAX_REDRIVE_MESSAGES),
    help="Move at most this many.",
)
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
    type=click.FloatRange(10, 3600),
    help="Stop moving after this many seconds.",
)
@actor_option
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
    actor: str,
    as_json: bool,
    **target: Any,
) -> None:
    """Move dead letters back to the work queue, as the redrive function does on demand.

    Settled jobs' letters are dropped; terminal jobs' stay (unless --include-terminal); letters
    of scopes whose gate is closed, and of jobs whose time has not come, stay. Exits 1 when
    some letter could not be handled.
    """
    from sweeper.models import OutcomeClass
    from sweeper.operator_api.requests import RedriveCommand

    request = RedriveCommand(
        policy=policy_name,
        tenant_id=tenant_id,
        scope=scope,
        outcomes=tuple(OutcomeClass(o) for o in outcomes) or None,
        max_messages=max_messages,
        rate_per_second=rate_per_second,
        dry_run=dry_run,
        include_terminal=include_terminal,
        budget_seconds=budget_seconds,
    )
    if through_api():
        report = execute(request, target=target)
    else:
        with open_console(**target) as console:
            total = dlq_depth(console.backend(), policy_name)
            with progress_bar(as_json, total, "redriving") as advance:
                report = execute(request, target=target, actor=actor, progress=advance)
    emit(report, as_json)
    if report["errors"]:
        click.echo(
            f"{report['errors']} dead letter(s) could not be read or matched to a job; they stay "
            "in the DLQ (see `sweeper inspect` and the logs)",
            err=True,
        )
        sys.exit(1)


def dlq_depth(backend: Backend, policy_name: str | None) -> int:
    """Messages in the policy's DLQ (the direct path's progress bar length)."""
    from sweeper.redrive.letters import queue_depth

    where = backend.endpoints.policy(backend.policy(policy_name).name)
    if where.dlq_url is None:
        return 0
    return queue_depth(backend.endpoints.sqs(), where.dlq_url)[0]

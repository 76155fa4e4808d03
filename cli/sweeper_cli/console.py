"""The operator's console: `status`, `pause`, `resume`, `inspect`."""

from __future__ import annotations

import json
from typing import Any

import click

from sweeper.operator_api.requests import MAX_ROWS, MAX_STUCK_AFTER_SECONDS
from sweeper_cli.base import (
    actor_option,
    consumer_function_option,
    emit,
    execute,
    friendly_errors,
    json_option,
    main,
    policy_option,
    reason_option,
    target_options,
)
from sweeper_cli.failures import print_failures
from sweeper_cli.shares import share_line


@main.command()
@policy_option
@target_options
@json_option
@friendly_errors
def status(policy_name: str | None, as_json: bool, **target: Any) -> None:
    """Per policy: jobs by status (held ones too), the jobs retrying by outcome class and code
    (how many, the oldest), the scopes closed (until, why), oldest eligible age, in flight,
    queue and DLQ depth, gates, the closed keys of further limits (name, key, until, why), and
    the last runs."""
    from sweeper.operator_api.requests import StatusRequest

    data = execute(StatusRequest(policy=policy_name), target=target)
    if as_json:
        click.echo(json.dumps(data, default=str))
        return
    for item in data["policies"]:
        _print_status(item)


def _print_status(item: dict[str, Any]) -> None:
    paused = f"PAUSED since {item['paused_at']} by {item['paused_by']}" if item["paused"] else ""
    click.echo(f"policy {item['policy']}  {paused}".rstrip())
    counts = "  ".join(f"{k} {v}" for k, v in item["counts"].items())
    click.echo(f"  jobs            {counts}")
    print_failures(item)
    click.echo(f"  oldest eligible {item['oldest_eligible_age_seconds'] or 0:.1f} s")
    on_consumers = item["leased_in_flight"]
    click.echo(f"  leased          {on_consumers} on consumers (what the producer's budget counts)")
    next_run = item["next_run"] or "unknown (no scheduled run recorded yet)"
    click.echo(f"  next run        {next_run}  ({item['schedule']}; `sweeper release` runs it now)")
    for name in ("queue", "dlq", "intake", "intake_dlq"):
        queue = item.get(name)
        if queue is not None:
            click.echo(f"  {name:<15} {queue['messages']} ({queue['in_flight']} in flight)")
    for gate in item["gates"]:
        state = (
            f"CLOSED until {gate['reopens_at']} ({gate['reason']})" if gate["closed"] else "open"
        )
        click.echo(f"  gate {gate['scope']:<10} {state}; {gate['unsettled_jobs']} unsettled")
        if gate.get("share"):
            click.echo(f"       {'':<10} {share_line(gate['share'])}")
    for closure in item.get("closed_limits") or []:
        click.echo(
            f"  limit {closure['limit']:<9} {closure['key']} CLOSED until "
            f"{closure['reopens_at']} ({closure['reason']}: {closure['why'] or 'unknown'})"
        )
    if item.get("closed_limits_unlisted"):
        click.echo(f"  limit ... and {item['closed_limits_unlisted']} more closed keys")
    for run in item["runs"]:
        click.echo(
            f"  run {run['scheduled_at']}  published {run['published']}/{run['discovered']}"
            f"  {run['stop_reason']}  batch {run['batch_id']}"
        )
    for run in item.get("discovery_runs", []):
        click.echo(
            f"  discovery {run['started_at']}  {run['source']} pass {run['pass_number']}: "
            f"scanned {run['scanned']}, inserted {run['inserted']}, moved earlier "
            f"{run['moved_earlier']}, rejected {run['rejected']}  {run['stop_reason']}"
        )


@main.command()
@policy_option
@reason_option
@actor_option
@consumer_function_option
@target_options
@json_option
@friendly_errors
def pause(
    policy_name: str | None,
    reason: str | None,
    actor: str,
    consumer_function: str | None,
    as_json: bool,
    **target: Any,
) -> None:
    """Pause a policy: the producer skips (recording each skipped run), consumers stop, queued
    messages are kept. Undo with `resume`; release the skipped runs with `catch-up`."""
    from sweeper.operator_api.requests import PauseRequest

    request = PauseRequest(policy=policy_name, reason=reason)
    emit(execute(request, target=target, actor=actor, consumer_function=consumer_function), as_json)


@main.command()
@policy_option
@reason_option
@actor_option
@consumer_function_option
@target_options
@json_option
@friendly_errors
def resume(
    policy_name: str | None,
    reason: str | None,
    actor: str,
    consumer_function: str | None,
    as_json: bool,
    **target: Any,
) -> None:
    """Resume a paused policy: consumers first, then the producer."""
    from sweeper.operator_api.requests import ResumeRequest

    request = ResumeRequest(policy=policy_name, reason=reason)
    emit(execute(request, target=target, actor=actor, consumer_function=consumer_function), as_json)


@main.command()
@policy_option
@click.option(
    "--stuck-after",
    "stuck_after_seconds",
    default=3600.0,
    type=click.FloatRange(0, MAX_STUCK_AFTER_SECONDS),
    help="A pending job overdue by this many seconds counts as stuck (at most a year).",
)
@click.option("--limit", default=100, type=click.IntRange(1, MAX_ROWS), help="Rows per kind.")
@target_options
@json_option
@friendly_errors
def inspect(
    policy_name: str | None,
    stuck_after_seconds: float,
    limit: int,
    as_json: bool,
    **target: Any,
) -> None:
    """Terminal, stuck and held jobs: outcome class, error code, attempts and times (a held
    job's hold time and reason); first, the jobs retrying by class and code and the closed
    scopes. No customer data."""
    from sweeper.operator_api.requests import InspectRequest

    request = InspectRequest(
        policy=policy_name, stuck_after_seconds=stuck_after_seconds, limit=limit
    )
    data = execute(request, target=target)
    if as_json:
        click.echo(json.dumps(data, default=str))
        return
    rows = data["jobs"]
    print_failures(data, indent="")
    if not rows:
        click.echo(f"policy {data['policy']}: no terminal, stuck or held jobs")
    for row in rows:
        click.echo(
            f"{row['kind']:<8} {row['status']:<7} {row['outcome'] or '-':<9} "
            f"{row['error_code'] or '-':<14} attempts {row['attempts']:<3} "
            f"updated {row['updated_at']}  {row['operation_key']}"
            + (f"  trace {row['trace_id']}" if row.get("trace_id") else "")
        )

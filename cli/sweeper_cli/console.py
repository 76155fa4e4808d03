"""The operator's console: `status`, `pause`, `resume`, `inspect`."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import click

from sweeper.config import Policy
from sweeper_cli.base import (
    Console,
    actor_option,
    consumer_function_option,
    current_time,
    emit,
    friendly_errors,
    json_option,
    main,
    next_run_at,
    open_console,
    policy_option,
    reason_option,
    target_options,
)


@main.command()
@policy_option
@target_options
@json_option
@friendly_errors
def status(policy_name: str | None, as_json: bool, **target: Any) -> None:
    """Per policy: jobs by status, oldest eligible age, in flight, queue and DLQ depth, gates
    (closed ones with their reopening time), and the last runs."""
    from sweeper.dead_letters import queue_depth
    from sweeper.operator import policy_status

    with open_console(**target) as console:
        policies = (
            [console.policy(policy_name)] if policy_name is not None else console.config.policies
        )
        sqs = console.endpoints.sqs()
        gate = console.gate()
        found = []
        for policy in policies:
            where = console.endpoints.policy(policy.name)
            item = policy_status(
                policy,
                console.ledger,
                now=current_time(),
                depth=lambda url: queue_depth(sqs, url),
                queue_url=where.queue_url,
                dlq_url=where.dlq_url,
                gate=gate,
            ).as_dict()
            for name, url in (
                ("intake", where.intake_queue_url),
                ("intake_dlq", where.intake_dlq_url),
            ):
                if url is None:
                    item[name] = None
                else:
                    messages, in_flight = queue_depth(sqs, url)
                    item[name] = {"messages": messages, "in_flight": in_flight}
            at = next_run_at(console, policy)
            item["schedule"] = policy.schedule
            item["next_run"] = None if at is None else at.isoformat()
            item["discovery_runs"] = _discovery_runs(console, policy)
            found.append(item)
    if as_json:
        click.echo(json.dumps({"target": console.endpoints.mode, "policies": found}, default=str))
        return
    for item in found:
        _print_status(item)


#: Discovery runs `status` shows per policy with discovery.
STATUS_DISCOVERY_RUNS = 3


def _discovery_runs(console: Console, policy: Policy) -> list[dict[str, Any]]:
    """The last discovery runs: counts, stop reason, time; no cursor (it holds source ids)."""
    from sweeper.discovery.store import DiscoveryStore

    if policy.discovery is None:
        return []
    return [
        {
            "run_id": run.run_id,
            "source": run.source,
            "started_at": run.started_at,
            "pass_number": run.pass_number,
            "scanned": run.scanned,
            "inserted": run.inserted,
            "moved_earlier": run.moved_earlier,
            "unchanged": run.unchanged,
            "rejected": run.rejected,
            "elapsed_seconds": run.elapsed_seconds,
            "stop_reason": run.stop_reason,
        }
        for run in DiscoveryStore(console.ledger).runs(policy.name, STATUS_DISCOVERY_RUNS)
    ]


def _print_status(item: dict[str, Any]) -> None:
    paused = f"PAUSED since {item['paused_at']} by {item['paused_by']}" if item["paused"] else ""
    click.echo(f"policy {item['policy']}  {paused}".rstrip())
    counts = "  ".join(f"{k} {v}" for k, v in item["counts"].items())
    click.echo(f"  jobs            {counts}")
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


def _switch(console: Console, policy: Policy, consumer_function: str | None) -> Any:
    """The consumer's event source mappings on AWS; None locally (the stack polls the flag)."""
    from sweeper.pause_switch import EventSourceSwitch

    if console.endpoints.mode == "local":
        return None
    name = consumer_function or console.endpoints.policy(policy.name).consumer_function
    if not name:
        raise click.UsageError(
            "no consumer function in the stack outputs: pass --consumer-function"
        )
    return EventSourceSwitch(console.endpoints.lambda_client(), name)


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
    from sweeper.operator import pause_policy

    _turn(pause_policy, policy_name, reason, actor, consumer_function, as_json, target)


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
    from sweeper.operator import resume_policy

    _turn(resume_policy, policy_name, reason, actor, consumer_function, as_json, target)


def _turn(
    operation: Callable[..., Any],
    policy_name: str | None,
    reason: str | None,
    actor: str,
    consumer_function: str | None,
    as_json: bool,
    target: dict[str, Any],
) -> None:
    """Pause or resume (`operation`) one policy through its consumer switch, and report."""
    with open_console(**target) as console:
        policy = console.policy(policy_name)
        switch = _switch(console, policy, consumer_function)
        result = operation(
            policy.name, console.ledger, switch, actor=actor, reason=reason, now=current_time()
        )
    emit(result.as_dict(), as_json)


@main.command()
@policy_option
@click.option(
    "--stuck-after",
    "stuck_after_seconds",
    default=3600.0,
    type=click.FloatRange(0),
    help="A pending job overdue by this many seconds counts as stuck.",
)
@click.option("--limit", default=100, type=click.IntRange(1, 10_000), help="Rows per kind.")
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
    """Terminal and stuck jobs: outcome class, error code, attempts and times; no customer data."""
    from sweeper.operator import inspect_jobs

    with open_console(**target) as console:
        policy = console.policy(policy_name)
        rows = inspect_jobs(
            policy.name,
            console.ledger,
            now=current_time(),
            stuck_after=timedelta(seconds=stuck_after_seconds),
            limit=limit,
        )
    if as_json:
        click.echo(json.dumps({"policy": policy.name, "jobs": rows}, default=str))
        return
    if not rows:
        click.echo(f"policy {policy.name}: no terminal or stuck jobs")
    for row in rows:
        click.echo(
            f"{row['kind']:<8} {row['status']:<7} {row['outcome'] or '-':<9} "
            f"{row['error_code'] or '-':<14} attempts {row['attempts']:<3} "
            f"updated {row['updated_at']}  {row['operation_key']}"
            + (f"  trace {row['trace_id']}" if row.get("trace_id") else "")
        )

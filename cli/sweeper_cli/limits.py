"""`sweeper limits show` and `sweeper limits set`: the policy's limits, and an operator's live
change to one (sweeper.operator_api.limits), directly or through the operator API (`--stack`)."""

from __future__ import annotations

import json
from typing import Any

import click

from sweeper_cli.base import (
    actor_option,
    execute,
    friendly_errors,
    json_option,
    main,
    policy_option,
    target_options,
)


@main.group()
def limits() -> None:
    """The policy's limits: as told, as changed live, and closed."""


@limits.command("show")
@policy_option
@target_options
@json_option
@friendly_errors
def show(policy_name: str | None, as_json: bool, **target: Any) -> None:
    """Each limit: its key template, told rate, live change (who, why) and closed keys."""
    from sweeper.operator_api.requests import LimitsShowRequest

    data = execute(LimitsShowRequest(policy=policy_name), target=target)
    if as_json:
        click.echo(json.dumps(data, default=str))
        return
    for limit in data["limits"]:
        live = limit["live"]
        change = "none"
        if live is not None:
            state = "paused" if live["paused"] else f"rate {live['live_rate']}"
            change = f"{state} by {live['actor']} ({live['reason']})"
        closed = ", ".join(limit["closed_keys"]) or "none"
        click.echo(
            f"{data['policy']} {limit['limit']} [{limit['key']}]: told {limit['told_rate']}, "
            f"live {change}, closed {closed}"
        )


@limits.command("set")
@policy_option
@click.option("--limit", "limit_name", required=True, help="The limit's name in the policy.")
@click.option("--rate", help="A live rate N/T (e.g. 5/1s), at most the told one.")
@click.option("--pause", is_flag=True, help="No call under this limit until --resume.")
@click.option("--resume", is_flag=True, help="Lift a live pause (a live rate stays).")
@click.option("--reset", is_flag=True, help="Back to the told rate, unpaused.")
@click.option("--above-told", is_flag=True, help="Allow a --rate above the told quota.")
@click.option("--reason", required=True, help="Why, as recorded in the ledger (no customer data).")
@actor_option
@target_options
@json_option
@friendly_errors
def set_limit(
    policy_name: str | None,
    limit_name: str,
    rate: str | None,
    pause: bool,
    resume: bool,
    reset: bool,
    above_told: bool,
    reason: str,
    actor: str,
    as_json: bool,
    **target: Any,
) -> None:
    """Change one limit for every consumer, in force within a second; recorded with who and why."""
    from sweeper.operator_api.requests import LimitsSetRequest

    if sum([rate is not None, pause, resume, reset]) != 1:
        raise click.UsageError("give exactly one of --rate N/T, --pause, --resume or --reset")
    request = LimitsSetRequest(
        policy=policy_name,
        limit=limit_name,
        live_rate=rate,
        pause=pause,
        resume=resume,
        reset=reset,
        above_told=above_told,
        reason=reason,
    )
    data = execute(request, target=target, actor=actor)
    if as_json:
        click.echo(json.dumps(data, default=str))
        return
    now = data["now"]
    state = (
        "told rate" if now is None else ("paused" if now["paused"] else f"rate {now['live_rate']}")
    )
    click.echo(
        f"policy {data['policy']} limit {data['limit']}: {state}, in force within "
        f"{data['in_force_within_seconds']:g}s"
    )

"""The per-batch audit: `runs`."""

from __future__ import annotations

import json
import re
from datetime import datetime, timedelta
from typing import Any

import click

from sweeper_cli.base import (
    current_time,
    execute,
    friendly_errors,
    json_option,
    main,
    parse_time,
    policy_option,
    target_options,
)

#: `--since` as a look-back: a number and m, h or d (`12h`, `7d`).
_LOOKBACK_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([mhd])\s*$")
_LOOKBACK_UNITS = {"m": "minutes", "h": "hours", "d": "days"}
DEFAULT_SINCE = "24h"


def since_time(value: str, now: datetime) -> datetime:
    """`--since`: an ISO 8601 time with a zone, or a look-back such as `12h` or `7d`."""
    lookback = _LOOKBACK_RE.match(value)
    if lookback:
        return now - timedelta(**{_LOOKBACK_UNITS[lookback[2]]: float(lookback[1])})
    try:
        return parse_time(value, "--since")
    except click.BadParameter as exc:
        raise click.BadParameter(
            f"{value!r} is neither an ISO 8601 time with a zone nor a look-back like 12h or 7d",
            param_hint="--since",
        ) from exc


@main.command()
@policy_option
@click.option(
    "--since",
    default=DEFAULT_SINCE,
    show_default=True,
    help="Batches scheduled at or after this: an ISO 8601 time with a zone, or a look-back "
    "such as 12h or 7d.",
)
@click.option(
    "--limit", default=500, show_default=True, type=click.IntRange(1, 10_000), help="At most."
)
@target_options
@json_option
@friendly_errors
def runs(policy_name: str | None, since: str, limit: int, as_json: bool, **target: Any) -> None:
    """Per batch, newest first: discovered, published, consumed, succeeded, retried, snoozed,
    terminal, cancelled, held, duplicates, not yet due, still in flight, oldest age at release
    and time to drain. Each batch's jobs reconcile: published - resent = succeeded + terminal +
    cancelled + held + in flight."""
    from types import SimpleNamespace

    from sweeper.operator_api.requests import RunsRequest

    start = since_time(since, current_time())
    data = execute(RunsRequest(policy=policy_name, since=start, limit=limit), target=target)
    if as_json:
        click.echo(json.dumps(data, default=str))
        return
    batches = [SimpleNamespace(**b) for b in data["batches"]]
    click.echo(f"policy {data['policy']}: {len(batches)} batch(es) since {data['since']}")
    for b in batches:
        drain = (
            f"drained in {b.time_to_drain_seconds:g}s"
            if b.time_to_drain_seconds is not None
            else f"{b.in_flight} in flight"
        )
        age = b.oldest_age_at_release_seconds
        click.echo(
            f"  {b.scheduled_at}  batch {b.batch_id}  {b.stop_reason or 'running'}  "
            f"discovered {b.discovered}  published {b.published} (resent {b.resent})  "
            f"consumed {b.consumed}  succeeded {b.succeeded}  retried {b.retried}  "
            f"snoozed {b.snoozed}  "
            f"terminal {b.terminal}  cancelled {b.cancelled}  held {b.held}  "
            f"duplicates {b.duplicates}  not yet due {b.not_yet_due}  "
            f"oldest at release {'-' if age is None else f'{age:g}s'}  {drain}"
            + ("" if b.reconciles else "  DOES NOT RECONCILE")
        )

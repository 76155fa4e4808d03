"""Checks of a running stack: `smoke` after a deploy, `ramp-check` before raising concurrency."""

from __future__ import annotations

import json
import sys
from datetime import timedelta
from typing import TYPE_CHECKING, Any

import click

from sweeper_cli.base import (
    current_time,
    friendly_errors,
    json_option,
    local_stack_required,
    main,
    open_console,
    policy_option,
    target_options,
)
from sweeper_cli.obligations import release_policy

if TYPE_CHECKING:
    from sweeper_tools.smoke import VendorView


@main.command("ramp-check")
@policy_option
@click.option(
    "--hours",
    default=24.0,
    type=click.FloatRange(0.05, 24 * 15),
    help="The window measured, ending now.",
)
@target_options
@json_option
@friendly_errors
def ramp_check(policy_name: str | None, hours: float, as_json: bool, **target: Any) -> None:
    """Whether raising the policy's consumer concurrency is safe, and to what: the 429 rate,
    duplicate rate, share of jobs sent to the DLQ and p95 delivery time over the window
    (CloudWatch on AWS, the local stack's EMF log locally), against the runbook's thresholds."""
    from sweeper.errors import OperatorError
    from sweeper_tools.ramp import decide, figures_from_cloudwatch, figures_from_emf

    end = current_time()
    start = end - timedelta(hours=hours)
    with open_console(**target) as console:
        policy = console.policy(policy_name)
        local = console.endpoints.local
        if local is not None:
            if not local.log_file:
                raise OperatorError("the local stack names no function log to read metrics from")
            try:
                with open(local.log_file, encoding="utf-8", errors="replace") as log:
                    figures = figures_from_emf(
                        log, policy.name, start, end, source=f"emf:{local.log_file}"
                    )
            except FileNotFoundError as exc:
                raise OperatorError(
                    f"the local stack's function log {local.log_file} is gone; restart it "
                    "(`sweeper local down`, `sweeper local up`)"
                ) from exc
        else:
            figures = figures_from_cloudwatch(
                console.endpoints.client("cloudwatch"), policy.name, start, end
            )
    decision = decide(figures, policy.consumer, policy.quota.rate_per_second)
    if as_json:
        click.echo(
            json.dumps(
                {"policy": policy.name, **decision.as_dict(), "figures": figures.as_dict()},
                default=str,
            )
        )
        return
    head = {
        "raise": f"RAISE to {decision.recommended} environment(s)",
        "hold": f"HOLD at {decision.current} environment(s)",
        "lower": f"LOWER to {decision.recommended} environment(s)",
        "insufficient": f"NOT ENOUGH DATA; stay at {decision.current} environment(s)",
    }[decision.verdict]
    click.echo(f"policy {policy.name}: {head}")
    if decision.verdict in ("raise", "lower"):
        click.echo(
            f"  set             consumer.reserved_concurrency = {decision.reserved_concurrency}, "
            f"consumer.max_concurrency = {decision.max_concurrency}; redeploy"
        )
    p50 = "-" if figures.p50_seconds is None else f"{figures.p50_seconds:.3f} s"
    p95 = "-" if figures.p95_seconds is None else f"{figures.p95_seconds:.3f} s"
    click.echo(f"  window          {figures.hours:g} h ({figures.source})")
    click.echo(f"  calls           {figures.calls:.0f} (429 rate {figures.throttled_rate:.2%})")
    click.echo(f"  duplicate rate  {figures.duplicate_rate:.2%}")
    click.echo(f"  DLQ share       {figures.dead_letter_share:.2%}")
    click.echo(f"  delivery time   p50 {p50}, p95 {p95}")
    for reason in decision.reasons:
        click.echo(f"  why             {reason}")


@main.command()
@policy_option
@click.option(
    "--api-url",
    envvar="SWEEPER_SMOKE_API_URL",
    show_envvar=True,
    help="A vendor answering the simulator's `GET /_audit`, to time the consumer's call "
    "apart from the answer [default: the local stack's vendor; none on AWS].",
)
@click.option(
    "--timeout",
    "timeout_seconds",
    type=click.FloatRange(1, 3600),
    default=None,
    help="Seconds from release to settlement before the smoke fails [default: the policy's "
    "smoke.timeout_seconds].",
)
@target_options
@json_option
@friendly_errors
def smoke(
    policy_name: str | None,
    api_url: str | None,
    timeout_seconds: float | None,
    as_json: bool,
    **target: Any,
) -> None:
    """After a deploy: one canary obligation for the policy's sandbox tenant, released now and
    followed through ledger, queue, consumer, vendor and ledger, each hop timed; then deleted.

    Exits 1 naming the hop that failed. Refused unless the policy names a sandbox target
    ([policies.smoke]). Releasing runs the producer now: other due work goes out with it.
    """
    from sweeper_tools.smoke import run_smoke

    with open_console(**target) as console:
        policy = console.policy(policy_name)
        local = console.endpoints.local
        url = api_url or (local.vendor_url if local is not None else None)
        report = run_smoke(
            policy,
            console.ledger,
            lambda: release_policy(console, policy),
            clock=current_time,
            vendor=simulator_view(url.rstrip("/")) if url else None,
            timeout_seconds=timeout_seconds,
        )
    if as_json:
        click.echo(json.dumps(report.as_dict(), default=str))
    else:
        click.echo(f"policy {policy.name}: smoke canary {report.operation_key}")
        click.echo(f"  action    {report.action}")
        for number, hop in enumerate(report.hops):
            mark = "ok  " if hop.passed else ("FAIL" if number == report.failed_index else "-   ")
            timing = (
                f"+{hop.seconds:.3f} s (at {hop.at_seconds:.3f} s)"
                if hop.seconds is not None and hop.at_seconds is not None
                else ""
            )
            click.echo(f"  {mark} {hop.name:<9} {timing:<28} {hop.detail}".rstrip())
        click.echo(f"  canary {'deleted' if report.cleaned_up else 'NOT deleted: delete it'}")
    if not report.passed:
        number = (report.failed_index or 0) + 1
        click.echo(
            f"Error: smoke failed at hop {number}/{len(report.hops)} {report.failed_hop}: "
            f"{report.failure}",
            err=True,
        )
        sys.exit(1)


def simulator_view(api_url: str) -> VendorView:
    """A vendor's view through the simulator's `GET /_audit` (the local stack's vendor)."""
    with local_stack_required():
        from sweeper_local.vendor import fetch_audit

    def view(key: str) -> tuple[int, int] | None:
        try:
            audit = fetch_audit(api_url, timeout_seconds=5)
        except (OSError, ValueError):
            return None
        return audit.calls_by_key.get(key, 0), audit.effects_by_key.get(key, 0)

    return view

"""`sweeper plan`: the concurrency, batch and cost a policy needs, from measured figures."""

from __future__ import annotations

import json

import click

from sweeper.limits import LAMBDA_MAX_MEMORY_MB, LAMBDA_MIN_MEMORY_MB
from sweeper_cli.base import config_option, friendly_errors, json_option, main, policy_option
from sweeper_cli.plan_cost_tables import cost_tables
from sweeper_tools.planning.batch import (
    BATCH_LEDGER_READ_SECONDS,
    TURNOVER_SHARE,
    UNUSED_LAMBDA_SECONDS,
)
from sweeper_tools.planning.costs import stack_costs
from sweeper_tools.planning.plan import DEFAULT_CPU_SECONDS_PER_JOB
from sweeper_tools.planning.regimes import plan_allows
from sweeper_tools.policy_file import load_config


@main.command()
@policy_option
@click.option(
    "--latency-p50",
    "p50",
    type=click.FloatRange(0, 120, min_open=True),
    help="The vendor's median latency in seconds [default: action.latency_p50_seconds].",
)
@click.option(
    "--latency-p95",
    "p95",
    type=click.FloatRange(0, 120, min_open=True),
    help="The vendor's 95th percentile latency in seconds [default: the policy's, else the p50].",
)
@click.option("--arrival", default=0.0, type=click.FloatRange(0), help="New jobs per second.")
@click.option("--backlog", default=0, type=click.IntRange(0), help="Jobs already due.")
@click.option(
    "--scopes",
    default=1,
    type=click.IntRange(1),
    help="Limiter scopes busy at once: the first limit's keys (each its rate).",
)
@click.option(
    "--keys",
    "keys",
    multiple=True,
    metavar="LIMIT=N",
    help="Keys busy at once of a limit after the first (repeatable) "
    "[default: 1 for a key the same for every call, else --scopes].",
)
@click.option(
    "--parallel-calls",
    type=click.IntRange(1, 100),
    help="Calls per environment at once [default: the policy's].",
)
@click.option(
    "--memory-mb",
    type=click.IntRange(LAMBDA_MIN_MEMORY_MB, LAMBDA_MAX_MEMORY_MB),
    help="The consumer's memory, and with it its CPU [default: the policy's].",
)
@click.option(
    "--overhead",
    default=0.03,
    type=click.FloatRange(0, 10),
    help="Sweeper's own seconds per call (limiter, idempotency, ledger).",
)
@click.option(
    "--cpu-ms",
    "cpu_ms",
    default=DEFAULT_CPU_SECONDS_PER_JOB * 1000,
    type=click.FloatRange(0, 10_000),
    show_default=True,
    help="The consumer's CPU milliseconds per job (0: CPU is never the bound).",
)
@click.option(
    "--jobs-per-month",
    default=0,
    type=click.IntRange(0),
    help="Jobs a month: adds a month's bill at that load to the stack's costs.",
)
@config_option
@json_option
@friendly_errors
def plan(
    policy_name: str | None,
    p50: float | None,
    p95: float | None,
    arrival: float,
    backlog: int,
    scopes: int,
    keys: tuple[str, ...],
    parallel_calls: int | None,
    memory_mb: int | None,
    overhead: float,
    cpu_ms: float,
    jobs_per_month: int,
    config_path: str,
    as_json: bool,
) -> None:
    """What a policy needs to use its quota: in-flight calls, environments, parallel calls and
    batch time; the consumer timeout a batch needs and the visibility timeout (how long a killed
    environment delays its batch); how long a backlog takes to drain; AWS requests and cost per
    million jobs; and the whole stack's bill: at rest per month by item (as deployed, with the
    ledger paused, and paused with the lean network), per million jobs, and a month at
    --jobs-per-month.

    Each limit's ceiling (one key's rate, or its cap on calls in flight over the mean service
    time, times the keys it spans) and which binds: the smallest, or the consumers when they
    complete less. A policy written with [quota] and [scope] has one limit, `quota`, keyed by
    its scope. The consumer planned is the one synth deploys: its parallel calls, batch, window
    and timeout, where the policy sets none and states its vendor's latency, derived from the
    limits and that latency (the "derived" line).

    Exits 1 only when the policy cannot do what it claims ("error:" lines): its consumers
    cannot carry the rate it states, its backlog never drains or not before its
    oldest-eligible-age alarm would fire, or its consumer timeout is below a batch's need.
    Then each stack of the deployment, estimated: the root's resources and outputs and each
    policy's nested stack's resources, against CloudFormation's limits (one over: exit 1).
    Anything else it notices is an "advisory:" line, with exit 0: a limit no load reaches, a
    timeout far above a batch's need, consumers below a rate the policy never stated.
    """
    from sweeper_tools.planning.consumer_defaults import deployed_policy, derived_fields
    from sweeper_tools.planning.plan import PlanInput, make_plan
    from sweeper_tools.planning.stack_estimate import estimate

    config = load_config(config_path)
    if policy_name is None and len(config.policies) != 1:
        raise click.UsageError(
            f"--policy is required (the policy file has {[p.name for p in config.policies]})"
        )
    written = config.policy(policy_name) if policy_name else config.policies[0]
    # The consumer synth deploys: its sizing, where the policy sets none, derived
    policy = deployed_policy(written)
    known = policy.action.latency  # the policy's measured latency, else its kind's default
    p50 = p50 or (known[0] if known else None)
    if p50 is None:
        raise click.UsageError(
            "give --latency-p50 (seconds), or set action.latency_p50_seconds in the policy file"
        )
    p95 = p95 or (known[1] if known else None) or p50
    result = make_plan(
        policy,
        PlanInput(
            latency_p50_seconds=p50,
            latency_p95_seconds=max(p95, p50),
            arrival_per_second=arrival,
            backlog=backlog,
            scopes=scopes,
            keys=_limit_keys(keys),
            overhead_seconds=overhead,
            parallel_calls=parallel_calls,
            memory_mb=memory_mb,
            cpu_seconds_per_job=cpu_ms / 1000,
        ),
        sharing=[deployed_policy(other) for other in config.policies if other.name != policy.name],
    )
    figures = result.as_dict()
    figures["derived"] = derived_fields(written)
    figures["stack_cost"] = stack_costs(
        config,
        result.requests_per_job,
        result.throughput_per_second,
        jobs_per_month=jobs_per_month,
        policy=policy,
    )
    # Each policy is a nested stack; the root holds what they share (CloudFormation: 500 each).
    stacks = estimate(config, root_name="root")
    figures["stacks"] = [stack.as_dict() for stack in stacks]
    if as_json:
        click.echo(json.dumps(figures))
    else:
        for line in render(figures):
            click.echo(line)
        for stack in stacks:
            click.echo(f"{'error' if stack.over else 'stacks'}: {stack.line()}")
    if result.errors or any(stack.over for stack in stacks):
        raise SystemExit(1)


def _limit_keys(given: tuple[str, ...]) -> dict[str, int]:
    """`--keys store=50 --keys account=5` as {"store": 50, "account": 5}."""
    counts: dict[str, int] = {}
    for text in given:
        name, _, count = text.partition("=")
        if not name or not count.isdigit() or int(count) < 1:
            raise click.BadParameter(
                "give LIMIT=N, N a whole number of keys >= 1", param_hint="--keys"
            )
        counts[name] = int(count)
    return counts


def render(plan: dict[str, object]) -> list[str]:
    """The plan for a person: one figure a line, then its errors and its advisories."""
    drain = plan["drain_seconds"]
    oldest = plan["oldest_age_seconds"]
    cost = plan["cost_per_million_jobs"]
    requests = plan["requests_per_job"]
    cpu = plan["cpu_capacity_per_second"]
    assert isinstance(cost, dict)
    assert isinstance(requests, dict)
    lines = [
        f"policy {plan['policy']}",
        f"  action           {plan['action']}",
        f"  rate             {plan['target_rate_per_second']}/s (the smallest limit's ceiling)",
        *_limit_lines(plan),
        *_slack_lines(plan),
        f"  service time     {plan['mean_service_seconds']} s mean, "
        f"{plan['p95_service_seconds']} s p95 (vendor + overhead)" + _slot_wait(plan),
        f"  in flight needed {plan['needed_in_flight']} (p95: {plan['needed_in_flight_p95']})",
        *_derived_lines(plan),
        f"  configured       {plan['environments']} environment(s) x "
        f"{plan['parallel_calls']} call(s) = {plan['calls_capacity_per_second']} jobs/s at most",
        f"  CPU              {plan['memory_mb']} MB = {plan['vcpu_per_environment']} vCPU an "
        f"environment: {'no bound' if cpu is None else f'{cpu} jobs/s at most'}",
        f"  recommended      {plan['recommended_environments']} environment(s) or "
        f"{plan['recommended_parallel_calls']} parallel call(s); memory "
        f"{plan['recommended_memory_mb']} MB",
        f"  throughput       {plan['throughput_per_second']}/s "
        f"({plan['utilization_of_quota']} of the rate)",
        f"  batch            {plan['batch_size']} records, up to {plan['batch_seconds_p95']} s "
        f"(calls {plan['batch_calls_seconds']} s + slots {plan['batch_slots_seconds']} s + "
        f"ledger read {BATCH_LEDGER_READ_SECONDS:g} s)",
        f"  turnovers        up to {plan['turnover_share']:.0%} of the rate (about "
        f"{plan['turnover_seconds']} s between an environment's batches, as environments "
        f"turn over together); {plan['recommended_batch_size']} records a batch keep it "
        f"within {TURNOVER_SHARE:.0%}",
        f"  timeout          {plan['timeout_seconds']} s; recommended "
        f"{plan['recommended_timeout_seconds']} s (the longer of 2 x the batch and the ledger "
        f"read + one call's connect and read timeouts, + {UNUSED_LAMBDA_SECONDS:g} s unused)",
        f"  killed env delay up to {plan['visibility_timeout_seconds']} s (the visibility "
        f"timeout, 6 x timeout + window); {plan['recommended_visibility_timeout_seconds']} s at "
        "the recommended timeout",
        f"  drain            {'never' if drain is None else f'{drain} s'}",
        *(f"  budget           {line}" for line in _lines(plan.get("budget_drain"))),
        f"  oldest age       {'unknown' if oldest is None else f'about {oldest} s'}",
        "  per job          " + ", ".join(f"{k} {v}" for k, v in requests.items()),
        "  $ per 1M jobs    " + ", ".join(f"{k} {v:.2f}" for k, v in cost.items()),
    ]
    costs = plan.get("stack_cost")
    if isinstance(costs, dict):
        lines += ["", *cost_tables(costs), ""]
    for key, label in (("errors", "error"), ("advisories", "advisory")):
        found = plan[key]
        assert isinstance(found, list)
        lines += [f"{label}: {text}" for text in found]
    return lines


def _lines(value: object) -> list[str]:
    """A plan's list of lines (none when it has none)."""
    return [str(line) for line in value] if isinstance(value, list) else []


def _derived_lines(plan: dict[str, object]) -> list[str]:
    """The consumer's figures the policy leaves to the plan, as synth deploys them."""
    derived = plan.get("derived")
    if not derived:
        return []
    assert isinstance(derived, dict)
    figures = ", ".join(f"{name} {value}" for name, value in derived.items())
    return [
        f"  derived          {figures} (from the limits and the vendor's latency; set "
        "[consumer] to override)"
    ]


def _slack_lines(plan: dict[str, object]) -> list[str]:
    """A line per rate with a slack: what it costs in rate, and what it saves."""
    slacks = plan.get("slack") or []
    assert isinstance(slacks, list)
    return [
        f"  slack {slack['limit']:<10} {slack['slack_seconds']:g} s: {slack['rate_per_second']}/s "
        f"a key ({slack['without_slack_per_second']}/s without); a call that waited for a "
        "lease takes a banked slot, no limiter write"
        for slack in slacks
    ]


def _limit_lines(plan: dict[str, object]) -> list[str]:
    """A line per limit (what one key allows, times its keys) and what binds."""
    limits = plan["limits"]
    mean_service = plan["mean_service_seconds"]
    assert isinstance(limits, list)
    assert isinstance(mean_service, float)
    lines = []
    for limit in limits:
        allows = plan_allows(limit, mean_service)
        count = limit["keys"]
        lines.append(
            f"  limit {limit['name']:<10} {allows} a key ({limit['key']}) x "
            f"{count} key{'s' if count != 1 else ''} = {limit['ceiling_per_second']}/s; "
            f"{limit['used']} used"
        )
    binding = plan["binding"]
    if binding == "consumers":
        lines.append(
            f"  binds            the consumers, {plan['consumer_capacity_per_second']} jobs/s"
        )
    else:
        lines.append(f"  binds            limit {binding}, {plan['target_rate_per_second']}/s")
    return lines


def _slot_wait(plan: dict[str, object]) -> str:
    """What a call waits for a narrow key's slot besides its service time, when it does."""
    wait = plan.get("slot_wait_seconds")
    if not wait:
        return ""
    return f", + {wait} s a call waits for a slot of a limit that does not bind"

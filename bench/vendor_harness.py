"""One run of a vendor-stated-limits scenario (`sweeper bench rate --only vendor`): the harness.

A scenario (sweeper_bench.vendor) states what the vendor simulator does (`vendor_args`: its
dialect, its quota, its points bucket) and what sweeper is told (`limit`: the policy's first
limit and what it learns); `run_vendor` runs the real pipeline against it on the local stack, as
the rate benchmark's scenarios do (worker processes, SQS and DynamoDB on the stand-in,
PostgreSQL, the vendor in its own process), and hands back what the vendor saw. The figures
each scenario reads from it are its own; the reading helpers every scenario shares are here.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sweeper.config import HttpActionConfig, LimitConfig, Policy, ThrottleConfig
from sweeper.models import JobStatus
from sweeper.observability import Metric
from sweeper_bench.rate import (
    BACKLOG_FACTOR,
    DYNAMODB_READS,
    DYNAMODB_WRITES,
    VENDOR_LATENCY_SIGMA,
    Scenario,
    _aws_requests,
    _consumer,
    _diff,
    _per_second,
    _planned_batch,
)
from sweeper_local.graphql_cost import GraphqlAudit
from sweeper_local.pipeline import LocalPipeline
from sweeper_local.stack import LocalStack
from sweeper_local.vendor import VendorAudit, VendorProcess

#: What the vendor's answer says of a closure, read as sweeper reads a 429 (rate.py's action).
RETRY_AFTER_HEADER = "X-RateLimit-Reset-Ms"


@dataclass(frozen=True)
class VendorRunOptions:
    """What the part's caller chooses: each run's length, and the windows a scenario runs on
    (1 s and 5 s by default; a scenario with one window takes the first)."""

    seconds: float = 60.0
    periods: tuple[int, ...] = (1, 5)
    #: The PostgreSQL the part's stack uses (a scenario that starts a stack of its own too).
    database_url: str | None = None


@dataclass(frozen=True)
class VendorSetup:
    """One run: the rate benchmark's scenario (the vendor's quota or rate, its latency, the
    environments, the batch), the vendor's options and the policy's first limit."""

    scenario: Scenario
    vendor_args: tuple[str, ...]
    limit: LimitConfig
    #: The policy's action for the vendor at `url` (by default rate.py's DELETE).
    action: Callable[[str], HttpActionConfig] | None = None
    #: Jobs seeded; None: BACKLOG_FACTOR times what the scenario's rate lets through.
    backlog: int | None = None
    #: The longest a consumer waits in place for a slot (throttle.max_wait_seconds); None:
    #: the policy's default.
    max_wait_seconds: float | None = None


@dataclass(frozen=True)
class VendorRun:
    """What one run left: the vendor's audit (taken once the consumers stopped), the measured
    span (monotonic, one clock with the vendor's on one machine), the ledger's counts."""

    audit: VendorAudit
    graphql: GraphqlAudit
    #: The GraphQL API's audit at the span's end (its bucket's level then).
    graphql_at_end: GraphqlAudit
    started: float
    ended: float
    seeded: int
    published: int
    ledger_counts: dict[str, int]
    metrics: dict[str, float]
    #: What the scenario's `during` returned (called as the measured span starts).
    during: Any = None
    #: SQS and DynamoDB requests by operation over the measured span (the lite stand-in's
    #: count; None on another endpoint).
    requests: dict[str, int] | None = None


def delete_action(url: str) -> HttpActionConfig:
    """rate.py's action: a DELETE per object, a 429's Retry-After read in milliseconds."""
    return HttpActionConfig(
        api_url=url,
        allow_plain_http=True,
        read_timeout_seconds=5,
        retry_after_header=RETRY_AFTER_HEADER,
        retry_after_header_unit="ms",
    )


def vendor_base_args(scenario: Scenario, seed: int = 7) -> tuple[str, ...]:
    """The simulator's latency options of `scenario` (lognormal, rate.py's sigma), one seed."""
    return (
        *("--latency", str(scenario.latency_seconds), "--latency-distribution", "lognormal"),
        *("--latency-sigma", str(VENDOR_LATENCY_SIGMA), "--seed", str(seed)),
    )


def run_vendor(
    stack: LocalStack,
    setup: VendorSetup,
    *,
    seconds: float,
    during: Callable[[VendorProcess], Any] | None = None,
) -> VendorRun:
    """Run `setup` for `seconds` against its own vendor process; see the module docstring."""
    scenario = setup.scenario
    vendor = VendorProcess(*setup.vendor_args)
    try:  # the vendor is stopped whatever fails after it started
        policy = Policy(
            name=f"bench-{secrets.token_hex(3)}",
            limits=[setup.limit],
            action=(setup.action or delete_action)(vendor.url),
            consumer=_consumer(scenario, scenario.environments or 4, 10),
            throttle=ThrottleConfig(
                reopen_jitter_seconds=0.05,
                **(
                    {}
                    if setup.max_wait_seconds is None
                    else {"max_wait_seconds": setup.max_wait_seconds}
                ),
            ),
            lease_seconds=600,
        )
        if scenario.batch_size is None:
            batch = _planned_batch(policy, scenario)
            environments = scenario.environments or 4
            policy = policy.model_copy(
                update={"consumer": _consumer(scenario, environments, batch)}
            )
        rate = scenario.limit / scenario.period_seconds * scenario.scopes
        backlog = setup.backlog or int(rate * seconds * BACKLOG_FACTOR)
        with LocalPipeline(
            stack,
            policy,
            # warnings (throttles, closures) and the EMF metrics are still written
            extra_env={"POWERTOOLS_LOG_LEVEL": "WARNING"},
            prefix=f"bench-{policy.name}",
            log_prefix="sweeper-bench-vendor-",
            cap_consumer_cpu=scenario.cap_cpu,
            rehearsal_url=vendor.url,  # the scenario's own vendor, not the stack's
        ) as run:
            run.seed(backlog, tenants=max(10, scenario.scopes), spread_seconds=1)
            requests_before = _aws_requests(stack)
            started = time.monotonic()
            stated = None if during is None else during(vendor)
            run.run(lambda: time.monotonic() - started >= seconds, timeout_seconds=seconds + 5)
            ended = time.monotonic()
            requests = _diff(_aws_requests(stack), requests_before)
            graphql_at_end = vendor.graphql_audit()
            published = run.totals.published
        # once the consumers stopped: a batch flushes its metrics when it ends, and those
        # running at the span's end (a change mid-run among their records) end after it
        metrics = run.metrics()
        audit, graphql = vendor.audit(), vendor.graphql_audit()
    finally:
        vendor.stop()
    return VendorRun(
        audit=audit,
        graphql=graphql,
        graphql_at_end=graphql_at_end,
        started=started,
        ended=ended,
        seeded=backlog,
        published=published,
        ledger_counts={status.value: n for status, n in run.ledger_counts.items() if n},
        metrics=metrics,
        during=stated,
        requests=requests,
    )


def accepted_between(audit: VendorAudit, start: float, end: float) -> int:
    """Calls arriving in [start, end) that the vendor accepted: every call that arrived, less
    those its quota refused (no other refusal is configured in these scenarios)."""
    arrived = sum(1 for at in audit.arrivals if start <= at < end)
    refused = sum(1 for at in audit.quota_rejected_at if start <= at < end)
    return arrived - refused


def held_at(audit: VendorAudit, instant: float) -> int:
    """Calls the vendor held at `instant`: arrived before it, answered after it (or never)."""
    answered = {at for at, answer in audit.answered if answer <= instant}
    return sum(1 for at in audit.arrivals if at < instant and at not in answered)


def utilization(audit: VendorAudit, per_second: float, start: float, end: float) -> float:
    """Accepted calls per second over [start, end), as a share of `per_second`."""
    if end <= start or per_second <= 0:
        return 0.0
    return round(accepted_between(audit, start, end) / (per_second * (end - start)), 3)


def dynamodb_per_job(run: VendorRun) -> dict[str, Any]:
    """DynamoDB write and read requests over the measured span per call the vendor accepted in
    it (a job's one effect; the limiter's requests and the idempotency records'); rate.py's
    figures of the same names. Empty when uncounted. Consumers still calling after the span
    (their batches' last records) are left out of both."""
    requests = run.requests
    if requests is None:
        return {}
    jobs = max(1, accepted_between(run.audit, run.started, run.ended))

    def per_job(operations: tuple[str, ...]) -> float:
        return round(sum(requests.get(f"dynamodb:{op}", 0) for op in operations) / jobs, 3)

    return {
        "dynamodb_writes_per_job": per_job(DYNAMODB_WRITES),
        "dynamodb_reads_per_job": per_job(DYNAMODB_READS),
        "accepted_in_span": jobs,
        "dynamodb_requests": {k: v for k, v in sorted(requests.items()) if "dynamodb" in k},
    }


def common_figures(run: VendorRun) -> dict[str, Any]:
    """What every vendor scenario prints beside its own figures: the calls, how the vendor
    answered them, how the ledger ended, the effects per object and DynamoDB's requests."""
    audit = run.audit
    first = audit.arrivals[0] if audit.arrivals else run.started
    effects = list(audit.effects_by_key.values()) + list(run.graphql.effects_by_id.values())
    return {
        "calls": audit.calls_total + run.graphql.calls_total,
        "responses_by_status": {str(k): v for k, v in audit.responses_by_status.items()},
        "self_caused_429s": audit.quota_rejections,
        # when each came, in seconds from the first call
        "self_caused_429s_at_seconds": [round(at - first, 2) for at in audit.quota_rejected_at],
        "seeded": run.seeded,
        "published": run.published,
        "ledger": run.ledger_counts,
        "settled": run.ledger_counts.get(JobStatus.SUCCEEDED.value, 0)
        + run.ledger_counts.get(JobStatus.FAILED.value, 0),
        "effects": sum(effects),
        "most_effects_on_one_object": max(effects, default=0),
        "learned_closures": int(run.metrics.get(Metric.LEARNED_CLOSURES, 0)),
        "stale_slots": int(run.metrics.get(Metric.STALE_SLOTS, 0)),
        # where a run loses its pace on this machine (rate.py's figures of the same names)
        "late_slots": int(run.metrics.get(Metric.LATE_SLOTS, 0)),
        "late_sends": int(run.metrics.get(Metric.LATE_SENDS, 0)),
        "limiter_deferrals": int(run.metrics.get(Metric.LIMITER_DEFERRALS, 0)),
        "calls_per_second": _per_second(audit.arrivals),
        **dynamodb_per_job(run),
    }

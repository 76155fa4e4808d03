"""Capacity planning: what a policy needs to use its quota, how long a backlog takes, what it costs.

Plain arithmetic over the policy file and a few measured figures (arrival rate, backlog, vendor
latency); nothing here talks to AWS. The model, stated so it can be checked:

- A call occupies an in-flight slot for the vendor's latency plus sweeper's own per-call work
  (limiter slot, idempotency record, ledger settlement: `overhead_seconds`). Vendor latency is
  taken as lognormal, fitted to the given p50 and p95.
- In flight at most: environments (the smaller of reserved and maximum concurrency) times the
  calls one environment makes at once (`parallel_calls`). By Little's law the consumers then
  complete at most `in_flight / mean service time` jobs per second.
- The limiter lets through `rate_per_second` per scope (quota times headroom); `scopes` active
  scopes add up. What drains is the smaller of the two.
- AWS requests per job: the producer sends in batches of 10; the event source receives and
  deletes a batch at a time; each job writes one limiter slot and two idempotency records.
  While a backlog drains every environment is busy, so Lambda duration per job is
  environments / throughput.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

from sweeper.config import Policy
from sweeper.errors import ConfigError
from sweeper.schedule_expression import RateSchedule, parse_schedule

#: z of the 95th percentile of a normal distribution (the lognormal's fit).
Z95 = 1.6449
#: Sweeper's own work per call besides the vendor: a limiter write, two idempotency writes and
#: a ledger update, each a few milliseconds in one region. Measure and pass your own.
DEFAULT_OVERHEAD_SECONDS = 0.03
#: Messages per SendMessageBatch (the SQS maximum).
SEND_BATCH = 10
#: DynamoDB writes per job: one limiter slot, the idempotency record saved in progress and then
#: completed (Powertools: a conditional PutItem and an UpdateItem). Each item is under 1 KB.
LIMITER_WRITES_PER_JOB = 1.0
IDEMPOTENCY_WRITES_PER_JOB = 2.0
#: The consumer function's memory (infra/pipeline.py sets the same figure).
CONSUMER_MEMORY_MB = 512
#: Leave this share of the function timeout unused by a batch's expected duration.
TIMEOUT_SHARE = 0.5


@dataclass(frozen=True, slots=True)
class Prices:
    """Public on-demand prices, US East (N. Virginia), arm64, as stated in the README."""

    lambda_per_million_requests: float = 0.20
    lambda_per_gb_second: float = 0.0000133334
    sqs_per_million_requests: float = 0.40
    dynamodb_per_million_writes: float = 0.625
    dynamodb_per_million_reads: float = 0.125


@dataclass(frozen=True, slots=True)
class PlanInput:
    """What the plan is computed from, besides the policy."""

    latency_p50_seconds: float
    latency_p95_seconds: float
    arrival_per_second: float = 0.0
    backlog: int = 0
    scopes: int = 1
    overhead_seconds: float = DEFAULT_OVERHEAD_SECONDS
    parallel_calls: int | None = None  # default: the policy's
    limiter_writes_per_job: float = LIMITER_WRITES_PER_JOB

    def __post_init__(self) -> None:
        if not 0 < self.latency_p50_seconds <= self.latency_p95_seconds:
            raise ConfigError("vendor latency: need 0 < p50 <= p95 (seconds)")
        if self.arrival_per_second < 0 or self.backlog < 0 or self.overhead_seconds < 0:
            raise ConfigError("arrival rate, backlog and overhead cannot be negative")
        if self.scopes < 1 or (self.parallel_calls is not None and self.parallel_calls < 1):
            raise ConfigError("scopes and parallel calls must be at least 1")


@dataclass(frozen=True, slots=True)
class Plan:
    policy: str
    target_rate_per_second: float
    mean_service_seconds: float
    p95_service_seconds: float
    environments: int
    parallel_calls: int
    consumer_capacity_per_second: float
    throughput_per_second: float
    utilization_of_quota: float
    needed_in_flight: int
    needed_in_flight_p95: int
    recommended_environments: int
    recommended_parallel_calls: int
    batch_size: int
    batch_seconds_p95: float
    drain_seconds: float | None
    oldest_age_seconds: float | None
    requests_per_job: dict[str, float]
    cost_per_million_jobs: dict[str, float]
    warnings: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def lognormal_mean(p50: float, p95: float) -> float:
    """The mean of a lognormal with this median and 95th percentile."""
    sigma = math.log(p95 / p50) / Z95
    return p50 * math.exp(sigma * sigma / 2)


def policy_parallel_calls(policy: Policy) -> int:
    """Calls one consumer environment makes at once (1 when the policy does not say)."""
    return int(getattr(policy.consumer, "parallel_calls", 1))


def make_plan(policy: Policy, given: PlanInput, prices: Prices | None = None) -> Plan:
    prices = prices or Prices()
    consumer = policy.consumer
    parallel = given.parallel_calls or policy_parallel_calls(policy)
    environments = min(consumer.reserved_concurrency, consumer.max_concurrency)
    mean_service = lognormal_mean(given.latency_p50_seconds, given.latency_p95_seconds)
    mean_service += given.overhead_seconds
    p95_service = given.latency_p95_seconds + given.overhead_seconds
    in_flight = environments * parallel
    capacity = in_flight / mean_service
    target = policy.quota.rate_per_second * given.scopes
    throughput = min(target, capacity)
    needed = math.ceil(target * mean_service)
    needed_p95 = math.ceil(target * p95_service)
    warnings: list[str] = []

    recommended_envs = max(environments, math.ceil(needed_p95 / parallel))
    recommended_parallel = max(parallel, math.ceil(needed_p95 / environments))
    if capacity < target:
        warnings.append(
            f"policy {policy.name} cannot reach its quota: its consumers complete at most "
            f"{capacity:.1f} jobs/s against a rate of {target:.1f}/s; raise max and reserved "
            f"concurrency to {math.ceil(needed / parallel)} or parallel calls to "
            f"{math.ceil(needed / environments)} (p95: {recommended_envs} or "
            f"{recommended_parallel})"
        )

    # One batch in one environment: its records, `parallel` at a time, each at most the p95
    # service time, and no faster than the environment's share of the limiter's rate.
    batch = consumer.batch_size
    batch_seconds = max(
        math.ceil(batch / parallel) * p95_service, batch * environments / max(throughput, 1e-9)
    )
    if batch_seconds > consumer.timeout_seconds * TIMEOUT_SHARE:
        warnings.append(
            f"a batch of {batch} may take {batch_seconds:.1f} s, over half the consumer timeout "
            f"({consumer.timeout_seconds} s): lower batch_size or raise timeout_seconds"
        )

    net = throughput - given.arrival_per_second
    drain: float | None = None
    if net <= 0:
        warnings.append(
            f"arrivals ({given.arrival_per_second:.1f}/s) reach what the policy completes "
            f"({throughput:.1f}/s): the backlog never drains"
        )
    else:
        drain = given.backlog / net
    interval = _schedule_interval(policy)
    oldest = None if drain is None or interval is None else drain + interval

    requests = {
        "sqs": 1 / SEND_BATCH + 2 / batch,  # send; receive and delete, one each per batch
        "lambda_invocations": 1 / batch,
        "lambda_gb_seconds": CONSUMER_MEMORY_MB / 1024 * environments / max(throughput, 1e-9),
        "dynamodb_writes": given.limiter_writes_per_job + IDEMPOTENCY_WRITES_PER_JOB,
        "dynamodb_reads": 0.0,
    }
    per_million = {
        "sqs": requests["sqs"] * prices.sqs_per_million_requests,
        "lambda_requests": requests["lambda_invocations"] * prices.lambda_per_million_requests,
        "lambda_duration": requests["lambda_gb_seconds"] * prices.lambda_per_gb_second * 1e6,
        "dynamodb": requests["dynamodb_writes"] * prices.dynamodb_per_million_writes
        + requests["dynamodb_reads"] * prices.dynamodb_per_million_reads,
    }
    per_million["total"] = sum(per_million.values())
    return Plan(
        policy=policy.name,
        target_rate_per_second=round(target, 3),
        mean_service_seconds=round(mean_service, 4),
        p95_service_seconds=round(p95_service, 4),
        environments=environments,
        parallel_calls=parallel,
        consumer_capacity_per_second=round(capacity, 2),
        throughput_per_second=round(throughput, 2),
        utilization_of_quota=round(throughput / target, 3),
        needed_in_flight=needed,
        needed_in_flight_p95=needed_p95,
        recommended_environments=recommended_envs,
        recommended_parallel_calls=recommended_parallel,
        batch_size=batch,
        batch_seconds_p95=round(batch_seconds, 2),
        drain_seconds=None if drain is None else round(drain, 1),
        oldest_age_seconds=None if oldest is None else round(oldest, 1),
        requests_per_job={k: round(v, 4) for k, v in requests.items()},
        cost_per_million_jobs={k: round(v, 2) for k, v in per_million.items()},
        warnings=warnings,
    )


def _schedule_interval(policy: Policy) -> float | None:
    """Seconds between producer runs for a rate() schedule; None for cron (irregular)."""
    try:
        schedule = parse_schedule(policy.schedule, policy.timezone)
    except ConfigError:
        return None
    return schedule.every.total_seconds() if isinstance(schedule, RateSchedule) else None


def quota_warning(policy: Policy) -> str | None:
    """For synth: a warning when the policy's own measured vendor latency (action.latency_*)
    says its consumers cannot reach its quota; None when fine or not measured."""
    p50 = policy.action.latency_p50_seconds
    if p50 is None:
        return None
    p95 = policy.action.latency_p95_seconds or p50
    plan = make_plan(policy, PlanInput(latency_p50_seconds=p50, latency_p95_seconds=p95))
    if plan.consumer_capacity_per_second >= plan.target_rate_per_second:
        return None
    return plan.warnings[0]

"""Capacity planning: what a policy needs to use its quota, how long a backlog takes, what it costs.

Plain arithmetic over the policy file and a few measured figures (arrival rate, backlog, vendor
latency); nothing here talks to AWS. The model, stated so it can be checked:

- A call occupies an in-flight slot for the vendor's latency plus sweeper's own per-call work
  (limiter slot, idempotency record, ledger settlement: `overhead_seconds`). Vendor latency is
  taken as lognormal, fitted to the given p50 and p95.
- In flight at most: environments (the smaller of reserved and maximum concurrency) times the
  calls one environment makes at once (`parallel_calls`). A call holds its thread for its
  service time and the wait for the slot of a limit keyed per scope that it is under
  (`sweeper_tools.planning.slot_wait`: none for a limit with one key). By Little's law the
  consumers then complete at most X = `in_flight / (mean service time + the wait at X)` jobs
  per second, and the calls needed in flight are the rate times the time at the rate.
- A call also costs the environment CPU (`cpu_seconds_per_job`: botocore building, signing and
  parsing the job's DynamoDB requests, the ledger update, the vendor call). Lambda gives an
  environment one vCPU at 1,769 MB and a proportional share below; its threads share it, and one
  Python process runs Python code on one core at a time, so at most one vCPU counts. Filled past
  `CPU_BUSY_SHARE` of it, threads wake late for their slots and let them go unused, so an
  environment completes at most `vcpu x CPU_BUSY_SHARE / cpu_seconds_per_job` jobs per second.
- A policy is held by each of its limits (`[[limits]]`; a file's `[quota]` and `[scope]` are its
  one limit, keyed by the scope): a limit's ceiling is what one of its keys allows (its rate,
  headroom applied; a cap of N calls in flight allows N / mean service time; with both, the
  smaller) times the keys it spans at once. A key the same for every call of the policy (a
  constant such as `app`, or only `{policy}` and `{host}`) spans one; the first limit's other
  keys span `scopes` (the busy scopes), any other's `scopes` unless `keys` says how many
  (`sweeper_tools.planning.limits`). The rate planned is the smallest ceiling, and what binds
  is that limit, or the consumers when they complete less (`LimitCeiling`, `limit_warnings`
  for the limits no load can reach). What drains is the smaller of the two. A rate with a
  slack (`slack_seconds`) has the smaller headroom the slack costs (`Slack`: its rate with and
  without).
- What the plan finds is an error only when the policy cannot do what it claims; anything
  else is an advisory (`sweeper_tools.planning.findings` says which is which).
- One batch in one environment takes at most its calls (`batch_size / parallel_calls` rounds,
  each the p95 service time), plus its slots (the environment's share of the planned rate hands
  it one slot every `environments / rate` seconds), plus the batch's one ledger read: summed, an
  upper bound. The consumer timeout that covers it leaves half the usable time spare, lets one
  call run its whole connect and read timeout after the ledger read, and adds the last seconds
  the consumer never uses. Six such timeouts plus the batching window are the queue's visibility
  timeout: how long the messages of an environment killed mid-batch stay hidden before they
  come back.
- Between two batches an environment asks for no slot: its batch's last calls, then the event
  source's turnaround and the next batch's first steps (`Turnover`). Environments that share a
  rate turn over together, so a turnover's slots go unused; its share of a batch's time (at
  an environment's share of the throughput) is what turnovers cost, and the batch size
  recommended keeps it within TURNOVER_SHARE.
- AWS requests per job: the producer sends in batches of 10; the event source receives and
  deletes a batch at a time; each job writes one limiter slot and two idempotency records,
  and reads what its limits read before a call and its live limits once a second an
  environment (`sweeper_tools.planning.reads`).
  While a backlog drains every environment is busy, so Lambda duration per job is
  environments / throughput.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from sweeper.config import DEFAULT_CONSUMER_MEMORY_MB, MAX_PARALLEL_CALLS, Policy
from sweeper.errors import ConfigError
from sweeper.schedule_expression import RateSchedule, parse_schedule
from sweeper_tools.deploy import deploy_for
from sweeper_tools.planning.batch import Turnover, batch_need
from sweeper_tools.planning.costs import (
    DYNAMODB_READ_PER_MILLION_USD,
    DYNAMODB_WRITE_PER_MILLION_USD,
    LAMBDA_ARM_GB_SECOND_USD,
    LAMBDA_REQUEST_PER_MILLION_USD,
    SQS_REQUEST_PER_MILLION_USD,
)
from sweeper_tools.planning.cpu import cpu_bound
from sweeper_tools.planning.findings import (
    Finding,
    Severity,
    advisory,
    drain_findings,
    learned_rate,
    scopes_finding,
    shortfall,
    texts,
    timeout_findings,
)
from sweeper_tools.planning.limits import limit_ceiling, planned_keys, unreachable
from sweeper_tools.planning.reads import dynamodb_reads_per_job
from sweeper_tools.planning.regimes import Slack, planning_of
from sweeper_tools.planning.slot_wait import calls_carry, wait_per_rate
from sweeper_tools.planning.writes import IDEMPOTENCY_WRITES_PER_JOB, limiter_writes_per_job

#: z of the 95th percentile of a normal distribution (the lognormal's fit).
Z95 = 1.6449
#: Sweeper's own work per call besides the vendor: a limiter write, two idempotency writes and
#: a ledger update, each a few milliseconds in one region. Measure and pass your own.
DEFAULT_OVERHEAD_SECONDS = 0.03
#: Messages per SendMessageBatch (the SQS maximum).
SEND_BATCH = 10
#: The consumer function's memory when a policy does not set `consumer.memory_mb`.
CONSUMER_MEMORY_MB = DEFAULT_CONSUMER_MEMORY_MB
#: The consumer's CPU per job: measured by `sweeper bench rate` (`consumer_cpu_ms_per_job`),
#: each environment held to 768 MB's CPU, at 7.6 ms (one scope at 100/s) and 9.8 ms (ten
#: scopes at 10/s), over plain HTTP to the local emulators (TLS adds to it). Measure yours
#: (Lambda Insights' `cpu_total_time` per job) and pass it as `--cpu-ms`.
DEFAULT_CPU_SECONDS_PER_JOB = 0.010
#: A policy timeout past this many times the recommended one is far above the batch's need.
TIMEOUT_SLACK_FACTOR = 2.0


@dataclass(frozen=True, slots=True)
class Prices:
    """Public on-demand prices, US East (N. Virginia), arm64 (sweeper_tools.planning.costs)."""

    lambda_per_million_requests: float = LAMBDA_REQUEST_PER_MILLION_USD
    lambda_per_gb_second: float = LAMBDA_ARM_GB_SECOND_USD
    sqs_per_million_requests: float = SQS_REQUEST_PER_MILLION_USD
    dynamodb_per_million_writes: float = DYNAMODB_WRITE_PER_MILLION_USD
    dynamodb_per_million_reads: float = DYNAMODB_READ_PER_MILLION_USD


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
    memory_mb: int | None = None  # the consumer's; default: the policy's
    #: Default: the consumer's block rule (sweeper_tools.planning.writes).
    limiter_writes_per_job: float | None = None
    cpu_seconds_per_job: float = DEFAULT_CPU_SECONDS_PER_JOB  # 0: CPU is never the bound
    #: Keys busy at once of a limit after the first, by limit name (default: see `planned_keys`).
    keys: Mapping[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not 0 < self.latency_p50_seconds <= self.latency_p95_seconds:
            raise ConfigError("vendor latency: need 0 < p50 <= p95 (seconds)")
        if min(self.arrival_per_second, self.backlog, self.overhead_seconds) < 0:
            raise ConfigError("arrival rate, backlog and overhead cannot be negative")
        if self.cpu_seconds_per_job < 0:
            raise ConfigError("CPU per job cannot be negative")
        if self.scopes < 1 or (self.parallel_calls is not None and self.parallel_calls < 1):
            raise ConfigError("scopes and parallel calls must be at least 1")
        if any(count < 1 for count in self.keys.values()):
            raise ConfigError("a limit's keys must be at least 1")


@dataclass(frozen=True, slots=True)
class Plan:
    policy: str
    target_rate_per_second: float
    mean_service_seconds: float
    p95_service_seconds: float
    environments: int
    parallel_calls: int
    memory_mb: int
    vcpu_per_environment: float
    calls_capacity_per_second: float  # what the calls in flight allow
    cpu_capacity_per_second: float | None  # what the CPU allows; None: no figure (0 given)
    consumer_capacity_per_second: float  # the smaller of the two
    throughput_per_second: float
    utilization_of_quota: float
    needed_in_flight: int
    needed_in_flight_p95: int
    recommended_environments: int
    recommended_parallel_calls: int
    recommended_memory_mb: int
    batch_size: int
    batch_seconds_p95: float  # calls + slots + ledger read (BatchNeed), an upper bound
    batch_calls_seconds: float
    batch_slots_seconds: float
    #: One turnover between an environment's batches, the share of the rate turnovers cost
    #: at this batch size, and the size that keeps it within TURNOVER_SHARE (`Turnover`).
    turnover_seconds: float
    turnover_share: float
    recommended_batch_size: int
    timeout_seconds: int  # the policy's consumer timeout
    recommended_timeout_seconds: int
    visibility_timeout_seconds: int  # the policy's: what a killed environment delays its batch
    recommended_visibility_timeout_seconds: int
    drain_seconds: float | None
    oldest_age_seconds: float | None
    requests_per_job: dict[str, float]
    cost_per_million_jobs: dict[str, float]
    #: What the plan finds: errors (a claim the policy cannot keep) and advisories
    #: (sweeper_tools.planning.findings says which is which).
    findings: list[Finding] = field(default_factory=list)
    #: What each job does (the kind's one-line description, never a secret) and the longest
    #: one call may take (its timeouts).
    action: str = ""
    #: Each limit's ceiling (`LimitCeiling.as_dict`), and what binds: the name of the limit
    #: with the smallest ceiling, or "consumers" when they complete less.
    limits: list[dict[str, Any]] = field(default_factory=list)
    binding: str = "consumers"
    #: Each rate with a slack (`Slack.as_dict`): what its slack costs in rate.
    slack: list[dict[str, Any]] = field(default_factory=list)
    #: For a backlog under a limit with a budget: whether one window drains it, and when
    #: (`LimitPlanning.drains`, a line each, the backlog spread over the limit's keys).
    budget_drain: list[str] = field(default_factory=list)
    #: What a call waits for the slot of a limit keyed per scope that does not bind, at the
    #: planned rate (`sweeper_tools.planning.slot_wait`): counted in the calls in flight.
    slot_wait_seconds: float = 0.0

    @property
    def errors(self) -> list[str]:
        """What fails the plan: the policy cannot do what it claims."""
        return texts(self.findings, Severity.ERROR)

    @property
    def advisories(self) -> list[str]:
        """What the plan notices that the policy works with."""
        return texts(self.findings, Severity.ADVISORY)

    @property
    def warnings(self) -> list[str]:
        """Every finding, errors and advisories, in the order found."""
        return [finding.text for finding in self.findings]

    def as_dict(self) -> dict[str, Any]:
        """The plan's figures, with `errors` and `advisories`; `slack` only when one of its
        rates has a slack, `budget_drain` only for a backlog under a budget."""
        figures = asdict(self)
        del figures["findings"]
        figures["errors"], figures["advisories"] = self.errors, self.advisories
        if not self.slack:
            del figures["slack"]
        if not self.budget_drain:
            del figures["budget_drain"]
        return figures


def _slacks(policy: Policy) -> list[Slack]:
    """The policy's rates with a slack (`Slack`: what each costs in rate)."""
    return [slack for limit in policy.limits for slack in planning_of(limit).slacks()]


def lognormal_mean(p50: float, p95: float) -> float:
    """The mean of a lognormal with this median and 95th percentile."""
    sigma = math.log(p95 / p50) / Z95
    return p50 * math.exp(sigma * sigma / 2)


def policy_parallel_calls(policy: Policy) -> int:
    """Calls one consumer environment makes at once (1 when the policy does not say)."""
    return int(getattr(policy.consumer, "parallel_calls", 1))


def make_plan(
    policy: Policy,
    given: PlanInput,
    prices: Prices | None = None,
    sharing: Sequence[Policy] = (),
) -> Plan:
    """The plan of `policy` at the given figures; `sharing`: the other policies of its file
    (a limit of theirs with the same name and key shares its keys, see `limit_warnings`)."""
    prices = prices or Prices()
    consumer = policy.consumer
    parallel = given.parallel_calls or policy_parallel_calls(policy)
    environments = min(consumer.reserved_concurrency, consumer.max_concurrency)
    mean_service = lognormal_mean(given.latency_p50_seconds, given.latency_p95_seconds)
    mean_service += given.overhead_seconds
    p95_service = given.latency_p95_seconds + given.overhead_seconds
    keys = planned_keys(policy, given.scopes, given.keys)
    scopes = keys[policy.limits[0].name]  # the job's scope's keys busy at once
    ceilings = [limit_ceiling(limit, keys[limit.name], mean_service) for limit in policy.limits]
    tightest = min(ceilings, key=lambda ceiling: ceiling.ceiling_per_second)
    target = tightest.ceiling_per_second
    per_rate = wait_per_rate(policy, keys, target)  # a call's wait for its slots, per call/s
    held = per_rate * target
    in_flight = environments * parallel
    calls_capacity = calls_carry(in_flight, mean_service, per_rate)
    memory_mb = given.memory_mb or consumer.memory_mb
    cpu = cpu_bound(memory_mb, environments, target, given.cpu_seconds_per_job)
    capacity = min(calls_capacity, cpu.capacity)
    throughput = min(target, capacity)
    needed = math.ceil(target * (mean_service + held))
    needed_p95 = math.ceil(target * (p95_service + held))
    findings = scopes_finding(policy, given.scopes, scopes) + learned_rate(policy)
    binding = tightest.name if capacity >= target else "consumers"

    recommended_envs = max(environments, math.ceil(needed_p95 / parallel), cpu.environments)
    # No more than a policy may set: past that, only environments add calls in flight.
    parallel_p95 = math.ceil(needed_p95 / environments)
    recommended_parallel = min(MAX_PARALLEL_CALLS, max(parallel, parallel_p95))
    if calls_capacity < target:
        more_calls = math.ceil(needed / environments)
        parallel_fix = (
            f"or parallel calls to {more_calls} (p95: {recommended_envs} or {parallel_p95})"
            if parallel_p95 <= MAX_PARALLEL_CALLS
            else f"(p95: {recommended_envs}; parallel calls stop at {MAX_PARALLEL_CALLS})"
        )
        text = (
            f"policy {policy.name} cannot reach its quota: its consumers complete at most "
            f"{calls_capacity:.1f} jobs/s against a rate of {target:.1f}/s (limit "
            f"{tightest.name}); raise max "
            f"and reserved concurrency to {math.ceil(needed / parallel)} {parallel_fix}"
        )
        findings.append(shortfall(policy, text))
    if cpu.capacity < target:
        findings.append(shortfall(policy, cpu.warning(policy.name, target)))
    said = None if capacity >= target else tightest.name
    findings += [
        advisory(text)
        for text in unreachable(policy, mean_service, capacity, sharing, _capacity_of, said)
    ]

    batch = consumer.batch_size
    need = batch_need(policy, parallel, p95_service, target)
    findings += timeout_findings(
        consumer,
        batch_seconds=need.seconds,
        call_seconds=need.call_seconds,
        needed_seconds=need.timeout_seconds,
        needed_visibility_seconds=need.visibility_timeout_seconds,
        slack_factor=TIMEOUT_SLACK_FACTOR,
    )

    turnover = Turnover.of(batch, parallel, environments, throughput, mean_service)

    net = throughput - given.arrival_per_second
    drain = given.backlog / net if net > 0 else None
    interval = _schedule_interval(policy)
    findings += drain_findings(policy, given.arrival_per_second, throughput, drain, interval)
    oldest = None if drain is None or interval is None else drain + interval
    budget_drain = [
        line
        for limit in policy.limits
        if given.backlog
        for line in planning_of(limit).drains(math.ceil(given.backlog / keys[limit.name]))
    ]

    requests = {
        "sqs": 1 / SEND_BATCH + 2 / batch,  # send; receive and delete, one each per batch
        "lambda_invocations": 1 / batch,
        "lambda_gb_seconds": memory_mb / 1024 * environments / max(throughput, 1e-9),
        "dynamodb_writes": IDEMPOTENCY_WRITES_PER_JOB
        + (
            limiter_writes_per_job(policy, parallel)
            if given.limiter_writes_per_job is None
            else given.limiter_writes_per_job
        ),
        "dynamodb_reads": dynamodb_reads_per_job(
            policy,
            environments=environments,
            throughput=throughput,
            keys=keys,
            binding=binding,
            binding_by=tightest.bound,
        ),
    }
    per_million = {
        "sqs": requests["sqs"] * prices.sqs_per_million_requests,
        "lambda_requests": requests["lambda_invocations"] * prices.lambda_per_million_requests,
        "lambda_duration": requests["lambda_gb_seconds"] * prices.lambda_per_gb_second * 1e6,
        "dynamodb": requests["dynamodb_writes"] * prices.dynamodb_per_million_writes
        + requests["dynamodb_reads"] * prices.dynamodb_per_million_reads,
    }
    per_million["total"] = sum(per_million.values())
    kind = policy.action
    return Plan(
        policy=policy.name,
        action=f"{deploy_for(kind).describe()}, one call up to {kind.call_seconds:g} s",
        target_rate_per_second=round(target, 3),
        mean_service_seconds=round(mean_service, 4),
        p95_service_seconds=round(p95_service, 4),
        environments=environments,
        parallel_calls=parallel,
        memory_mb=memory_mb,
        vcpu_per_environment=round(cpu.vcpu, 3),
        calls_capacity_per_second=round(calls_capacity, 2),
        cpu_capacity_per_second=None if math.isinf(cpu.capacity) else round(cpu.capacity, 2),
        consumer_capacity_per_second=round(capacity, 2),
        throughput_per_second=round(throughput, 2),
        utilization_of_quota=round(throughput / target, 3),
        needed_in_flight=needed,
        needed_in_flight_p95=needed_p95,
        recommended_environments=recommended_envs,
        recommended_parallel_calls=recommended_parallel,
        recommended_memory_mb=cpu.memory_mb,
        batch_size=batch,
        batch_seconds_p95=round(need.seconds, 2),
        batch_calls_seconds=round(need.calls_seconds, 2),
        batch_slots_seconds=round(need.slots_seconds, 2),
        turnover_seconds=round(turnover.seconds, 3),
        turnover_share=round(turnover.share, 3),
        recommended_batch_size=turnover.recommended_batch_size,
        timeout_seconds=consumer.timeout_seconds,
        recommended_timeout_seconds=need.timeout_seconds,
        visibility_timeout_seconds=consumer.visibility_timeout_seconds,
        recommended_visibility_timeout_seconds=need.visibility_timeout_seconds,
        drain_seconds=None if drain is None else round(drain, 1),
        oldest_age_seconds=None if oldest is None else round(oldest, 1),
        requests_per_job={k: round(v, 4) for k, v in requests.items()},
        cost_per_million_jobs={k: round(v, 2) for k, v in per_million.items()},
        findings=findings,
        slack=[slack.as_dict() for slack in _slacks(policy)],
        budget_drain=budget_drain,
        limits=[ceiling.as_dict(throughput) for ceiling in ceilings],
        binding=binding,
        slot_wait_seconds=round(held, 4),
    )


def _schedule_interval(policy: Policy) -> float | None:
    """Seconds between producer runs for a rate() schedule; None for cron (irregular)."""
    try:
        schedule = parse_schedule(policy.schedule, policy.timezone)
    except ConfigError:
        return None
    return schedule.every.total_seconds() if isinstance(schedule, RateSchedule) else None


def quota_warning(policy: Policy) -> str | None:
    """For synth: a warning when the policy's own measured latency (action.latency_*, else its
    kind's default) says its consumers cannot reach its quota; None when fine or not known."""
    latency = policy.action.latency
    if latency is None:
        return None
    p50, p95 = latency
    plan = make_plan(policy, PlanInput(latency_p50_seconds=p50, latency_p95_seconds=p95))
    if plan.consumer_capacity_per_second >= plan.target_rate_per_second:
        return None
    return plan.warnings[0]


def limit_warnings(policy: Policy, sharing: Sequence[Policy] = ()) -> list[str]:
    """For synth: the limits of `policy` that no number of keys can bring it to, by the rules
    below, at the policy's own measured latency (action.latency_*, else its kind's default);
    without a latency, only the rates are compared. `sharing`: the file's other policies.

    - A limit whose calls all share one key of another limit, which allows less per key, is
      never reached: when the other's key fields are among its own (an app-wide `app` for a
      store's `{tenant_id}`, or two limits on the same key), one of its keys never gets more
      than the other's one key. Not judged when another policy holds its key too (their calls
      add up). (The other way, a store's 2/s under an app's 40/s, depends on how many stores
      are busy, which synth does not know: `sweeper plan --scopes N` says.)
    - A limit after the first whose one key allows more than the consumers complete is never
      reached, however many keys are busy; its key shared with other policies (a limit of the
      same name and key) counts their consumers too, and is not judged when one of them has no
      latency. (The first limit is the job's own quota: `quota_warning` says it.)
    """
    latency = policy.action.latency
    if latency is None:
        return unreachable(policy, None, None, sharing, _capacity_of)
    p50, p95 = latency
    plan = make_plan(policy, PlanInput(latency_p50_seconds=p50, latency_p95_seconds=p95))
    return unreachable(
        policy, plan.mean_service_seconds, plan.consumer_capacity_per_second, sharing, _capacity_of
    )


def _capacity_of(policy: Policy) -> float | None:
    """What the policy's consumers complete at its own measured latency; None without one."""
    latency = policy.action.latency
    if latency is None:
        return None
    given = PlanInput(latency_p50_seconds=latency[0], latency_p95_seconds=latency[1])
    return make_plan(policy, given).consumer_capacity_per_second

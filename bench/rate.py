"""Close to the quota, never over it: sweeper's shared limiter against two baselines, one run.

Every scenario runs the real pipeline on the local stack (producer and consumer handlers in
worker processes, moto server, PostgreSQL) against a strict vendor simulator: a sliding-window
quota in which every arriving call counts, 429 with Retry-After beyond it, lognormal latency.
The backlog is a quarter more than the quota lets through in the run (BACKLOG_FACTOR), so the
consumers never starve. Scenarios:

- `sweeper`: the shared limiter (GCRA in DynamoDB) and gate, on a 1-second and a 5-second window;
- `concurrency_cap_only`: no rate limiter, only the consumers' concurrency (reserved concurrency
  as the only limit), a 429 returns the record after its Retry-After;
- `per_worker_limiter`: each consumer spaces its own calls at quota / consumers (Celery's way);
- `incident`: sweeper again, with the vendor announcing a closure (429 + Retry-After) mid-run;
- `adaptive`: sweeper not told the quota (`quota.adaptive`, a cap of twice the vendor's quota):
  how long until it sends 0.85 of the quota, and the share of its calls answered 429 (its own
  part, with SQS and DynamoDB on lite_aws, as the real rates: see `run_rate_bench`);
- `limits` (issue 25's scenarios a-d, LIMIT_SCENARIOS): several limits per call, each enforced
  by the vendor, on a 1-second and a 5-second window: the binding limit's utilization, each
  limit's self-caused 429s and busiest window, DynamoDB writes per job; for a concurrency cap,
  how full the vendor saw it kept (`_cap_figures`);
- `vendor` (issue 43's scenarios e-j, sweeper_bench.vendor): limits the vendor states in its
  answers, learned.

Utilization = calls the vendor accepted per second, from its first call to the end of the run,
divided by its quota. Timings on a shared machine are noisy: compare the scenarios of one run.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import secrets
import statistics
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from sweeper.admission import IN_FLIGHT_BOUND_SECONDS
from sweeper.config import (
    DEFAULT_CONSUMER_MEMORY_MB,
    ConsumerConfig,
    HttpActionConfig,
    LimitConfig,
    Policy,
    Quota,
    ScopeConfig,
    ThrottleConfig,
)
from sweeper.limiter import DynamoLimiter, Grant
from sweeper.observability import Metric
from sweeper_bench import baseline_consumer, process_cpu
from sweeper_local.aws import LocalAws
from sweeper_local.lite_aws import FAILED_CONDITION, KEYS_READ
from sweeper_local.pipeline import LocalPipeline
from sweeper_local.stack import LocalStack
from sweeper_local.vendor import VendorAudit, VendorProcess
from sweeper_tools.planning.plan import CONSUMER_MEMORY_MB, Z95, PlanInput, Prices, make_plan

#: 15 calls/s: what the local AWS emulator carries with room to spare on 2 cores. Each job costs
#: three DynamoDB writes (two idempotency, one limiter) and moto serves about 300 writes/s here,
#: so a higher quota would measure the emulator, not the limiter. Against AWS, pass --quota.
DEFAULT_QUOTA = "15/1s"
#: The vendor's latency: lognormal around this median.
VENDOR_MEDIAN_LATENCY_SECONDS = 0.02
VENDOR_LATENCY_SIGMA = 0.4
#: The backlog, in multiples of what the quota lets through during the run: enough that no
#: scope runs dry (each has a quarter more than its rate can take), and no more. The producer
#: publishes every row its claim bounds allow in its first ticks, inside the measured span, on
#: the cores the consumers use: at 2.5 (as before) scenario (d) published 15,000 messages for
#: about 4,700 settled, and the producer, PostgreSQL and the stand-in's share of that work,
#: which in an account runs on none of the consumers' CPU, cost 1.0-1.4 ms more per settled job
#: here (docs/decisions.md, 2026-12-03).
BACKLOG_FACTOR = 1.25
INCIDENT_AT_SECONDS = 6.0
INCIDENT_FOR_SECONDS = 5.0
#: Loopback: from a consumer's send to the vendor's arrival stamp.
NETWORK_SECONDS = 0.005


@dataclass(frozen=True)
class Scenario:
    name: str
    mode: str  # the limiter: baseline_consumer.HANDLERS
    limit: int
    period_seconds: float
    headroom: float | None  # None: the policy default (Quota.safe_headroom)
    incident: bool = False
    adaptive: bool = False  # sweeper is told a cap of ADAPTIVE_CAP_FACTOR x the quota, not it
    #: The vendor's median latency (lognormal, VENDOR_LATENCY_SIGMA).
    latency_seconds: float = VENDOR_MEDIAN_LATENCY_SECONDS
    #: Execution environments (reserved and maximum concurrency); None: the run's --consumers.
    environments: int | None = None
    #: Records of a batch called at once in one environment (consumer.parallel_calls).
    parallel_calls: int = 1
    #: 1: one global scope; more: a scope per tenant, each with the vendor's quota.
    scopes: int = 1
    #: Records per invocation; above 10 with a batching window of 1 s, as Lambda requires.
    #: None: what `sweeper plan` recommends for the policy's turnovers (`_planned_batch`).
    batch_size: int | None = 10
    #: The consumer's memory (consumer.memory_mb). With `cap_cpu`, each environment is held to
    #: the CPU share Lambda gives it (sweeper_local.cpu_cap), where this machine allows it.
    memory_mb: int = DEFAULT_CONSUMER_MEMORY_MB
    cap_cpu: bool = False
    #: Several limits (the `limits` part): an app-wide limit of this many calls per period
    #: beside each scope's, and a fleet-wide cap on calls in flight. The vendor enforces each.
    app_limit: int | None = None
    in_flight_cap: int | None = None
    #: Report each limit's figures (the `limits` part): 429s, busiest window, the binding one.
    per_limit: bool = False
    #: The scope's rate's slack (quota.slack_seconds): a banked slot is usable this long after
    #: its time, at the price of headroom.
    slack_seconds: float = 0.0


#: The adaptive scenario's cap, in multiples of the vendor's real quota, and its length: it
#: starts at a tenth of the cap and needs time to find the quota; 60 s is the horizon of the
#: target (at 0.85 of the quota within 60 s, at most 1 % of calls answered 429).
ADAPTIVE_CAP_FACTOR = 2
ADAPTIVE_MIN_SECONDS = 60.0
#: "Reached the quota": a 1-second window holding this share of the quota's calls.
ADAPTIVE_REACHED = 0.85


def _time_to_reach(arrivals: tuple[float, ...], per_second: float, share: float) -> float | None:
    """Seconds from the first call until some 1-second window holds `share` of the rate."""
    if not arrivals:
        return None
    need = share * per_second
    start = 0
    for end, at in enumerate(arrivals):
        while at - arrivals[start] > 1.0:
            start += 1
        if end - start + 1 >= need:
            return at - arrivals[0]
    return None


def _utilization(
    audit: VendorAudit, limit: int, period: float, ended_at: float, scopes: int = 1
) -> float:
    if not audit.arrivals:
        return 0.0
    span = max(1e-9, ended_at - audit.arrivals[0])
    return audit.accepted_total / (limit / period * scopes * span)


def _gate_closed_at(log_file: str, after_epoch: float) -> float | None:
    """When a consumer first closed the gate after `after_epoch` (epoch seconds), from its log."""
    first: float | None = None
    with open(log_file, encoding="utf-8") as log:
        for line in log:
            if '"scope closed"' not in line:
                continue
            with contextlib.suppress(ValueError, KeyError):
                closed = float(json.loads(line)["closed_at"])
                if closed >= after_epoch and (first is None or closed < first):
                    first = closed
    return first


def _cpu_ticks() -> tuple[tuple[int, int], tuple[int, int]] | tuple[None, None]:
    """The machine's CPU time so far, in clock ticks, from one read: (busy, total), and (stolen,
    total): what a virtual machine's host gave to others while this one wanted it ("steal",
    counted busy too; a run with much of it was slowed from outside). (None, None) off Linux."""
    try:
        with open("/proc/stat", encoding="ascii") as stat:
            fields = [int(v) for v in stat.readline().split()[1:]]
    except (OSError, ValueError):
        return None, None
    total = sum(fields)
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
    stolen = fields[7] if len(fields) > 7 else 0
    return (total - idle, total), (stolen, total)


def _busy_share(before: tuple[int, int] | None, after: tuple[int, int] | None) -> float | None:
    """The share of the machine's CPU time that was busy between two readings."""
    if before is None or after is None or after[1] <= before[1]:
        return None
    return round((after[0] - before[0]) / (after[1] - before[1]), 3)


def _cpu_per_job(
    before: tuple[int, int] | None, after: tuple[int, int] | None, jobs: int
) -> float | None:
    """Busy CPU seconds of the whole machine per settled job between two readings: every
    process of the local stack (consumers, emulator, PostgreSQL, vendor), and anyone else's."""
    if before is None or after is None or jobs <= 0:
        return None
    return (after[0] - before[0]) / os.sysconf("SC_CLK_TCK") / jobs


def _quota_calls_per_second(scenario: Scenario) -> float:
    """The vendor calls per second the scenario's quota allows, every scope together."""
    return scenario.limit / scenario.period_seconds * scenario.scopes


def _cores_needed(cpu_per_job: float | None, scenario: Scenario) -> dict[str, Any]:
    """CPU per job here, and the cores the whole local stack would need at the full quota."""
    if cpu_per_job is None:
        return {}
    rate = _quota_calls_per_second(scenario)
    return {
        "machine_cpu_ms_per_job": round(cpu_per_job * 1000, 2),
        "cores_needed_at_quota_here": round(cpu_per_job * rate, 1),
        "cores_here": os.cpu_count(),
    }


def _consumer(scenario: Scenario, environments: int, batch_size: int) -> ConsumerConfig:
    """The scenario's consumer at `batch_size` records a batch."""
    return ConsumerConfig(
        reserved_concurrency=environments,
        max_concurrency=environments,
        batch_size=batch_size,
        batch_window_seconds=0 if batch_size <= 10 else 1,
        timeout_seconds=60,
        parallel_calls=scenario.parallel_calls,
        memory_mb=scenario.memory_mb,
    )


def _planned_batch(policy: Policy, scenario: Scenario) -> int:
    """The batch size `sweeper plan` recommends for `policy` at the vendor's latency (a
    lognormal of VENDOR_LATENCY_SIGMA): turnovers within 3 % of the rate (plan.Turnover)."""
    p95 = scenario.latency_seconds * math.exp(Z95 * VENDOR_LATENCY_SIGMA)
    given = PlanInput(
        latency_p50_seconds=scenario.latency_seconds,
        latency_p95_seconds=p95,
        scopes=scenario.scopes,
    )
    return make_plan(policy, given).recommended_batch_size


def _consumer_cpu(cpu_seconds: float, settled: int, scenario: Scenario) -> dict[str, Any]:
    """The consumer environments' own CPU per job (their processes only, every thread), and the
    cores they alone would need at the full quota: what `sweeper plan --cpu-ms` takes."""
    if settled <= 0:
        return {}
    rate = _quota_calls_per_second(scenario)
    per_job = cpu_seconds / settled
    return {
        "consumer_cpu_ms_per_job": round(per_job * 1000, 2),
        "consumer_cores_needed_at_quota_here": round(per_job * rate, 1),
    }


def _cpu_by_process(
    seconds_by_role: dict[str, float], machine_per_job: float | None, settled: int
) -> dict[str, float]:
    """CPU per settled job (ms) of each process of the run (sweeper_bench.process_cpu), and
    what the machine spent beside them (other users' processes, the kernel's own threads)."""
    if settled <= 0:
        return {}
    per_job = {role: round(s / settled * 1000, 2) for role, s in seconds_by_role.items()}
    if machine_per_job is not None:
        ours = sum(seconds_by_role.values()) / settled
        per_job["outside_this_run"] = round(max(0.0, machine_per_job - ours) * 1000, 2)
    return per_job


def run_scenario(
    stack: LocalStack, scenario: Scenario, *, consumers: int, seconds: float
) -> dict[str, Any]:
    """Run one scenario for `seconds` and return its figures."""
    rate = scenario.limit / scenario.period_seconds
    consumers = scenario.environments or consumers
    if scenario.adaptive:
        seconds = max(seconds, ADAPTIVE_MIN_SECONDS)
    vendor_scope = "global" if scenario.scopes == 1 else "tenant"
    # Its own process: the times it records are not delayed by this interpreter's work.
    vendor = VendorProcess(
        *("--rate", f"{scenario.limit}/{scenario.period_seconds:g}s", "--scope", vendor_scope),
        *("--retry-after-ms-header", "--latency", str(scenario.latency_seconds)),
        *("--latency-distribution", "lognormal", "--latency-sigma", str(VENDOR_LATENCY_SIGMA)),
        *("--seed", "7"),
        *_vendor_further_limits(scenario),
    )
    try:  # the vendor is stopped whatever fails after it started
        quota = Quota(
            limit=scenario.limit * (ADAPTIVE_CAP_FACTOR if scenario.adaptive else 1),
            period_seconds=scenario.period_seconds,
            headroom=scenario.headroom,
            adaptive=scenario.adaptive,
            slack_seconds=scenario.slack_seconds,
        )
        scope = ScopeConfig(kind="global" if scenario.scopes == 1 else "tenant")
        limits = _policy_limits(scenario, scope.key_template, quota)
        policy = Policy(
            name=f"bench-{secrets.token_hex(3)}",
            **({"limits": limits} if limits else {"scope": scope, "quota": quota}),
            action=HttpActionConfig(
                api_url=vendor.url,
                allow_plain_http=True,
                read_timeout_seconds=5,
                retry_after_header="X-RateLimit-Reset-Ms",
                retry_after_header_unit="ms",
            ),
            consumer=_consumer(scenario, consumers, scenario.batch_size or 10),
            throttle=ThrottleConfig(reopen_jitter_seconds=0.05),
            lease_seconds=600,
        )
        if scenario.batch_size is None:
            batch = _planned_batch(policy, scenario)
            policy = policy.model_copy(update={"consumer": _consumer(scenario, consumers, batch)})
        env = {
            baseline_consumer.WORKERS_VARIABLE: str(consumers),
            # A log line per settled job costs CPU the two cores need for the emulators; the
            # warnings (throttles, closures) and the EMF metrics are still written.
            "POWERTOOLS_LOG_LEVEL": "WARNING",
        }
        with LocalPipeline(
            stack,
            policy,
            extra_env=env,
            prefix=f"bench-{policy.name}",
            log_prefix="sweeper-bench-",
            cap_consumer_cpu=scenario.cap_cpu,
            consumer_handler=baseline_consumer.HANDLERS[scenario.mode],
            rehearsal_url=vendor.url,  # the scenario's own vendor, not the stack's
        ) as run:
            backlog = int(rate * scenario.scopes * seconds * BACKLOG_FACTOR)
            run.seed(backlog, tenants=max(10, scenario.scopes), spread_seconds=1)
            incident: tuple[float, float] | None = None
            requests_before = _aws_requests(stack)
            busy_before = run.source.busy_seconds_now()
            invocations_before = run.source.stats.invocations
            runs_before = run.totals.runs
            functions = run.function_pids()
            processes_before = process_cpu.snapshot()
            cpu_before, stolen_before = _cpu_ticks()
            started = time.monotonic()
            if scenario.incident:
                incident = vendor.start_incident(INCIDENT_FOR_SECONDS, INCIDENT_AT_SECONDS)
            run.run(lambda: time.monotonic() - started >= seconds, timeout_seconds=seconds + 5)
            ended = time.monotonic()
            busy_after = run.source.busy_seconds_now()
            cpu_after, stolen_after = _cpu_ticks()
            processes_after = process_cpu.snapshot()
            functions.update(run.function_pids())
            cpu_busy = _busy_share(cpu_before, cpu_after)
            audit = vendor.audit()
            settled = run.final()
            machine_per_job = _cpu_per_job(cpu_before, cpu_after, settled)
            requests = _diff(_aws_requests(stack), requests_before)
            consumer_seconds = busy_after - busy_before
            cpu_by_role = process_cpu.by_role(
                processes_before, processes_after, os.getpid(), functions
            )
            consumer_roles = {e.function for e in run.source.environments}
            consumer_cpu = sum(cpu_by_role.get(role, 0.0) for role in consumer_roles)
            invocations = run.source.stats.invocations - invocations_before
            producer_runs = run.totals.runs - runs_before
            published = run.totals.published
            metrics = run.metrics()
            log_file = run.log_file
            capped = [e.cpu_cap is not None for e in run.source.environments]
            throttling = [e.throttling() for e in run.source.environments]
    finally:
        vendor.stop()
    result: dict[str, Any] = {
        "scenario": scenario.name,
        "quota": f"{scenario.limit}/{scenario.period_seconds:g}s",
        "headroom": policy.quota.effective_headroom if scenario.mode == "shared" else None,
        "slack_seconds": scenario.slack_seconds,
        "utilization": round(
            _utilization(audit, scenario.limit, scenario.period_seconds, ended, scenario.scopes),
            3,
        ),
        "accepted": audit.accepted_total,
        "calls": audit.calls_total,
        "self_caused_429s": audit.quota_rejections,
        "max_calls_in_any_window": audit.max_calls_in_window,
        "quota_limit": scenario.limit,
    }
    if scenario.per_limit:
        result.update(_by_limit(scenario, audit, ended))
    if requests is not None:
        result.update(
            _costs(
                requests,
                settled=settled,
                consumer_invocations=invocations,
                consumer_seconds=consumer_seconds,
                producer_runs=producer_runs,
                memory_mb=scenario.memory_mb,
            )
        )
        result.update(
            {
                "scopes": scenario.scopes,
                "environments": consumers,
                "parallel_calls": scenario.parallel_calls,
                "batch_size": policy.consumer.batch_size,
                "vendor_p50_seconds": scenario.latency_seconds,
                "vendor_max_in_flight": audit.max_in_flight,
                "calls_per_second": _per_second(audit.arrivals),
                "published": published,
                "leases_reclaimed": int(metrics.get(Metric.RECLAIMED, 0)),
                # Slots taken and let go because they came after their time (a slow write or
                # a thread woken late): utilization lost to this machine or to DynamoDB.
                "late_slots": int(metrics.get(Metric.LATE_SLOTS, 0)),
                # Requests that left later than their slot allowed (the environment stalled
                # between the check and the send): each spent a slot of its scope empty.
                "late_sends": int(metrics.get(Metric.LATE_SENDS, 0)),
                "limiter_deferrals": int(metrics.get(Metric.LIMITER_DEFERRALS, 0)),
                # The whole machine (every process, and anyone else's): near 1, the figures
                # above are this machine's, not sweeper's.
                "machine_cpu_busy_share": cpu_busy,
                "machine_cpu_stolen_share": _busy_share(stolen_before, stolen_after),
                **_cores_needed(machine_per_job, scenario),
                # the environments' processes over the span, a batch still running included
                **_consumer_cpu(consumer_cpu, settled, scenario),
                "cpu_ms_per_job_by_process": _cpu_by_process(cpu_by_role, machine_per_job, settled),
                "consumer_memory_mb": scenario.memory_mb,
                # Every environment held to its memory's CPU share (False: not asked, or this
                # machine could not make the cgroups), and how often the cap paused them.
                "consumer_cpu_capped": bool(capped) and all(capped),
                "consumer_cpu_throttled_periods": sum(p for p, _ in throttling),
                "consumer_cpu_throttled_seconds": round(sum(t for _, t in throttling), 2),
            }
        )
    if scenario.adaptive:
        reached = _time_to_reach(audit.arrivals, rate, ADAPTIVE_REACHED)
        result.update(
            {
                "told_cap": f"{scenario.limit * ADAPTIVE_CAP_FACTOR}/{scenario.period_seconds:g}s",
                "seconds": seconds,
                "seconds_to_reach_0_85": None if reached is None else round(reached, 1),
                "share_of_calls_answered_429": round(
                    audit.throttled_total / max(1, audit.calls_total), 4
                ),
            }
        )
    if incident is not None:
        start, end = incident
        # Vendor times are monotonic, the consumer's log is wall clock: one offset, one machine.
        offset = time.time() - time.monotonic()
        closed_epoch = _gate_closed_at(log_file, start + offset)
        gate = None if closed_epoch is None else closed_epoch - offset
        # In flight: sent before the gate closed, or within the bound after it (a call is sent
        # at most IN_FLIGHT_BOUND_SECONDS after its consumer last saw the gate open).
        cutoff = (gate if gate is not None else end) + IN_FLIGHT_BOUND_SECONDS + NETWORK_SECONDS
        during = [a for a in audit.arrivals if start <= a < end]
        reopen = audit.first_success_after_reopen_seconds
        result.update(
            {
                "incident_seconds": INCIDENT_FOR_SECONDS,
                "calls_during_closure": len(during),
                "in_flight_when_gate_closed": sum(1 for a in during if a <= cutoff),
                "calls_beyond_in_flight": sum(1 for a in during if a > cutoff),
                "gate_closed_after_seconds": None if gate is None else round(gate - start, 3),
                "first_accepted_after_reopen_seconds": (
                    None if not reopen or reopen[0] is None else round(reopen[0], 3)
                ),
            }
        )
    return result


#: The vendor's name of each limit (sweeper_local.vendor) -> the policy's.
VENDOR_LIMIT_NAMES = {"quota": "scope", "app": "app", "in_flight": "vendor"}


def _vendor_further_limits(scenario: Scenario) -> list[str]:
    """The simulator's options for the scenario's further limits: it enforces each."""
    args: list[str] = []
    if scenario.app_limit is not None:
        args += ["--app-rate", f"{scenario.app_limit}/{scenario.period_seconds:g}s"]
    if scenario.in_flight_cap is not None:
        args += ["--in-flight-cap", str(scenario.in_flight_cap)]
    return args


def _policy_limits(scenario: Scenario, scope_key: str, quota: Quota) -> list[LimitConfig]:
    """The policy's `[[limits]]` for a scenario with further limits (none: `[quota]` alone)."""
    if scenario.app_limit is None and scenario.in_flight_cap is None:
        return []
    limits = [LimitConfig(name="scope", key=scope_key, rate=quota)]
    if scenario.app_limit is not None:
        app = Quota(limit=scenario.app_limit, period_seconds=scenario.period_seconds)
        limits.append(LimitConfig(name="app", key="app", rate=app))
    if scenario.in_flight_cap is not None:
        limits.append(
            LimitConfig(name="vendor", key="vendor", max_in_flight=scenario.in_flight_cap)
        )
    return limits


def _binding_limit(scenario: Scenario) -> tuple[str, float]:
    """The limit that binds the scenario, and the calls per second it allows: the in-flight
    cap at the vendor's median latency, else the tighter of the scopes' rates together and the
    app's rate."""
    scopes = _quota_calls_per_second(scenario)
    if scenario.in_flight_cap is not None:
        cap = scenario.in_flight_cap / scenario.latency_seconds
        if cap < scopes:
            return "vendor", cap
    if scenario.app_limit is not None:
        app = scenario.app_limit / scenario.period_seconds
        if app < scopes:
            return "app", app
    return "scope", scopes


def _by_limit(scenario: Scenario, audit: VendorAudit, ended: float) -> dict[str, Any]:
    """Each limit's figures as the vendor counted them: its self-caused 429s, its busiest
    window (calls in any window of its period; for the cap, calls held at once) beside what it
    allows, and the utilization of the limit that binds."""
    allows = {"scope": scenario.limit, "app": scenario.app_limit, "vendor": scenario.in_flight_cap}
    binding, per_second = _binding_limit(scenario)
    span = max(1e-9, ended - audit.arrivals[0]) if audit.arrivals else 0.0
    utilization = audit.accepted_total / (per_second * span) if span else 0.0
    figures: dict[str, Any] = {
        "binding_limit": binding,
        "binding_allows_per_second": round(per_second, 2),
        "utilization_of_binding_limit": round(utilization, 3),
        "self_caused_429s_by_limit": {
            VENDOR_LIMIT_NAMES[name]: n for name, n in audit.quota_rejections_by_limit.items()
        },
        "max_calls_in_any_window_by_limit": {
            VENDOR_LIMIT_NAMES[name]: {"most": n, "allowed": allows[VENDOR_LIMIT_NAMES[name]]}
            for name, n in audit.max_calls_in_window_by_limit.items()
        },
    }
    if scenario.in_flight_cap is not None and span:
        figures.update(
            _cap_figures(
                scenario.in_flight_cap, scenario.latency_seconds, audit, ended - span, ended
            )
        )
    return figures


#: A concurrency cap's figures (`_cap_figures`), carried into the scenario's summary.
CAP_FIGURES = (
    "cap_occupancy",
    "vendor_mean_in_flight",
    "vendor_mean_latency_seconds",
    "throughput_per_second",
    "throughput_vs_cap_over_p50",
    "throughput_vs_cap_over_p50_ceiling",
)


def _cap_figures(
    cap: int, p50_seconds: float, audit: VendorAudit, start: float, end: float
) -> dict[str, Any]:
    """How full a cap of `cap` calls in flight was kept, as the vendor saw it, from `start` to
    `end` (the utilization's span: the first call to the run's end, its ramp included), at a
    vendor latency of median `p50_seconds`.

    `throughput_vs_cap_over_p50` is issue 25's own ratio (accepted calls per second over cap /
    median latency); by Little's law (calls in flight = throughput x mean latency) it cannot
    exceed median / mean latency, its ceiling (0.923 for a lognormal of sigma 0.4), so
    `cap_occupancy` (calls held at once, averaged over time, over the cap) is the share of the
    cap used, whatever the latency's spread."""
    throughput = audit.accepted_total / (end - start)
    in_flight = audit.mean_in_flight(start, end)
    latency = audit.mean_latency_seconds()
    return {
        "cap_occupancy": round(in_flight / cap, 3),
        "vendor_mean_in_flight": round(in_flight, 2),
        "vendor_mean_latency_seconds": None if latency is None else round(latency, 4),
        "throughput_per_second": round(throughput, 2),
        "throughput_vs_cap_over_p50": round(throughput * p50_seconds / cap, 3),
        "throughput_vs_cap_over_p50_ceiling": (
            None if not latency else round(p50_seconds / latency, 3)
        ),
    }


def limiter_cost(stack: LocalStack, *, acquisitions: int = 400, threads: int = 8) -> dict[str, Any]:
    """Writes and reads per acquisition, and the most acquisitions per second one scope took
    here (bounded by the moto server on this machine, not by the algorithm)."""
    from sweeper_local.aws import provision

    table = provision(
        stack.aws.sqs(),
        stack.aws.dynamodb(),
        Policy(name="cost"),
        prefix=f"cost-{secrets.token_hex(3)}",
    ).limiter_table
    limiters = [DynamoLimiter(stack.aws.dynamodb(), table) for _ in range(threads)]
    per_thread = acquisitions // threads
    latencies: list[float] = []
    lock = threading.Lock()

    def work(limiter: DynamoLimiter) -> None:
        for _ in range(per_thread):
            t0 = time.perf_counter()
            decision = limiter.reserve("hot-scope", 1e-6, horizon=60)
            with lock:
                latencies.append(time.perf_counter() - t0)
            assert isinstance(decision, Grant)

    started = time.perf_counter()
    workers = [threading.Thread(target=work, args=(lim,)) for lim in limiters]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    elapsed = time.perf_counter() - started
    total = per_thread * threads
    return {
        "writes_per_acquisition": round(sum(lim.writes for lim in limiters) / total, 3),
        "reads_per_acquisition": round(sum(lim.reads for lim in limiters) / total, 3),
        "acquisitions_per_second_one_scope_here": round(total / elapsed),
        "median_acquisition_ms_here": round(statistics.median(latencies) * 1000, 2),
        "dynamodb_ceiling_per_scope": "about 1,000 writes/s on one partition key",
    }


#: DynamoDB operations billed as writes and as reads (one request unit per item under 1 KB
#: written, 4 KB read: every sweeper item is smaller, so a request is one unit, but for a
#: BatchGetItem, one unit per key read; a Scan of the limiter table is counted as one read per
#: page, its size being a few items).
DYNAMODB_WRITES = ("PutItem", "UpdateItem", "DeleteItem", "BatchWriteItem")
DYNAMODB_READS = ("GetItem", "Scan", "Query", "BatchGetItem")


def _per_second(arrivals: tuple[float, ...]) -> list[int]:
    """Calls in each second from the first one: where a run lost its utilization."""
    if not arrivals:
        return []
    counts = [0] * (int(arrivals[-1] - arrivals[0]) + 1)
    for at in arrivals:
        counts[int(at - arrivals[0])] += 1
    return counts


def _aws_requests(stack: LocalStack) -> dict[str, int] | None:
    """SQS and DynamoDB requests served so far (only the lite endpoint counts them)."""
    return stack.aws.requests() if stack.aws.lite else None


def _diff(after: dict[str, int] | None, before: dict[str, int] | None) -> dict[str, int] | None:
    if after is None or before is None:
        return None
    return {k: v - before.get(k, 0) for k, v in after.items() if v - before.get(k, 0)}


def _costs(
    requests: dict[str, int],
    *,
    settled: int,
    consumer_invocations: int,
    consumer_seconds: float,
    producer_runs: int,
    memory_mb: int = CONSUMER_MEMORY_MB,
) -> dict[str, Any]:
    """AWS requests per settled job by service, and what a million jobs cost at list prices.

    Jobs still in flight when the run ends have had their requests (publish, receive, slot)
    but are not counted as settled, so the figures per job are a little high, never low.
    """
    jobs = max(1, settled)
    prices = Prices()

    def total(service: str, operations: tuple[str, ...] | None = None) -> int:
        return sum(
            n
            for key, n in requests.items()
            if key.startswith(f"{service}:")
            and (operations is None or key.split(":", 1)[1] in operations)
        )

    sqs = total("sqs") / jobs
    writes = total("dynamodb", DYNAMODB_WRITES) / jobs
    failed = sum(n for k, n in requests.items() if k.endswith(FAILED_CONDITION)) / jobs
    reads = total("dynamodb", DYNAMODB_READS) / jobs
    # billed per item read: a BatchGetItem's keys each, every other read request one
    batch_gets = requests.get("dynamodb:BatchGetItem", 0)
    read_units = reads + (requests.get(f"dynamodb:BatchGetItem{KEYS_READ}", 0) - batch_gets) / jobs
    invocations = consumer_invocations / jobs
    gb_seconds = consumer_seconds * memory_mb / 1024 / jobs
    per_million = {
        "sqs": sqs * prices.sqs_per_million_requests,
        "lambda_requests": invocations * prices.lambda_per_million_requests,
        "lambda_duration": gb_seconds * prices.lambda_per_gb_second * 1e6,
        "dynamodb": writes * prices.dynamodb_per_million_writes
        + read_units * prices.dynamodb_per_million_reads,
    }
    per_million["total"] = sum(per_million.values())
    return {
        "settled": settled,
        "dynamodb_writes_per_job": round(writes, 3),
        # of those, conditional writes whose condition failed (a limiter's wrong guess of its
        # bucket's regime, a slot another consumer took first, an idempotency record in use)
        "dynamodb_failed_conditional_writes_per_job": round(failed, 3),
        "dynamodb_reads_per_job": round(reads, 3),  # requests
        "dynamodb_read_units_per_job": round(read_units, 3),  # what they are billed as
        "aws_requests_per_job": {
            "sqs": round(sqs, 3),
            "dynamodb": round(writes + reads, 3),
            "lambda_consumer_invocations": round(invocations, 4),
        },
        "requests_by_operation": dict(sorted(requests.items())),
        "consumer_gb_seconds_per_job": round(gb_seconds, 5),
        # The local scheduler ticks each second; a deployed schedule runs every few minutes, so
        # the producer's invocations are reported, not priced per job.
        "producer_runs": producer_runs,
        "cost_per_million_jobs_usd": {k: round(v, 2) for k, v in per_million.items()},
    }


@contextlib.contextmanager
def _stack(database_url: str | None, *, lite: bool = False) -> Iterator[LocalStack]:
    # api_url is set so the stack starts no simulator of its own: each scenario starts one.
    with LocalStack(
        database_url=database_url, api_url="http://127.0.0.1:9", aws=LocalAws(lite=lite)
    ) as stack:
        yield stack


#: The issue's real rates: a vendor at p50 150 ms, one scope at 100/s with 4 environments, and
#: ten scopes at 50/s each. Parallel calls are what `sweeper plan` gives for that latency.
REAL_RATE_LATENCY_SECONDS = 0.15
#: With a batching window of 1 s: the ten threads of an environment stay busy through a batch
#: of 100 rather than waiting for the slowest of 10 (measured, one scope at 100/s, 4
#: environments: 0.84 of the quota with batches of 10, 0.92 with 50; later, 40 s runs each:
#: 0.905 / 0.947 / 0.911 with 50 and 0.930 / 0.965 / 0.923 with 100, for one scope on the 1 s
#: and 5 s windows and ten scopes at 10/s). Each batch ends with its slowest call, and the
#: environment takes no slot until its next batch: fewer, longer batches lose less.
REAL_RATE_BATCH_SIZE = 100


def real_rate_scenarios() -> list[Scenario]:
    """Each at a 1-second and a 5-second vendor window, SQS and DynamoDB on lite_aws."""

    def real(
        name: str, limit: int, period: float, environments: int, scopes: int, memory_mb: int
    ) -> Scenario:
        return Scenario(
            name,
            "shared",
            limit,
            period,
            None,
            latency_seconds=REAL_RATE_LATENCY_SECONDS,
            environments=environments,
            parallel_calls=10,
            scopes=scopes,
            batch_size=REAL_RATE_BATCH_SIZE,
            memory_mb=memory_mb,
            cap_cpu=True,
        )

    # Each environment is held to the CPU share Lambda gives its memory, at the memory
    # `sweeper plan` asks for (docs/examples/plan-real-rates.toml: 596 MB for 100/s on 4
    # environments, 1,192 MB for 500/s on 10), rounded up.
    return [
        real("one_scope_100_per_s", 100, 1.0, environments=4, scopes=1, memory_mb=768),
        real("one_scope_100_per_s", 500, 5.0, environments=4, scopes=1, memory_mb=768),
        real("ten_scopes_50_per_s", 50, 1.0, environments=10, scopes=10, memory_mb=1280),
        real("ten_scopes_50_per_s", 250, 5.0, environments=10, scopes=10, memory_mb=1280),
        # What a 2-core machine carries with ten scopes (100 calls/s in all): the per-job
        # figures of many scopes, measured where the machine is not the bound.
        real("ten_scopes_10_per_s", 10, 1.0, environments=4, scopes=10, memory_mb=768),
    ]


#: The real rates run longer than the baselines: the first second of a run is its ramp (the
#: first batches fill, environments start), which costs a 20-second run several points.
REAL_RATE_SECONDS = 60.0


#: The several-limits scenarios (issue 25): each limit on a 1-second window, then a 5-second
#: one at the same rate, as the vendor counts them. One environment's CPU held to its memory's
#: share, as the real rates are; the vendor enforces every limit and counts its 429s apart.
LIMIT_SCENARIOS: dict[str, str] = {
    "a": "20 stores at 2/s each under an app limit of 30/s (the app binds)",
    "b": "10 stores at 5/s each under an app limit of 100/s (the stores bind)",
    "c": "one scope at 100/s, at most 10 calls in flight, vendor p50 300 ms (the cap binds)",
    "d": "ten scopes at 10/s each, one limit (the real rates' last scenario)",
}
#: Each run of a limits scenario (two per scenario: the 1 s and the 5 s window). As long as
#: the real rates: a shorter run understates a scenario by its ramp (measured: (a) at 18 s
#: read several points below its 60 s runs), and the README's figures are 60 s runs.
LIMITS_SECONDS = REAL_RATE_SECONDS
#: The vendor's median latency in (c).
CAP_LATENCY_SECONDS = 0.3
#: The slack of (c)'s rate: a call that got its lease (when another call returns, at no time
#: the limiter knows) takes a slot its batch banked up to this long before, with no write and
#: no wait. Its price, a headroom of T / (T + slack + 0.06 s), leaves the rate well above
#: what the cap allows (about 30/s).
CAP_SLACK_SECONDS = 0.5


def limit_scenarios(name: str) -> list[Scenario]:
    """Scenario `name` of LIMIT_SCENARIOS on a 1-second and a 5-second window."""
    per_scope, scopes, app, cap, latency = {
        "a": (2, 20, 30, None, REAL_RATE_LATENCY_SECONDS),
        "b": (5, 10, 100, None, REAL_RATE_LATENCY_SECONDS),
        "c": (100, 1, None, 10, CAP_LATENCY_SECONDS),
        "d": (10, 10, None, None, REAL_RATE_LATENCY_SECONDS),
    }[name]
    return [
        Scenario(
            name,
            "shared",
            per_scope * period,
            float(period),
            None,
            latency_seconds=latency,
            environments=4,
            parallel_calls=10,
            scopes=scopes,
            batch_size=None,  # what `sweeper plan` recommends for its turnovers
            memory_mb=768,
            cap_cpu=True,
            app_limit=None if app is None else app * period,
            in_flight_cap=cap,
            per_limit=True,
            slack_seconds=CAP_SLACK_SECONDS if cap is not None else 0.0,
        )
        for period in (1, 5)
    ]


def _limits_summary(name: str, runs: list[dict[str, Any]]) -> dict[str, Any]:
    """One scenario's headline over its two runs (the 1 s window's, then the 5 s window's)."""
    one, five = runs
    return {
        "scenario": name,
        "what": LIMIT_SCENARIOS[name],
        "binding_limit": one["binding_limit"],
        "utilization_1s_window": one["utilization_of_binding_limit"],
        "utilization_5s_window": five["utilization_of_binding_limit"],
        "self_caused_429s_by_limit": {
            limit: one["self_caused_429s_by_limit"][limit]
            + five["self_caused_429s_by_limit"][limit]
            for limit in one["self_caused_429s_by_limit"]
        },
        "max_calls_in_any_window_by_limit": {
            "1s": one["max_calls_in_any_window_by_limit"],
            "5s": five["max_calls_in_any_window_by_limit"],
        },
        "vendor_max_in_flight": [one.get("vendor_max_in_flight"), five.get("vendor_max_in_flight")],
        "dynamodb_writes_per_job": [
            one.get("dynamodb_writes_per_job"),
            five.get("dynamodb_writes_per_job"),
        ],
        # A concurrency cap's own figures (CAP_FIGURES), the 1 s window's run, then the 5 s's.
        **{key: [one[key], five[key]] for key in CAP_FIGURES if key in one and key in five},
        "runs": runs,
    }


#: The parts of `bench rate`: the 15/s comparison with its baselines (moto), the adaptive rate
#: at the same quota, the real rates, the several limits and the limits the vendor states (the
#: last four on lite_aws).
PARTS = ("baselines", "adaptive", "real", "limits", "vendor")


def run_rate_bench(
    *,
    consumers: int = 8,
    seconds: float = 20.0,
    quota: str = DEFAULT_QUOTA,
    database_url: str | None = None,
    parts: tuple[str, ...] = PARTS,
    real_seconds: float = REAL_RATE_SECONDS,
    limit_names: tuple[str, ...] = tuple(LIMIT_SCENARIOS),
    limits_seconds: float = LIMITS_SECONDS,
    vendor_names: tuple[str, ...] | None = None,
    vendor_seconds: float = LIMITS_SECONDS,
) -> dict[str, Any]:
    """Every scenario of the chosen parts in one run; see the module docstring."""
    one = Quota.parse(quota)
    limit, period = one.limit, one.period_seconds
    long_window = 5.0
    scenarios = [
        Scenario("sweeper", "shared", limit, period, None),
        Scenario(
            "sweeper",
            "shared",
            round(limit * long_window / period),
            long_window,
            None,
        ),
        Scenario("concurrency_cap_only", "off", limit, period, 1.0),
        Scenario("per_worker_limiter", "per_worker", limit, period, 1.0),
        Scenario("incident", "shared", limit, period, None, incident=True),
    ]
    result: dict[str, Any] = {
        "consumers": consumers,
        "seconds_per_scenario": seconds,
        "seconds_per_real_rate_scenario": real_seconds,
    }
    if "baselines" in parts:
        with _stack(database_url) as stack:
            result["scenarios"] = [
                run_scenario(stack, s, consumers=consumers, seconds=seconds) for s in scenarios
            ]
            result["limiter_cost"] = limiter_cost(stack)
    if "adaptive" in parts:
        # On lite_aws: its backlog (a 45-second run's) deepens moto's queue until each receive
        # takes most of a second, and moto's writes come back after their slots (measured:
        # 216 slots let go late, 4 calls/s on average), so moto would measure itself.
        with _stack(database_url, lite=True) as stack:
            result["adaptive"] = run_scenario(
                stack,
                Scenario("adaptive", "shared", limit, period, 1.0, adaptive=True),
                consumers=consumers,
                seconds=seconds,
            )
    if "real" in parts:
        with _stack(database_url, lite=True) as stack:
            result["real_rates"] = [
                run_scenario(stack, s, consumers=consumers, seconds=real_seconds)
                for s in real_rate_scenarios()
            ]
    if "limits" in parts:
        result["seconds_per_limits_run"] = limits_seconds
        with _stack(database_url, lite=True) as stack:
            result["limits"] = [
                _limits_summary(
                    name,
                    [
                        run_scenario(stack, s, consumers=consumers, seconds=limits_seconds)
                        for s in limit_scenarios(name)
                    ],
                )
                for name in limit_names
            ]
    if "vendor" in parts:
        # imported here: its scenarios build on this module's
        from sweeper_bench.vendor import VENDOR_SCENARIOS, VendorRunOptions, run_vendor_part

        result["seconds_per_vendor_run"] = vendor_seconds
        result["vendor"] = run_vendor_part(
            tuple(VENDOR_SCENARIOS) if vendor_names is None else vendor_names,
            VendorRunOptions(seconds=vendor_seconds),
            database_url,
        )
    result["targets"] = {
        "self_caused_429s": 0,
        "utilization_5s_window_min": 0.95,
        "utilization_1s_window_min": 0.90,
        "calls_beyond_in_flight_during_incident": 0,
        "first_accepted_after_reopen_seconds_max": 1.0,
        "adaptive_seconds_to_reach_0_85_max": 60,
        "adaptive_share_of_calls_answered_429_max": 0.01,
        "dynamodb_writes_per_job_max": 2.5,
        "limits_self_caused_429s_per_limit": 0,
        "limits_binding_utilization_1s_window_min": 0.90,
        "limits_binding_utilization_5s_window_min": 0.95,
        "limits_c_vendor_max_in_flight_max": 10,
        "limits_dynamodb_writes_per_job_max": 2.6,
    }
    return result

"""What the whole stack costs: at rest per month, and per million jobs, from list prices.

Plain arithmetic, as `planning.plan`: every item is a quantity times a unit price, and the
quantities come from the policy file (policies, schedules, alarms as infra/ creates them) and
the plan's per-job figures (requests, Lambda duration, drain time). No free tier is taken off:
an account's free tiers are shared with whatever else it runs.

Prices: on-demand list prices, US East (N. Virginia), arm64, as AWS's pricing pages for each
service state them, read 2026-12-07 (Aurora, VPC/NAT, PrivateLink, CloudWatch, DynamoDB,
Lambda, SQS, X-Ray, Secrets Manager, KMS, EventBridge Scheduler). Other regions differ by a
few per cent. Where a figure is an estimate rather than a price, its comment says so.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from sweeper.config import Policy, SweeperConfig
from sweeper.models import OutcomeClass
from sweeper_tools.deploy.redrive import redrive_schedule
from sweeper_tools.planning.pause import (
    AUTO_PAUSE_AFTER_SECONDS,
    HOURS_PER_MONTH,
    awake_hours,
    connecting_runs,
    ledger_wakes,
    runs_per_month,
)
from sweeper_tools.planning.reads import reads_at_rest_per_month
from sweeper_tools.planning.scope import single_scope

GB = 1e9  # bytes; AWS bills data in GB

# -- list prices, us-east-1, read 2026-12-07 ------------------------------------------------------
AURORA_ACU_HOUR_USD = 0.12  # Aurora Serverless v2 (Standard), per ACU-hour
AURORA_IO_PER_MILLION_USD = 0.20  # Aurora Standard, per million I/O requests
RDS_PROXY_ACU_HOUR_USD = 0.015  # RDS Proxy on Serverless v2, per ACU-hour, 8 ACU minimum
NAT_GATEWAY_HOUR_USD = 0.045  # per NAT gateway-hour
NAT_GB_PROCESSED_USD = 0.045  # per GB through the NAT gateway
INTERFACE_ENDPOINT_AZ_HOUR_USD = 0.01  # PrivateLink interface endpoint, per AZ-hour
INTERFACE_ENDPOINT_GB_USD = 0.01  # per GB through an interface endpoint (first PB)
CLOUDWATCH_ALARM_METRIC_MONTH_USD = 0.10  # standard resolution, per metric an alarm reads
CLOUDWATCH_CUSTOM_METRIC_MONTH_USD = 0.30  # per custom metric-month (first 10,000)
CLOUDWATCH_DASHBOARD_MONTH_USD = 3.00  # per dashboard-month
CLOUDWATCH_LOGS_INGESTED_GB_USD = 0.50  # standard log class, per GB ingested
CLOUDWATCH_LOGS_STORED_GB_MONTH_USD = 0.03  # per GB-month archived
DYNAMODB_WRITE_PER_MILLION_USD = 0.625  # on-demand, per million write request units
DYNAMODB_READ_PER_MILLION_USD = 0.125  # on-demand, per million read request units
LAMBDA_ARM_GB_SECOND_USD = 0.0000133334  # arm64, per GB-second (first 7.5 billion)
LAMBDA_REQUEST_PER_MILLION_USD = 0.20
SQS_REQUEST_PER_MILLION_USD = 0.40  # standard queue, per million requests (64 KB chunks)
XRAY_TRACE_PER_MILLION_USD = 5.00  # per million traces recorded
SECRET_MONTH_USD = 0.40  # Secrets Manager, per secret-month
SECRETS_API_PER_10K_USD = 0.05  # Secrets Manager, per 10,000 API calls
KMS_KEY_MONTH_USD = 1.00  # per customer managed key-month
SCHEDULER_INVOCATION_PER_MILLION_USD = 1.00  # EventBridge Scheduler, per million invocations

# -- the stack's shape: the same counts infra/ creates (tests/infra/test_plan_costs.py) ----------
NAT_GATEWAYS = 1  # infra/network.py NAT_GATEWAY_COUNT
AVAILABILITY_ZONES = 2  # infra/network.py MAX_AVAILABILITY_ZONES
INTERFACE_ENDPOINT_SERVICES = 2  # SQS and Secrets Manager (the lean profile has none)
DEFAULT_MIN_ACU = 0.5  # infra's database_min_capacity_acu default
#: A cluster that resumes from 0 runs at this capacity at least, until it pauses again; how
#: long it is awake is `planning.pause`'s.
MIN_ACTIVE_ACU = 0.5
RDS_PROXY_MIN_ACU = 8
LEDGER_SECRETS = 3  # admin, application and reader users
KMS_KEYS = 1
#: Alarm metrics (each billed): the ledger's capacity alarm and its three rotations' errors.
LEDGER_ALARM_METRICS = 1 + 3
#: A policy's pipeline alarms that read one metric each (queue age and backlog, dead letters,
#: throttles, consumer, producer and redrive errors, schedule dead letters x2, oldest eligible
#: age, terminal failures, snooze exhausted, auth circuit, mismatched, lease expiries, publish
#: failures), and the two stall alarms' metrics (claims 2, completions 4).
PIPELINE_ALARM_METRICS = 16 + 2 + 4
INTAKE_ALARM_METRICS = 3  # + 1 with the webhook
DISCOVERY_ALARM_METRICS = 3
RETENTION_ALARM_METRICS = 3
#: The custom metrics a scheduled run sends with nothing to do (functions/*/app.py, one
#: `policy` dimension): a run sends only the counts that are not zero (observability's
#: `add_counts`), and the oldest eligible age only when something is due. So an idle producer
#: and redrive send none; discovery its rows scanned, its completed pass and its lag (sent on
#: every run: its alarm reads a missing lag as breaching); the prune the settled jobs, their
#: events and the runs that work arriving daily leaves to delete. CloudWatch bills a metric by
#: the hours it is sent in, so a function that runs less than hourly bills that share of a month.
IDLE_METRICS_PRODUCER = 0
IDLE_METRICS_REDRIVE = 0
IDLE_METRICS_DISCOVERY = 3
IDLE_METRICS_RETENTION = 3
#: SQS long polls an event source mapping makes on an idle queue: estimate, five pollers each
#: waiting 20 s.
IDLE_POLLS_PER_MAPPING_MONTH = 5 * 3 * 60 * HOURS_PER_MONTH
#: Lambda GB-seconds of one scheduled run that finds nothing to do (estimate: 0.5 s at 512 MB).
IDLE_RUN_GB_SECONDS = 0.25

# -- per job: the code's known work ---------------------------------------------------------------
#: Measured (tests/integration/test_batch_log.py: batches of 10 and of 100 accepted jobs): the
#: consumer logs one line per batch (sweeper.consumer.batch_log), so a job adds only its
#: ProcessingSeconds value to the metrics blob ...
LOG_BYTES_PER_JOB = 25
#: ... and each invocation its batch line and metrics blob (830 bytes measured), plus Lambda's
#: START, END and REPORT lines and the trace id field on the line (about 470). A line per job,
#: as before, took 531 bytes a job more.
LOG_BYTES_PER_INVOCATION = 1300
#: Traces a consumer invocation records, by its policy's `consumer.tracing` (Lambda's mode; no
#: X-Ray sampling rule applies to Lambda). Active: every invocation, at most: Lambda follows the
#: sampling decision its messages carry, the producer's run's, and each run is sampled (a few an
#: hour, inside the one a second Lambda records); Lambda's own rate (1 a second and 5% of the
#: rest) would apply only to messages without one. PassThrough: Lambda sends none.
CONSUMER_TRACES_PER_INVOCATION = {"active": 1.0, "passthrough": 0.0}
#: Aurora bills a write I/O per push of up to 4 KB of log records to its storage (concurrent
#: commits may share one), a read I/O per page not in its buffer cache (a drain reads rows
#: written moments before: none counted). Measured (tests/integration/test_ledger_io.py): a
#: job is 1.14 write transactions of about 2 KB of PostgreSQL's log (scheduled, claimed,
#: published, settled), so at most 1.14 write I/Os; billed 1.2, rounded up.
AURORA_IOS_PER_JOB = 1.2
LOG_BYTES_PER_WRITE_IO = 4096
#: The ledger's CPU a job (the claim, the settle, the event row): PostgreSQL's CPU per job in
#: `sweeper bench rate` (docs/benchmarks.md: 0.7 ms on a quiet machine, 1.4 ms on a busy host;
#: the busier taken). Measured on PostgreSQL, not on Aurora.
LEDGER_CPU_SECONDS_PER_JOB = 0.0014
#: An ACU is about 2 GiB of memory "and corresponding CPU" (Aurora's documentation); the
#: memory-optimized classes Aurora serverless is sized against (r6g, r7g) give 8 GiB a vCPU:
#: four ACU a vCPU.
ACU_PER_VCPU = 4.0
#: Estimate: the share of its CPU a cluster runs at before Aurora adds capacity.
LEDGER_CPU_TARGET_SHARE = 0.5
ACU_STEP = 0.5  # Aurora serverless v2 capacity moves in half-ACU steps
#: Bytes per job to the vendor through the NAT (request and answer), and to SQS (sent once,
#: received once; the body is under 1 KB). Only the producer's send leaves a function's network
#: interface (the event source mapping receives from outside the VPC), so the SQS figure is an
#: upper bound on what the interface endpoint, or in the lean profile the NAT, carries. The lean
#: profile's secret reads also cross the NAT: a few KB a run, under a cent a month, not billed.
VENDOR_BYTES_PER_JOB = 2000
SQS_BYTES_PER_JOB = 2000
#: One GetSecretValue per run that connects to the ledger, an upper bound (a warm environment
#: caches it for database_secret_max_age_seconds): the secret is read only to connect, and at
#: rest a producer run with nothing due reads its wake item only, a redrive run with no dead
#: letter nothing (planning.pause counts the runs that connect).
SECRET_CALLS_PER_RUN = 1
#: A consumer invocation's end on a cluster that may pause (sweeper.ledger.wake_refresh): the
#: wake item read (strongly consistent, under 4 KB: one read unit) and raised (under 1 KB: one
#: write unit), and the session it closes opened again by the next invocation. Estimate: 0.05 s
#: of the function for that connection (TCP, TLS and SCRAM authentication, a few round trips
#: inside the VPC); the secret stays cached (database_secret_max_age_seconds).
WAKE_REFRESH_WRITES = 1
WAKE_REFRESH_READS = 1
LEDGER_CONNECT_SECONDS = 0.05
#: Months a log group keeps its events (infra/function.py LOG_RETENTION, three months).
LOG_RETENTION_MONTHS = 3


class Network(StrEnum):
    DEFAULT = "default"  # interface endpoints for SQS and Secrets Manager
    LEAN = "lean"  # no interface endpoints: that traffic goes through the NAT


@dataclass(frozen=True, slots=True)
class CostItem:
    """One line of the bill: a quantity of a unit at a price."""

    name: str
    quantity: float
    unit: str
    unit_usd: float

    @property
    def usd(self) -> float:
        return self.quantity * self.unit_usd

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "quantity": round(self.quantity, 6),
            "unit": self.unit,
            "unit_usd": self.unit_usd,
            "usd": round(self.usd, 4),
        }


@dataclass(frozen=True, slots=True)
class Deployment:
    """What the policy file does not say: the cluster's minimum and the network profile."""

    min_acu: float = DEFAULT_MIN_ACU
    network: Network = Network.DEFAULT


def dashboards(policies: Sequence[Policy]) -> int:
    """Each policy's own, which also draws the ledger's row; the stack has none
    (infra/observability)."""
    return len(policies)


def alarm_metrics(policy: Policy) -> int:
    """The metrics the alarms infra/ creates for one policy read (each billed)."""
    count = PIPELINE_ALARM_METRICS + len(OutcomeClass)  # the vendor failure rates' one alarm
    count += 1 if single_scope(policy) is not None else 0  # the limiter's saturation
    count += INTAKE_ALARM_METRICS + (1 if policy.intake.webhook else 0)
    count += DISCOVERY_ALARM_METRICS if policy.discovery is not None else 0
    count += RETENTION_ALARM_METRICS if policy.retention.enabled else 0
    return count


def scheduled_functions(policy: Policy) -> list[tuple[str, str, int]]:
    """Each scheduled function of a policy: (expression, timezone, custom metrics a run with
    nothing to do emits). Which of its runs connect to the ledger is planning.pause's."""
    found = [
        (policy.schedule, policy.timezone, IDLE_METRICS_PRODUCER),
        # as infra/redrive.py schedules it: every 15 minutes, or every minute (its option)
        (redrive_schedule(policy.redrive), "UTC", IDLE_METRICS_REDRIVE),
    ]
    if policy.discovery is not None:
        found.append((policy.discovery.schedule, policy.timezone, IDLE_METRICS_DISCOVERY))
    if policy.retention.enabled:
        found.append((policy.retention.schedule, policy.timezone, IDLE_METRICS_RETENTION))
    return found


def idle_metrics(policy: Policy) -> float:
    """Custom metric-months a policy's scheduled runs emit in a month with nothing to do."""
    return sum(
        metrics * min(1.0, runs_per_month(e, tz) / HOURS_PER_MONTH)
        for e, tz, metrics in scheduled_functions(policy)
    )


def drain_acu(throughput_per_second: float) -> float:
    """The capacity the ledger needs to claim and settle `throughput_per_second` jobs: their
    CPU at the target share, in half-ACU steps, at least what an awake cluster runs at."""
    cpu = LEDGER_CPU_SECONDS_PER_JOB * throughput_per_second
    acu = math.ceil(cpu * ACU_PER_VCPU / LEDGER_CPU_TARGET_SHARE / ACU_STEP - 1e-9) * ACU_STEP
    return max(MIN_ACTIVE_ACU, acu)


def consumer_traces_per_invocation(tracing: str) -> float:
    """The traces X-Ray records per consumer invocation under the consumer's tracing mode."""
    return CONSUMER_TRACES_PER_INVOCATION[tracing]


def at_rest(config: SweeperConfig, deployment: Deployment) -> list[CostItem]:
    """The stack deployed with nothing to do, per month."""
    policies = config.policies
    hours = HOURS_PER_MONTH
    if deployment.min_acu > 0:
        acu_hours = deployment.min_acu * hours
    else:
        acu_hours = MIN_ACTIVE_ACU * awake_hours(policies)
    endpoints = 0 if deployment.network is Network.LEAN else INTERFACE_ENDPOINT_SERVICES
    runs = sum(runs_per_month(e, tz) for p in policies for e, tz, *_ in scheduled_functions(p))
    secrets = LEDGER_SECRETS + sum(1 for p in policies if p.intake.webhook)
    alarms = LEDGER_ALARM_METRICS + sum(alarm_metrics(p) for p in policies)
    mappings = 2 * len(policies)  # the consumer's and the intake's queues
    return [
        CostItem("Aurora Serverless v2", acu_hours, "ACU-h", AURORA_ACU_HOUR_USD),
        CostItem("NAT gateway", NAT_GATEWAYS * hours, "h", NAT_GATEWAY_HOUR_USD),
        CostItem(
            "Interface endpoints",
            endpoints * AVAILABILITY_ZONES * hours,
            "endpoint-AZ-h",
            INTERFACE_ENDPOINT_AZ_HOUR_USD,
        ),
        CostItem("CloudWatch alarms", alarms, "alarm metrics", CLOUDWATCH_ALARM_METRIC_MONTH_USD),
        CostItem(
            "CloudWatch metrics",
            sum(idle_metrics(p) for p in policies),
            "custom metrics",
            CLOUDWATCH_CUSTOM_METRIC_MONTH_USD,
        ),
        CostItem(
            "CloudWatch dashboard",
            dashboards(policies),
            "dashboards",
            CLOUDWATCH_DASHBOARD_MONTH_USD,
        ),
        CostItem("KMS key", KMS_KEYS, "key", KMS_KEY_MONTH_USD),
        CostItem("Secrets Manager secrets", secrets, "secrets", SECRET_MONTH_USD),
        CostItem(
            "Secrets Manager calls",
            connecting_runs(policies, may_pause=deployment.min_acu == 0)
            * SECRET_CALLS_PER_RUN
            / 10_000,
            "10k calls",
            SECRETS_API_PER_10K_USD,
        ),
        CostItem("Scheduler", runs / 1e6, "M invocations", SCHEDULER_INVOCATION_PER_MILLION_USD),
        CostItem(
            "Lambda scheduled runs",
            runs * IDLE_RUN_GB_SECONDS,
            "GB-s",
            LAMBDA_ARM_GB_SECOND_USD,
        ),
        CostItem(
            "DynamoDB reads",  # the scheduled runs' wake item and closure marker
            sum(reads_at_rest_per_month(p) for p in policies) / 1e6,
            "M read units",
            DYNAMODB_READ_PER_MILLION_USD,
        ),
        CostItem(
            "SQS idle polling",
            mappings * IDLE_POLLS_PER_MAPPING_MONTH / 1e6,
            "M requests",
            SQS_REQUEST_PER_MILLION_USD,
        ),
    ]


def rds_proxy() -> CostItem:
    """The optional RDS Proxy (`-c rds_proxy=true`), per month."""
    return CostItem(
        "RDS Proxy (optional)", RDS_PROXY_MIN_ACU * HOURS_PER_MONTH, "ACU-h", RDS_PROXY_ACU_HOUR_USD
    )


def per_million_jobs(
    requests_per_job: dict[str, float],
    throughput_per_second: float,
    deployment: Deployment,
    *,
    tracing: str = "passthrough",
    consumer_memory_mb: int = 512,
) -> list[CostItem]:
    """A million jobs drained at the plan's throughput, with the plan's requests per job. The
    ledger is billed the capacity the drain needs beyond the minimum the month already pays;
    X-Ray, the traces the consumer's `tracing` records; on a cluster that may pause, what each
    consumer invocation's end adds (`_run_ends`)."""
    network = deployment.network
    jobs = 1e6
    invocations = requests_per_job["lambda_invocations"] * jobs
    drain_hours = jobs / max(throughput_per_second, 1e-9) / 3600
    vendor_gb = VENDOR_BYTES_PER_JOB * jobs / GB
    sqs_gb = SQS_BYTES_PER_JOB * jobs / GB
    log_gb = (LOG_BYTES_PER_JOB * jobs + LOG_BYTES_PER_INVOCATION * invocations) / GB
    lean = network is Network.LEAN
    items = [
        CostItem(
            "Lambda consumer",
            requests_per_job["lambda_gb_seconds"] * jobs,
            "GB-s",
            LAMBDA_ARM_GB_SECOND_USD,
        ),
        CostItem(
            "Lambda requests", invocations / 1e6, "M requests", LAMBDA_REQUEST_PER_MILLION_USD
        ),
        CostItem(
            "DynamoDB",
            requests_per_job["dynamodb_writes"],
            "M write units",
            DYNAMODB_WRITE_PER_MILLION_USD,
        ),
        *_reads(requests_per_job.get("dynamodb_reads", 0.0)),
        CostItem("SQS", requests_per_job["sqs"], "M requests", SQS_REQUEST_PER_MILLION_USD),
        CostItem(
            "Aurora while draining",
            drain_hours * max(0.0, drain_acu(throughput_per_second) - deployment.min_acu),
            "ACU-h",
            AURORA_ACU_HOUR_USD,
        ),
        CostItem("Aurora I/O", AURORA_IOS_PER_JOB, "M I/Os", AURORA_IO_PER_MILLION_USD),
        CostItem("CloudWatch Logs", log_gb, "GB", CLOUDWATCH_LOGS_INGESTED_GB_USD),
        CostItem(
            "CloudWatch Logs storage",
            log_gb * LOG_RETENTION_MONTHS,
            "GB-months",
            CLOUDWATCH_LOGS_STORED_GB_MONTH_USD,
        ),
        CostItem(
            "X-Ray",
            invocations * consumer_traces_per_invocation(tracing) / 1e6,
            "M traces",
            XRAY_TRACE_PER_MILLION_USD,
        ),
        CostItem(
            "NAT data processing",
            vendor_gb + (sqs_gb if lean else 0.0),
            "GB",
            NAT_GB_PROCESSED_USD,
        ),
    ]
    if not lean:
        items.append(CostItem("Interface endpoint data", sqs_gb, "GB", INTERFACE_ENDPOINT_GB_USD))
    if deployment.min_acu == 0:
        items += _run_ends(invocations, consumer_memory_mb)
    return items


def _reads(reads_per_job: float) -> list[CostItem]:
    """The read units a million jobs make (`planning.reads`), a line beside the writes; none
    where a job reads nothing."""
    if not reads_per_job:
        return []
    return [
        CostItem("DynamoDB reads", reads_per_job, "M read units", DYNAMODB_READ_PER_MILLION_USD)
    ]


def _run_ends(invocations: float, memory_mb: int) -> list[CostItem]:
    """What a consumer invocation on a cluster that may pause adds as it ends
    (sweeper.ledger.wake_refresh.end_run): the wake item's refresh, a strongly consistent
    GetItem and a conditional write, each of an item under 1 KB (one unit), and a new session
    for the next invocation."""
    return [
        CostItem(
            "Wake item refresh writes",
            invocations * WAKE_REFRESH_WRITES / 1e6,
            "M write units",
            DYNAMODB_WRITE_PER_MILLION_USD,
        ),
        CostItem(
            "Wake item refresh reads",
            invocations * WAKE_REFRESH_READS / 1e6,
            "M read units",
            DYNAMODB_READ_PER_MILLION_USD,
        ),
        CostItem(
            "Ledger reconnects",
            invocations * LEDGER_CONNECT_SECONDS * memory_mb / 1024,
            "GB-s",
            LAMBDA_ARM_GB_SECOND_USD,
        ),
    ]


def total(items: Iterable[CostItem]) -> float:
    return math.fsum(item.usd for item in items)


#: The columns `sweeper plan` prints: as deployed, paused (minimum 0), paused and lean.
def rest_profiles(min_acu: float) -> dict[str, Deployment]:
    return {
        f"{min_acu:g} ACU": Deployment(min_acu=min_acu),
        "paused": Deployment(min_acu=0.0),
        "paused + lean": Deployment(min_acu=0.0, network=Network.LEAN),
    }


def stack_costs(
    config: SweeperConfig,
    requests_per_job: dict[str, float],
    throughput_per_second: float,
    *,
    min_acu: float = DEFAULT_MIN_ACU,
    jobs_per_month: int = 0,
    policy: Policy | None = None,
) -> dict[str, Any]:
    """The whole stack's bill in each profile: at rest, per million jobs of `policy` (the
    planned one; the file's first when None), and a month at `jobs_per_month`."""
    profiles = rest_profiles(min_acu)
    rest = {name: at_rest(config, d) for name, d in profiles.items()}
    consumer = (policy or config.policies[0]).consumer
    million = {
        name: per_million_jobs(
            requests_per_job,
            throughput_per_second,
            d,
            tracing=consumer.tracing,
            consumer_memory_mb=consumer.memory_mb,
        )
        for name, d in profiles.items()
    }
    month = {
        name: total(rest[name]) + total(million[name]) * jobs_per_month / 1e6 for name in profiles
    }
    return {
        "at_rest_per_month": {
            name: {"items": [i.as_dict() for i in items], "total_usd": round(total(items), 2)}
            for name, items in rest.items()
        },
        "rds_proxy_per_month": rds_proxy().as_dict(),
        "paused_ledger_awake": {
            "acu": MIN_ACTIVE_ACU,
            "pause_after_seconds": AUTO_PAUSE_AFTER_SECONDS,
            "hours": round(awake_hours(config.policies), 3),
            "wakes": [w.as_dict() for w in ledger_wakes(config.policies)],
        },
        "per_million_jobs": {
            name: {"items": [i.as_dict() for i in items], "total_usd": round(total(items), 2)}
            for name, items in million.items()
        },
        "jobs_per_month": jobs_per_month,
        "per_month": {name: round(usd, 2) for name, usd in month.items()},
    }

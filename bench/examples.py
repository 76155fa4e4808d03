"""`sweeper bench examples`: each docs/examples file as shipped, beside what `sweeper plan` says.

Each example's policy runs as synth deploys it (its consumer's sizing derived where the file
sets none) through the demo (`sweeper demo --config FILE --policy P`): the whole local pipeline
against the vendor simulator, whose contract for that example enforces the file's limits. What
it carried is measured at the ledger (jobs settled per second from the first settlement to the
last) and the vendor's 429s at the simulator. Beside it, the plan of the same policy for the
same busy scopes, the latency the simulator serves that contract, and the local stack's own
time per call (`LOCAL_CALL_OVERHEAD_SECONDS`, as the demo plans its own policy).

Utilization is of the binding limit as the vendor publishes it (its rate times the keys busy, or
a cap of N in flight over the plan's mean service time), before any headroom: the figure a user
reads. The ratio is measured over the plan's throughput. A limit whose rate is learned from the
vendor's answers is read, and planned, at the rate the simulator's answers state (`stated`),
not at the ceiling the file tells: that is the rate sweeper paces by and the vendor enforces.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sweeper.config import LimitConfig, Policy
from sweeper_bench.process_cpu import by_role, snapshot
from sweeper_local.demo import LOCAL_CALL_OVERHEAD_SECONDS, run_demo
from sweeper_local.demo_report import DemoOptions
from sweeper_local.github_artifacts import DEFAULT_CORE
from sweeper_local.graphql_cost import STANDARD_STORE_RESTORE_RATE
from sweeper_tools.planning.consumer_defaults import deployed_config
from sweeper_tools.planning.limits import planned_keys
from sweeper_tools.planning.plan import Plan, PlanInput, make_plan
from sweeper_tools.policy_file import load_config

REPO_ROOT = Path(__file__).resolve().parents[1]
EXAMPLES_DIR = REPO_ROOT / "docs" / "examples"
#: The loopback round trip of a contract that adds no latency of its own (p50, p95).
LOOPBACK_LATENCY = (0.003, 0.005)
#: The stand-in's request counts (sweeper_local.lite_aws) that are writes, failed conditions of
#: them, and items read.
WRITES = ("PutItem", "UpdateItem", "DeleteItem", "BatchWriteItem")
FAILED_CONDITIONS = tuple(f"{name}:condition_failed" for name in WRITES)
ITEMS_READ = ("GetItem", "BatchGetItem:keys")


@dataclass(frozen=True, slots=True)
class Example:
    """One policy of one example file, and the load it is run with."""

    name: str
    file: str
    policy: str
    jobs: int
    #: Tenants the jobs are spread over: the busy scopes (`sweeper plan --scopes`).
    tenants: int
    #: What the simulator's contract for it serves (p50, p95 seconds).
    latency: tuple[float, float] = LOOPBACK_LATENCY
    #: Why it is not run (None: run).
    skip: str | None = None
    #: Where `file` is: docs/examples, or the repository's root for the shipped sweeper.toml.
    directory: Path = EXAMPLES_DIR
    #: Limits whose rate is learned, at the rate the simulator's answers state: (limit name,
    #: calls, period seconds) each.
    stated: tuple[tuple[str, int, float], ...] = ()


#: Why an s3_delete example is not run.
S3_LIMIT = (
    "S3's 3,500 DELETE/s per prefix: the AWS emulator enforces none, and the local stack's "
    "consumers come nowhere near it"
)

EXAMPLES: tuple[Example, ...] = (
    # 2/s per store under 40/s for the app: 25 stores, so that the app's limit binds.
    Example("listings", "listings.toml", "listings", 1000, 25),
    # 100/s and 20 in flight per account, each call 50 ms at the provider: one account.
    Example("refunds", "refunds.toml", "refunds", 1500, 1, latency=(0.053, 0.055)),
    # 700 a minute per account: two accounts, a minute's worth.
    Example("helpdesk", "helpdesk.toml", "helpdesk", 1400, 2),
    Example(
        "payments",
        "payments.toml",
        "payments",
        0,
        0,
        skip="the simulator's payments provider enforces no rate (the file's 100 a minute per "
        "account is the limiter's alone)",
    ),
    Example(
        "s3-exports",
        "s3-exports.toml",
        "s3-exports",
        0,
        0,
        skip=S3_LIMIT,
    ),
    Example("dumps", "dumps.toml", "dumps", 0, 0, skip=S3_LIMIT),
    # 900 points a minute per owner at 5 a DELETE (3/s), 100 in flight: four owners, a minute.
    # The primary limit is learned: the simulator's answers state GitHub's 5,000 an hour.
    Example(
        "github-artifacts",
        "github-artifacts.toml",
        "github-artifacts",
        720,
        4,
        stated=(("core", *DEFAULT_CORE),),
    ),
    # A store's GraphQL bucket, told 200 points/s at 10 a delete as a ceiling, its pace learned
    # from the simulator's store: Shopify's Standard plan, 100 points/s (10 deletes a second).
    Example(
        "shopify-graphql",
        "shopify-graphql.toml",
        "shopify-graphql",
        600,
        1,
        stated=(("points", int(STANDARD_STORE_RESTORE_RATE), 1.0),),
    ),
    # The default delete contract, one global quota of 100/s at 2-5 ms.
    Example("plan-real-rates:one-scope", "plan-real-rates.toml", "one-scope", 2000, 5),
    Example(
        "plan-real-rates:ten-scopes",
        "plan-real-rates.toml",
        "ten-scopes",
        0,
        0,
        skip="ten scopes at 50/s are 500 calls a second: beyond the local stack on two cores",
    ),
    # The shipped sweeper.toml: 40/s per tenant at 0.8 of it, one busy tenant.
    Example("shipped", "sweeper.toml", "exports", 1200, 1, directory=REPO_ROOT),
)


def machine_ticks() -> tuple[int, int]:
    """The machine's CPU ticks so far: (busy, all), from /proc/stat ((0, 0) off Linux)."""
    try:
        with open("/proc/stat", encoding="ascii") as stat:
            fields = [int(x) for x in stat.readline().split()[1:]]
    except OSError:
        return (0, 0)
    idle = fields[3] + fields[4]  # idle and iowait
    return (sum(fields) - idle, sum(fields))


def busy_share(before: tuple[int, int], after: tuple[int, int]) -> float | None:
    """The share of the machine's CPU time busy between two readings (None: no reading)."""
    total = after[1] - before[1]
    return None if total <= 0 else round((after[0] - before[0]) / total, 3)


def dynamodb_per_job(requests: dict[str, float] | None) -> dict[str, float | None]:
    """DynamoDB writes (conditional ones that failed among them) and items read per job."""
    if requests is None:
        return {"dynamodb_writes_per_job": None}

    def total(names: tuple[str, ...]) -> float:
        return round(sum(requests.get(f"dynamodb:{name}", 0.0) for name in names), 2)

    return {
        "dynamodb_writes_per_job": total(WRITES),
        "dynamodb_failed_conditions_per_job": total(FAILED_CONDITIONS),
        "dynamodb_items_read_per_job": total(ITEMS_READ),
    }


def published_per_second(limit: LimitConfig, keys: int, mean_service: float) -> float:
    """What a limit allows at `keys` busy keys as the vendor states it, before headroom: its
    rate, or its cap over the mean service time, the smaller."""
    allowed: list[float] = []
    rate = limit.call_rate  # a rate counted in points, in calls
    if rate is not None:
        allowed.append(rate.limit / rate.period_seconds)
    if limit.max_in_flight is not None:
        allowed.append(limit.max_in_flight / mean_service)
    return min(allowed) * keys


def binding_limit(policy: Policy, plan: Plan, scopes: int) -> tuple[str, float]:
    """The limit with the smallest published allowance at the plan's keys, and that allowance."""
    keys = planned_keys(policy, scopes, {})
    allowed = {
        limit.name: published_per_second(limit, keys[limit.name], plan.mean_service_seconds)
        for limit in policy.limits
    }
    name = min(allowed, key=allowed.__getitem__)
    return name, allowed[name]


def example_policy(example: Example) -> Policy:
    """The example's policy as synth deploys it."""
    return deployed_config(load_config(example.directory / example.file)).policy(example.policy)


def as_stated(policy: Policy, example: Example) -> Policy:
    """The policy with each learned limit of the example at the rate its vendor states."""
    if not example.stated:
        return policy
    data = policy.model_dump(mode="json", by_alias=True, exclude_unset=True)
    data.pop("quota", None)  # stated by its [[limits]]: the first is the scope and quota
    data.pop("scope", None)
    rates = {name: (calls, period) for name, calls, period in example.stated}
    for limit in data["limits"]:
        if limit["name"] in rates:
            limit["rate"]["limit"], limit["rate"]["period_seconds"] = rates[limit["name"]]
    return Policy.model_validate(data).model_copy(update={"consumer": policy.consumer})


def example_plan(policy: Policy, example: Example) -> Plan:
    """`sweeper plan` of the policy at the example's scopes and the simulator's latency, with
    the local stack's own time per call."""
    p50, p95 = example.latency
    given = PlanInput(
        latency_p50_seconds=p50,
        latency_p95_seconds=p95,
        scopes=max(1, example.tenants),
        overhead_seconds=LOCAL_CALL_OVERHEAD_SECONDS,
    )
    return make_plan(policy, given)


def run_example(
    example: Example,
    database_url: str | None,
    *,
    memory_mb: int | None = None,
    cap_cpu: bool = False,
) -> dict[str, Any]:
    """One example's row: measured, planned, and their ratio. `memory_mb` replaces the
    consumer's memory; `cap_cpu` holds each environment to that memory's CPU share."""
    row: dict[str, Any] = {"example": example.name}
    if example.skip is not None:
        return row | {"skipped": example.skip}
    policy = example_policy(example)
    if memory_mb is not None:
        consumer = policy.consumer.model_copy(update={"memory_mb": memory_mb})
        policy = policy.model_copy(update={"consumer": consumer})
    stated = as_stated(policy, example)  # the demo runs the file's; the row reads the vendor's
    plan = example_plan(stated, example)
    binding, published = binding_limit(stated, plan, example.tenants)
    cpu_before, busy_before = snapshot(), machine_ticks()
    report = run_demo(
        DemoOptions(
            jobs=example.jobs,
            tenants=example.tenants,
            consumers=policy.consumer.environments,
            policy=policy,
            database_url=database_url,
            timeout_seconds=max(120.0, 4 * example.jobs / plan.throughput_per_second),
            sources=("sql",),
            cap_consumer_cpu=cap_cpu,
        )
    )
    cpu = by_role(cpu_before, snapshot(), os.getpid(), {})
    busy = busy_share(busy_before, machine_ticks())
    measured = report.settled_per_second or 0.0
    return row | {
        "jobs": example.jobs,
        "scopes": example.tenants,
        "consumer": {
            "environments": policy.consumer.environments,
            "parallel_calls": policy.consumer.parallel_calls,
            "batch_size": policy.consumer.batch_size,
            "batch_window_seconds": policy.consumer.batch_window_seconds,
            "memory_mb": policy.consumer.memory_mb,
            "cpu_capped": cap_cpu,
        },
        # the largest peak resident memory a consumer environment reached (Lambda's "Max Memory
        # Used"), beside the memory it was given
        "consumer_max_rss_mb": report.consumer_max_rss_mb,
        "consumer_cpu_ms_per_job": report.consumer_cpu_ms_per_job,
        "all_final": report.all_final,
        "binding_limit": binding,
        "binding_per_second": round(published, 3),
        "measured_per_second": measured,
        "utilization": round(measured / published, 3),
        "vendor_429s": report.vendor_429s,
        "plan_per_second": plan.throughput_per_second,
        "plan_binds": plan.binding,
        "plan_turnover_share": plan.turnover_share,
        "measured_over_plan": round(measured / plan.throughput_per_second, 3),
        # what a job cost the stand-in, beside the plan's limiter and idempotency writes
        **dynamodb_per_job(report.aws_requests_per_job),
        "plan_dynamodb_writes_per_job": plan.requests_per_job["dynamodb_writes"],
        "gate_deferrals": report.gate_deferrals,
        "limiter_waits": report.limiter_waits,
        "elapsed_seconds": report.elapsed_seconds,
        # the local stack's CPU per job, by process role, and how busy the machine's cores were
        "stack_cpu_ms_per_job": {k: round(1000 * v / example.jobs, 1) for k, v in cpu.items()},
        "machine_busy_share": busy,
        "log_file": report.log_file,
    }


def run_examples_bench(
    names: tuple[str, ...] = (),
    database_url: str | None = None,
    *,
    memory_mb: int | None = None,
    cap_cpu: bool = False,
) -> dict[str, Any]:
    """Every example (or those named), one after another, with the machine's load."""
    chosen = [e for e in EXAMPLES if not names or e.name in names or e.file[:-5] in names]
    before = os.getloadavg()
    rows = [
        run_example(example, database_url, memory_mb=memory_mb, cap_cpu=cap_cpu)
        for example in chosen
    ]
    return {
        "examples": rows,
        "overhead_seconds": LOCAL_CALL_OVERHEAD_SECONDS,
        "load_before": [round(x, 2) for x in before],
        "load_after": [round(x, 2) for x in os.getloadavg()],
    }


def example_names() -> list[str]:
    """The names `--example` takes: each example's, and each file's stem."""
    return list(dict.fromkeys([e.name for e in EXAMPLES] + [e.file[:-5] for e in EXAMPLES]))

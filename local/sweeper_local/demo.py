"""`sweeper demo`: the whole pipeline on one machine, real at every hop.

Seed N obligations over T tenants; invoke the producer handler with the scheduler's event once a
second (as EventBridge Scheduler would, each tick its own scheduled time); let the local event
source feed the consumer handler in worker processes; stop when every obligation is final.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import secrets
import statistics
import tempfile
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sweeper.actions.http import HttpAction
from sweeper.config import ConsumerConfig, HttpActionConfig, Policy, Quota
from sweeper.endpoints import LocalFile, PolicyEndpoints
from sweeper.limits import MAX_BATCH_SIZE_WITHOUT_WINDOW
from sweeper.models import ActionCall, JobStatus
from sweeper.observability import Metric
from sweeper_local.action_secrets import LOCAL_SECRETS_ENV, parse_local_secrets, with_local_secrets
from sweeper_local.action_targets import make_action_targets, put_action_objects
from sweeper_local.aws import LOCAL_REGION
from sweeper_local.background import live_local_file
from sweeper_local.demo_audit import (
    SINCE_EVER,
    aws_requests,
    contract_figures,
    key_stats,
    requests_per_job,
    settled_rate,
    vendor_audit,
    vendor_contract,
    vendor_utilization,
)
from sweeper_local.demo_report import DemoOptions, DemoReport, demo_problem, refused_at_doors
from sweeper_local.doors import feed_doors
from sweeper_local.errors import LocalStackError
from sweeper_local.intake import LocalIntake
from sweeper_local.metric_totals import CountingSink
from sweeper_local.pipeline import LocalPipeline
from sweeper_local.rehearsal import check_rehearsal
from sweeper_local.stack import LocalStack
from sweeper_local.vendor import QuotaScope
from sweeper_local.webhook import LocalWebhook
from sweeper_tools.endpoints import write_local_file
from sweeper_tools.planning.consumer_defaults import derived_consumer

CONSUMER_TIMEOUT_SECONDS = 30
#: The demo's quota when neither --rate nor a policy file gives one.
DEFAULT_DEMO_QUOTA = Quota(limit=1000, period_seconds=1)
#: Calls made one after another, at the rate the demo will keep, to measure the vendor's
#: latency before the demo plans.
PROBE_CALLS = 8
#: The longest the demo waits, after its probes, for them to leave the vendor's quota window
#: (so that the limiter, which never saw them, cannot be refused for them).
MAX_PROBE_WINDOW_WAIT_SECONDS = 10.0
#: Whose the probe calls are: a tenant and key prefix of their own, never a policy's.
PROBE_TENANT = "sweeper-latency-probe"
#: Sweeper's own time per call on the local stack, besides the vendor's latency (the plan's
#: `overhead_seconds`): the limiter's write and the wait for its lead, the two idempotency
#: writes, the ledger update, each a round trip to a process on the same two cores, and the
#: threads' turns at the GIL. Measured in a 2,000-job demo at 100/s (docs/decisions.md,
#: 2026-12-02): 0.246 s of processing per job against a mean vendor latency of 0.149 s, so
#: about 0.1 s. The plan's default (0.03 s) is a deployed function's, a few milliseconds per
#: DynamoDB write: with it, 8 consumers got 24 calls in flight for the 23 a 100/s quota needed
#: here, and no margin for the batch's last round, so the limiter's queue ran dry.
LOCAL_CALL_OVERHEAD_SECONDS = 0.1


@dataclass(frozen=True)
class MeasuredLatency:
    """The vendor's latency as the demo's probe calls saw it (seconds)."""

    p50_seconds: float
    p95_seconds: float
    calls: int


def measure_latency(
    action: HttpActionConfig, rate: Quota, calls: int = PROBE_CALLS
) -> MeasuredLatency:
    """Time `calls` calls to the vendor, one after another, through the product's own HTTP
    action, on probe objects of a tenant of their own (never a policy's objects or keys).

    The calls keep `rate` as the limiter will: each sent at least the quota's interval (its
    headroom applied) after the one before, so a vendor that refuses calls faster than its
    quota (nginx's limit_req) answers the probes too. Only answers that went through the
    vendor's work count (accepted, absent, permanent): a 429 or an error comes back without it
    and would understate the latency.
    """
    http = HttpAction(action)
    run = secrets.token_hex(4)
    took: list[float] = []
    next_send = time.monotonic()
    for i in range(calls):
        key = f"{PROBE_TENANT}:{run}:{i}"
        call = ActionCall(
            key=key,
            idempotency_key=key,
            policy=PROBE_TENANT,
            policy_version=1,
            tenant_id=PROBE_TENANT,
            object_id=f"probe-{run}-{i}",
            scope=PROBE_TENANT,
            attempt=1,
            batch_id=run,
        )
        time.sleep(max(0.0, next_send - time.monotonic()))  # pacing, as the limiter's slots
        sent = time.monotonic()
        next_send = sent + rate.interval_seconds
        result = http.perform(call)
        if result.outcome.settled:
            took.append(time.monotonic() - sent)
    if not took:
        raise LocalStackError(
            f"the vendor answered none of {calls} latency probes (throttled or failing): "
            "give --parallel-calls and --batch-size"
        )
    ordered = sorted(took)
    p95 = ordered[max(0, math.ceil(0.95 * len(ordered)) - 1)]
    return MeasuredLatency(round(statistics.median(ordered), 4), round(p95, 4), len(ordered))


def plan_consumer(
    rate: Quota,
    consumers: int,
    latency: MeasuredLatency,
    *,
    batch_size: int | None = None,
    parallel_calls: int | None = None,
    overhead_seconds: float = LOCAL_CALL_OVERHEAD_SECONDS,
) -> ConsumerConfig:
    """The consumer that fills `rate` at this latency, as synth sizes a policy that leaves its
    consumer to the plan (sweeper_tools.planning.consumer_defaults): parallel calls for
    `consumers` environments at the p95 service time (the vendor's latency plus
    `overhead_seconds`), batches of whole rounds of them that need no window, and the timeout
    a batch needs (at least the demo's). `batch_size` and `parallel_calls` are kept when given.
    """
    environments = max(2, consumers)
    given: dict[str, int] = {"reserved_concurrency": environments, "max_concurrency": environments}
    if batch_size is not None:
        # Above 10 records Lambda requires a batching window of at least 1 s.
        window = 1 if batch_size > MAX_BATCH_SIZE_WITHOUT_WINDOW else 0
        given |= {"batch_size": batch_size, "batch_window_seconds": window}
    if parallel_calls is not None:
        given["parallel_calls"] = parallel_calls
    draft = Policy(name="demo-plan", quota=rate, consumer=ConsumerConfig.model_validate(given))
    consumer = derived_consumer(
        draft, (latency.p50_seconds, latency.p95_seconds), overhead_seconds=overhead_seconds
    )
    timeout = max(CONSUMER_TIMEOUT_SECONDS, consumer.timeout_seconds)
    return ConsumerConfig.model_validate({**consumer.model_dump(), "timeout_seconds": timeout})


def _settle_probes(rate: Quota) -> None:
    """Let the probe calls leave a short quota window before the limiter starts calling."""
    time.sleep(min(rate.period_seconds, MAX_PROBE_WINDOW_WAIT_SECONDS))


def demo_policy(options: DemoOptions, api_url: str) -> tuple[Policy, MeasuredLatency | None]:
    """The policy the demo runs: the team's as written (its calls reach `api_url` by the
    pipeline's rehearsal), or the demo's own with its consumer planned from the rate and the
    latency measured now."""
    if options.policy is not None:
        # as `local up` does: its secrets are made locally afterwards (team_policy_secrets)
        return options.policy, None
    rate = options.rate or DEFAULT_DEMO_QUOTA
    action = HttpActionConfig(api_url=api_url, allow_plain_http=True, read_timeout_seconds=5)
    latency: MeasuredLatency | None = None
    if options.parallel_calls is None or options.batch_size is None:
        latency = measure_latency(action, rate)
        _settle_probes(rate)
    consumer = plan_consumer(
        rate,
        options.consumers,
        latency or MeasuredLatency(0.01, 0.01, 0),  # both given: the plan is not asked
        batch_size=options.batch_size,
        parallel_calls=options.parallel_calls,
    )
    policy = Policy(
        name=f"demo-{secrets.token_hex(3)}",
        quota=rate,
        action=action,
        consumer=consumer,
        lease_seconds=120,
        producer_budget_seconds=30,
    )
    return policy, latency


def run_demo(options: DemoOptions, progress: Any = None) -> DemoReport:
    """Run the pipeline end to end and report; `progress(done, total)` is called as it goes."""
    started = time.monotonic()
    quota = options.policy.quota if options.policy is not None else options.rate
    per_tenant = options.policy is not None and options.policy.scope.kind == "tenant"
    scope: QuotaScope = "tenant" if per_tenant else "global"
    check_rehearsal([options.policy] if options.policy is not None else [], options.api_url)
    with LocalStack(
        database_url=options.database_url,
        api_url=options.api_url,
        vendor_quota=quota,
        vendor_quota_scope=scope,
    ) as stack:
        assert stack.api_url is not None
        policy, latency = demo_policy(options, stack.api_url)
        if options.policy is not None:
            policy = team_policy_secrets(stack, policy)
            # as `local up` makes it; its versions kept for the audit of its deletes
            make_action_targets(stack.aws, policy, keep_versions=True)
        policy_name = policy.name
        contract = vendor_contract(policy)
        before = vendor_audit(stack)
        calls_before = 0 if before is None else before.calls_total
        contract_before = contract_figures(stack, contract, policy)
        aws_before = aws_requests(stack)
        with contextlib.ExitStack() as running:
            run = running.enter_context(
                LocalPipeline(
                    stack,
                    policy,
                    prefix="sweeper-demo",
                    log_prefix="sweeper-demo-",
                    cap_consumer_cpu=options.cap_consumer_cpu,
                )
            )
            if options.sources:
                _serve_hints(running, stack, policy, run.log_file)
            written = _write_local_file(running, options.local_file, stack, run)
            if options.sources:
                doors = feed_doors(
                    stack, policy, run.ledger, list(options.sources), options.jobs, options.tenants
                )
            else:
                run.seed(options.jobs, options.tenants)
                doors = []
            refused = refused_at_doors(doors)
            # Wait for what reached the ledger only: a refused obligation never settles.
            in_ledger = sum(run.ledger.counts(policy_name).values())
            # Each obligation's object where its action will look (none published yet).
            assert stack.database_url is not None
            put_action_objects(stack.aws, policy, stack.database_url)

            def done() -> bool:
                final: int = run.final()
                if progress is not None:
                    progress(final, options.jobs)
                return final >= min(options.jobs, in_ledger)

            run.run(done, timeout_seconds=options.timeout_seconds)
            settled = run.ledger.settled_between(policy_name, SINCE_EVER, datetime.now(UTC))
        counts = run.ledger_counts
        pending = counts[JobStatus.PENDING] + counts[JobStatus.LEASED]
        audit = vendor_audit(stack)
        aws_per_job = requests_per_job(aws_before, aws_requests(stack), in_ledger)
        keys, per_object = key_stats(audit, policy_name)
        seen = contract_figures(stack, contract, policy)
        metrics = run.metrics()

        def metric(name: str) -> int:
            return int(metrics.get(name, 0))

        return DemoReport(
            policy=policy_name,
            jobs=options.jobs,
            discovered=run.totals.discovered,
            published=run.totals.published,
            consumed=run.source.stats.records_delivered,
            acknowledged=run.source.stats.records_deleted,
            returned=run.source.stats.records_failed,
            succeeded=counts[JobStatus.SUCCEEDED],
            terminal=counts[JobStatus.FAILED],
            pending=pending,
            duplicates=metric(Metric.DUPLICATES),
            retries=metric(Metric.RETRIES),
            throttle_events=metric(Metric.THROTTLE_EVENTS),
            gate_deferrals=metric(Metric.GATE_DEFERRALS),
            limiter_waits=metric(Metric.LIMITER_WAITS),
            leases_reclaimed=metric(Metric.RECLAIMED),
            released=metric(Metric.RELEASED),
            publish_failures=metric(Metric.PUBLISH_FAILURES),
            vendor_calls=None if seen is None else seen.since(contract_before).calls,
            vendor_effects=None if seen is None else seen.since(contract_before).effects,
            vendor_429s=None if seen is None else seen.since(contract_before).throttled,
            max_effects_per_object=None if seen is None else seen.max_effects_per_object,
            idempotency_keys=keys if contract == "delete" else None,
            max_keys_per_object=per_object if contract == "delete" else None,
            oldest_eligible_age_seconds=round(run.totals.oldest_eligible_age_seconds, 3),
            producer_runs=run.totals.runs,
            consumer_invocations=run.source.stats.invocations,
            elapsed_seconds=round(time.monotonic() - started, 2),
            all_final=demo_problem(options.jobs, refused, in_ledger, pending, run.log_file) is None,
            refused=refused,
            in_ledger=in_ledger,
            log_file=run.log_file,
            doors=[door.as_dict() for door in doors],
            local_file=None if written is None else str(written),
            parallel_calls=policy.consumer.parallel_calls,
            batch_size=policy.consumer.batch_size,
            latency_p50_seconds=None if latency is None else latency.p50_seconds,
            latency_p95_seconds=None if latency is None else latency.p95_seconds,
            vendor_utilization=None
            if audit is None or contract != "delete"
            else vendor_utilization(audit.arrivals[calls_before:], policy.quota),
            settled_per_second=settled_rate(settled),
            aws_requests_per_job=aws_per_job,
            consumer_max_rss_mb=round(run.source.stats.max_rss_mb, 1),
            consumer_cpu_ms_per_job=round(
                1000 * run.source.stats.cpu_seconds / max(1, in_ledger), 2
            ),
        )


def team_policy_secrets(stack: LocalStack, policy: Policy) -> Policy:
    """A team's policy with its action's secrets made in the local Secrets Manager, as `local
    up` makes them: values the simulator accepts, or an outside vendor's from
    SWEEPER_LOCAL_SECRETS (sweeper_local.action_secrets)."""
    return with_local_secrets(
        stack.aws.secretsmanager(),
        policy,
        prefix="sweeper-demo",
        vendor=stack.vendor,
        given=parse_local_secrets(os.environ.get(LOCAL_SECRETS_ENV)),
    )


def _serve_hints(
    running: contextlib.ExitStack, stack: LocalStack, policy: Policy, log_file: str
) -> None:
    """The policy's intake (queue, function) and its webhook on loopback, for the hint doors."""
    secret = secrets.token_hex(32)
    intake = running.enter_context(
        LocalIntake(stack, policy, secret=secret, prefix="sweeper-demo", log_file=log_file)
    )
    webhook = running.enter_context(
        LocalWebhook(
            {policy.name: intake.webhook_deps(CountingSink())},
            concurrency=policy.intake.webhook_reserved_concurrency,
        )
    )
    stack.webhook_url, stack.webhook_secret = webhook.url, secret
    stack.intake_queue_urls[policy.name] = intake.resources.queue_url


def _write_local_file(
    running: contextlib.ExitStack, path: Path | None, stack: LocalStack, run: LocalPipeline
) -> Path | None:
    """Write where the demo's stack listens to `path` (removed on exit); None when not asked or
    when the file belongs to another running stack (left alone)."""
    if path is None:
        return None
    if live_local_file(path) is not None:
        return None
    assert stack.database_url is not None
    folder = running.enter_context(tempfile.TemporaryDirectory(prefix="sweeper-demo-"))
    config = Path(folder) / "sweeper.toml"
    config.write_text(policy_toml(run.policy), encoding="utf-8")
    policy = run.policy.name
    write_local_file(
        LocalFile(
            pid=os.getpid(),
            database_url=stack.database_url,
            aws_endpoint_url=stack.aws.endpoint_url,
            service_endpoint_urls=stack.aws.service_endpoint_urls(),
            region=LOCAL_REGION,
            vendor_url=stack.api_url,
            limiter_table=run.resources.limiter_table,
            idempotency_table=run.resources.idempotency_table,
            log_file=run.log_file,
            config=str(config),
            policies={
                policy: PolicyEndpoints(
                    queue_url=run.resources.queue_url,
                    dlq_url=run.resources.dlq_url,
                    consumer_function=run.consumer_function_name,
                    producer_function=run.producer_function_name,
                    intake_queue_url=stack.intake_queue_urls.get(policy),
                )
            },
            webhook_url=stack.webhook_url,
            webhook_secret=stack.webhook_secret,
        ),
        path,
    )
    running.callback(_remove, path)
    return path


def _remove(path: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        path.unlink()


def policy_toml(policy: Policy) -> str:
    """The policy as a policy file (`[[policies]]` with inline tables) that load_config reads."""
    fields = policy.model_dump(mode="json", exclude_none=True)
    lines = ["[[policies]]"]
    lines += [f"{json.dumps(key)} = {_toml_value(value)}" for key, value in fields.items()]
    return "\n".join(lines) + "\n"


def _toml_value(value: Any) -> str:
    # JSON's strings, numbers and booleans are TOML's; tables and arrays are written inline.
    if isinstance(value, dict):
        items = ", ".join(
            f"{json.dumps(k)} = {_toml_value(v)}" for k, v in value.items() if v is not None
        )
        return "{" + items + "}"
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    return json.dumps(value)

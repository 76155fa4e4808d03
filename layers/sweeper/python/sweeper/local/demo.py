"""`sweeper demo`: the whole pipeline on one machine, real at every hop.

Seed N obligations over T tenants; invoke the producer handler with the scheduler's event once a
second (as EventBridge Scheduler would, each tick its own scheduled time); let the local event
source feed the consumer handler in worker processes; stop when every obligation is final.
"""

from __future__ import annotations

import json
import os
import secrets
import tempfile
import time
import urllib.request
from dataclasses import asdict, dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from sweeper.config import ConsumerConfig, HttpActionConfig, Policy, Quota
from sweeper.errors import LocalStackError
from sweeper.ledger.store import Ledger
from sweeper.local.aws import provision
from sweeper.local.lambda_runtime import invoke, metrics_from_log, new_environment
from sweeper.local.poller import EventSourceConfig, LocalEventSource
from sweeper.local.stack import LocalStack
from sweeper.local.vendor import VendorAudit
from sweeper.models import JobStatus, NewJob
from sweeper.observability import Metric
from sweeper.scheduling import schedule_jobs

#: The scheduler's tick in the demo (a deployment uses the policy's schedule expression).
TICK_SECONDS = 1.0
#: Short, so that a retried record comes back quickly in a demo.
DEMO_VISIBILITY_TIMEOUT_SECONDS = 5
CONSUMER_TIMEOUT_SECONDS = 30
EVENTS_DIR_ENV = "SWEEPER_EVENTS_DIR"


@dataclass(frozen=True)
class DemoOptions:
    jobs: int = 500
    tenants: int = 5
    consumers: int = 4
    batch_size: int = 10
    database_url: str | None = None
    api_url: str | None = None
    rate: Quota | None = None
    timeout_seconds: float = 300.0


@dataclass(frozen=True)
class DemoReport:
    policy: str
    jobs: int
    discovered: int
    published: int
    consumed: int
    succeeded: int
    terminal: int
    pending: int
    duplicates: int
    retries: int
    vendor_calls: int | None
    vendor_effects: int | None
    idempotency_keys: int | None
    max_keys_per_object: int | None
    oldest_eligible_age_seconds: float
    producer_runs: int
    consumer_invocations: int
    elapsed_seconds: float
    all_final: bool
    log_file: str

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _scheduler_event(policy: str, scheduled: datetime) -> dict[str, Any]:
    """The sample scheduler event from events/, for this policy and tick."""
    folder = os.environ.get(EVENTS_DIR_ENV)
    path = Path(folder) if folder else Path(__file__).resolve().parents[5] / "events"
    try:
        event: dict[str, Any] = json.loads((path / "scheduler_event.json").read_text())
    except FileNotFoundError as exc:
        raise LocalStackError(f"no events/scheduler_event.json (set {EVENTS_DIR_ENV})") from exc
    event["time"] = scheduled.strftime("%Y-%m-%dT%H:%M:%SZ")
    event["id"] = secrets.token_hex(8)
    event["detail"]["policy"] = policy
    return event


def _remote_audit(api_url: str) -> VendorAudit | None:
    """The audit of an external simulator, when it has one; a real vendor has none."""
    try:
        with urllib.request.urlopen(f"{api_url}/_audit", timeout=5) as response:  # noqa: S310
            return VendorAudit.from_json(json.loads(response.read()))
    except (OSError, ValueError, KeyError):
        return None


def run_demo(options: DemoOptions, progress: Any = None) -> DemoReport:
    """Run the pipeline end to end and report; `progress(done, total)` is called as it goes."""
    started = time.monotonic()
    policy_name = f"demo-{secrets.token_hex(3)}"
    with LocalStack(
        database_url=options.database_url, api_url=options.api_url, vendor_quota=options.rate
    ) as stack:
        assert stack.database_url is not None
        assert stack.api_url is not None
        consumer = ConsumerConfig(
            reserved_concurrency=max(2, options.consumers),
            max_concurrency=max(2, options.consumers),
            batch_size=options.batch_size,
            timeout_seconds=CONSUMER_TIMEOUT_SECONDS,
        )
        policy = Policy(
            name=policy_name,
            quota=options.rate or Quota(limit=1000, period_seconds=1),
            action=HttpActionConfig(api_url=stack.api_url, read_timeout_seconds=5),
            consumer=consumer,
            lease_seconds=120,
            producer_budget_seconds=30,
        )
        resources = provision(
            stack.aws.sqs(),
            stack.aws.dynamodb(),
            policy,
            prefix="sweeper-demo",
            visibility_timeout_seconds=DEMO_VISIBILITY_TIMEOUT_SECONDS,
        )
        env = {
            **stack.aws.env(),
            "SWEEPER_POLICY": policy.model_dump_json(),
            "SWEEPER_DATABASE_URL": stack.database_url,
            "SWEEPER_QUEUE_URL": resources.queue_url,
            "SWEEPER_IDEMPOTENCY_TABLE": resources.idempotency_table,
            "SWEEPER_LIMITER_TABLE": resources.limiter_table,
            "SWEEPER_DLQ_URL": resources.dlq_url,
            "POWERTOOLS_SERVICE_NAME": "sweeper",
        }
        ledger = Ledger(stack.database_url)
        now = datetime.now(UTC)
        jobs = [
            NewJob(
                f"tenant-{i % options.tenants:03d}",
                f"object-{i:07d}",
                now - timedelta(seconds=(i % 60)),
            )
            for i in range(options.jobs)
        ]
        schedule_jobs(ledger, policy, jobs, now)

        log_file = tempfile.NamedTemporaryFile(  # noqa: SIM115 - kept for the user to read
            prefix="sweeper-demo-", suffix=".log", delete=False
        ).name
        source = LocalEventSource(
            stack.aws.sqs(),
            EventSourceConfig(
                queue_url=resources.queue_url,
                queue_arn=resources.queue_arn,
                batch_size=options.batch_size,
                max_concurrency=consumer.max_concurrency,
                timeout_seconds=CONSUMER_TIMEOUT_SECONDS,
            ),
            env,
            log_file=log_file,
        ).start()
        discovered = published = runs = 0
        oldest = 0.0
        deadline = time.monotonic() + options.timeout_seconds
        producer = new_environment(env, log_file)
        try:
            while time.monotonic() < deadline:
                tick = datetime.now(UTC).replace(microsecond=0)
                result = producer.submit(
                    invoke,
                    "producer",
                    _scheduler_event(policy_name, tick),
                    function_name="sweeper-producer",
                    timeout_seconds=60,
                ).result()
                if result.error is not None:
                    raise LocalStackError(f"producer failed: {result.error}")
                runs += 1
                discovered += int(result.response["discovered"])
                published += int(result.response["published"])
                oldest = max(oldest, result.response["oldest_eligible_age_seconds"] or 0.0)
                counts = ledger.counts(policy_name)
                final = counts[JobStatus.SUCCEEDED] + counts[JobStatus.FAILED]
                if progress is not None:
                    progress(final, options.jobs)
                if final == options.jobs:
                    break
                time.sleep(max(0.0, TICK_SECONDS - (datetime.now(UTC) - tick).total_seconds()))
        finally:
            producer.shutdown()
            source.stop()
        counts = ledger.counts(policy_name)
        ledger.close()
        audit = stack.vendor.audit() if stack.vendor is not None else _remote_audit(stack.api_url)
        keys, per_object = _key_stats(audit, policy_name)
        metrics = metrics_from_log(log_file)
        return DemoReport(
            policy=policy_name,
            jobs=options.jobs,
            discovered=discovered,
            published=published,
            consumed=source.stats.records_delivered,
            succeeded=counts[JobStatus.SUCCEEDED],
            terminal=counts[JobStatus.FAILED],
            pending=counts[JobStatus.PENDING] + counts[JobStatus.LEASED],
            duplicates=int(metrics.get(Metric.DUPLICATES, 0)),
            retries=int(metrics.get(Metric.RETRIES, 0)),
            vendor_calls=None if audit is None else _ours(audit.calls_by_key, policy_name),
            vendor_effects=None if audit is None else _ours(audit.effects_by_key, policy_name),
            idempotency_keys=keys,
            max_keys_per_object=per_object,
            oldest_eligible_age_seconds=round(oldest, 3),
            producer_runs=runs,
            consumer_invocations=source.stats.invocations,
            elapsed_seconds=round(time.monotonic() - started, 2),
            all_final=counts[JobStatus.PENDING] + counts[JobStatus.LEASED] == 0,
            log_file=log_file,
        )


def _ours(by_key: dict[str, int], policy: str) -> int:
    return sum(n for key, n in by_key.items() if key.startswith(f"{policy}:"))


def _key_stats(audit: VendorAudit | None, policy: str) -> tuple[int | None, int | None]:
    """Distinct idempotency keys this run sent, and the most keys the vendor saw for one object."""
    if audit is None:
        return None, None
    ours = [
        [k for k in keys if k.startswith(f"{policy}:")] for keys in audit.keys_by_target.values()
    ]
    ours = [keys for keys in ours if keys]
    return sum(len(k) for k in ours), max((len(k) for k in ours), default=0)

"""`sweeper demo`: the whole pipeline on one machine, real at every hop.

Seed N obligations over T tenants; invoke the producer handler with the scheduler's event once a
second (as EventBridge Scheduler would, each tick its own scheduled time); let the local event
source feed the consumer handler in worker processes; stop when every obligation is final.
"""

from __future__ import annotations

import secrets
import time
from dataclasses import asdict, dataclass, field
from typing import Any

from sweeper.config import ConsumerConfig, HttpActionConfig, Policy, Quota
from sweeper.local.doors import feed_doors
from sweeper.local.pipeline import LocalPipeline
from sweeper.local.stack import LocalStack
from sweeper.local.vendor import VendorAudit, fetch_audit
from sweeper.models import JobStatus
from sweeper.observability import Metric

CONSUMER_TIMEOUT_SECONDS = 30


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
    #: The doors obligations come in by (sweeper.local.doors), sharing `jobs`; none: the
    #: obligations are scheduled straight into the ledger.
    sources: tuple[str, ...] = ()


@dataclass(frozen=True)
class DemoReport:
    policy: str
    jobs: int
    discovered: int
    published: int
    consumed: int
    acknowledged: int  # deliveries whose message the event source deleted
    returned: int  # deliveries sent back to the queue (a wait, a retry, a function error)
    succeeded: int
    terminal: int
    pending: int
    duplicates: int
    retries: int
    throttle_events: int
    gate_deferrals: int
    limiter_waits: int
    leases_reclaimed: int
    released: int
    publish_failures: int
    vendor_calls: int | None
    vendor_effects: int | None
    vendor_429s: int | None
    idempotency_keys: int | None
    max_keys_per_object: int | None
    oldest_eligible_age_seconds: float
    producer_runs: int
    consumer_invocations: int
    elapsed_seconds: float
    all_final: bool
    log_file: str
    #: Per door: how many obligations came in by it (and what its source held besides).
    doors: list[dict[str, Any]] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _remote_audit(api_url: str) -> VendorAudit | None:
    """The audit of an external simulator, when it has one; a real vendor has none."""
    try:
        return fetch_audit(api_url, timeout_seconds=5)
    except (OSError, ValueError, KeyError):
        return None


def run_demo(options: DemoOptions, progress: Any = None) -> DemoReport:
    """Run the pipeline end to end and report; `progress(done, total)` is called as it goes."""
    started = time.monotonic()
    policy_name = f"demo-{secrets.token_hex(3)}"
    with LocalStack(
        database_url=options.database_url, api_url=options.api_url, vendor_quota=options.rate
    ) as stack:
        assert stack.api_url is not None
        policy = Policy(
            name=policy_name,
            quota=options.rate or Quota(limit=1000, period_seconds=1),
            action=HttpActionConfig(api_url=stack.api_url, read_timeout_seconds=5),
            consumer=ConsumerConfig(
                reserved_concurrency=max(2, options.consumers),
                max_concurrency=max(2, options.consumers),
                batch_size=options.batch_size,
                timeout_seconds=CONSUMER_TIMEOUT_SECONDS,
            ),
            lease_seconds=120,
            producer_budget_seconds=30,
        )
        with LocalPipeline(stack, policy, prefix="sweeper-demo", log_prefix="sweeper-demo-") as run:
            if options.sources:
                doors = feed_doors(
                    stack, policy, run.ledger, list(options.sources), options.jobs, options.tenants
                )
            else:
                run.seed(options.jobs, options.tenants)
                doors = []

            def done() -> bool:
                final: int = run.final()
                if progress is not None:
                    progress(final, options.jobs)
                return final == options.jobs

            run.run(done, timeout_seconds=options.timeout_seconds)
        counts = run.ledger_counts
        audit = stack.vendor.audit() if stack.vendor is not None else _remote_audit(stack.api_url)
        keys, per_object = _key_stats(audit, policy_name)
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
            pending=counts[JobStatus.PENDING] + counts[JobStatus.LEASED],
            duplicates=metric(Metric.DUPLICATES),
            retries=metric(Metric.RETRIES),
            throttle_events=metric(Metric.THROTTLE_EVENTS),
            gate_deferrals=metric(Metric.GATE_DEFERRALS),
            limiter_waits=metric(Metric.LIMITER_WAITS),
            leases_reclaimed=metric(Metric.RECLAIMED),
            released=metric(Metric.RELEASED),
            publish_failures=metric(Metric.PUBLISH_FAILURES),
            vendor_calls=None if audit is None else _ours(audit.calls_by_key, policy_name),
            vendor_effects=None if audit is None else _ours(audit.effects_by_key, policy_name),
            vendor_429s=None if audit is None else audit.throttled_total,
            idempotency_keys=keys,
            max_keys_per_object=per_object,
            oldest_eligible_age_seconds=round(run.totals.oldest_eligible_age_seconds, 3),
            producer_runs=run.totals.runs,
            consumer_invocations=run.source.stats.invocations,
            elapsed_seconds=round(time.monotonic() - started, 2),
            all_final=counts[JobStatus.PENDING] + counts[JobStatus.LEASED] == 0,
            log_file=run.log_file,
            doors=[door.as_dict() for door in doors],
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

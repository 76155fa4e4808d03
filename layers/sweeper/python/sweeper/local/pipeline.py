"""One policy's pipeline on the local stack: its queue, tables, functions and a scheduler tick.

Used by `sweeper demo` and the rate benchmark: provision what the CDK app would, seed the
ledger, start the event source (consumer worker processes) and tick the producer (its own worker
process) as EventBridge Scheduler would, each tick its own scheduled time.
"""

from __future__ import annotations

import json
import os
import secrets
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Self

from sweeper.config import Policy
from sweeper.errors import LocalStackError
from sweeper.ledger.store import Ledger
from sweeper.local.aws import PipelineResources, provision
from sweeper.local.lambda_runtime import invoke, metrics_from_log, new_environment, warm
from sweeper.local.poller import EventSourceConfig, LocalEventSource
from sweeper.local.service import Service
from sweeper.local.stack import LocalStack
from sweeper.models import JobStatus, NewJob
from sweeper.scheduling import schedule_jobs

#: The scheduler's tick locally (a deployment uses the policy's schedule expression).
TICK_SECONDS = 1.0
EVENTS_DIR_ENV = "SWEEPER_EVENTS_DIR"


def scheduler_event(policy: str, scheduled: datetime) -> dict[str, Any]:
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


@dataclass
class ProducerTotals:
    runs: int = 0
    discovered: int = 0
    published: int = 0
    oldest_eligible_age_seconds: float = 0.0


class LocalPipeline(Service):
    """Start with `with LocalPipeline(stack, policy) as p:`; functions stop on exit."""

    def __init__(
        self,
        stack: LocalStack,
        policy: Policy,
        *,
        extra_env: dict[str, str] | None = None,
        prefix: str = "sweeper-local",
        log_prefix: str = "sweeper-",
    ) -> None:
        if stack.database_url is None:
            raise LocalStackError("the local stack is not started")
        self.stack = stack
        self.policy = policy
        self.resources: PipelineResources = provision(
            stack.aws.sqs(),
            stack.aws.dynamodb(),
            policy,
            prefix=prefix,
            # At least the function timeout, as in AWS (a slow batch is not redelivered
            # while it is still being worked on), but not AWS's 6x: locally nothing retries.
            visibility_timeout_seconds=policy.consumer.timeout_seconds,
        )
        self.env = {
            **stack.aws.env(),
            "SWEEPER_POLICY": policy.model_dump_json(),
            "SWEEPER_DATABASE_URL": stack.database_url,
            "SWEEPER_QUEUE_URL": self.resources.queue_url,
            "SWEEPER_IDEMPOTENCY_TABLE": self.resources.idempotency_table,
            "SWEEPER_LIMITER_TABLE": self.resources.limiter_table,
            "SWEEPER_DLQ_URL": self.resources.dlq_url,
            "POWERTOOLS_SERVICE_NAME": "sweeper",
            **(extra_env or {}),
        }
        self.ledger = Ledger(stack.database_url)
        self.log_file = tempfile.NamedTemporaryFile(  # noqa: SIM115 - kept for the user to read
            prefix=log_prefix, suffix=".log", delete=False
        ).name
        self.totals = ProducerTotals()
        self.ledger_counts: dict[JobStatus, int] = {}
        self.source = LocalEventSource(
            stack.aws.sqs(),
            EventSourceConfig(
                queue_url=self.resources.queue_url,
                queue_arn=self.resources.queue_arn,
                batch_size=policy.consumer.batch_size,
                max_concurrency=policy.consumer.max_concurrency,
                timeout_seconds=policy.consumer.timeout_seconds,
            ),
            self.env,
            log_file=self.log_file,
        )
        self._producer = new_environment(self.env, self.log_file)

    def seed(self, jobs: int, tenants: int, *, spread_seconds: int = 60) -> None:
        """Add `jobs` obligations over `tenants`, due within the last `spread_seconds`."""
        now = datetime.now(UTC)
        batch = [
            NewJob(
                f"tenant-{i % tenants:03d}",
                f"object-{i:07d}",
                now - timedelta(seconds=i % max(1, spread_seconds)),
            )
            for i in range(jobs)
        ]
        schedule_jobs(self.ledger, self.policy, batch, now)

    def tick(self) -> dict[str, Any]:
        """One scheduler tick: invoke the producer with this second's scheduled event."""
        scheduled = datetime.now(UTC).replace(microsecond=0)
        result = self._producer.submit(
            invoke,
            "producer",
            scheduler_event(self.policy.name, scheduled),
            function_name="sweeper-producer",
            timeout_seconds=60,
        ).result()
        if result.error is not None:
            raise LocalStackError(f"producer failed: {result.error}")
        report: dict[str, Any] = result.response
        self.totals.runs += 1
        self.totals.discovered += int(report["discovered"])
        self.totals.published += int(report["published"])
        self.totals.oldest_eligible_age_seconds = max(
            self.totals.oldest_eligible_age_seconds, report["oldest_eligible_age_seconds"] or 0.0
        )
        return report

    def run(self, done: Callable[[], bool], *, timeout_seconds: float) -> bool:
        """Tick once a second until `done()` or the timeout; True when done."""
        deadline = time.monotonic() + timeout_seconds
        while time.monotonic() < deadline:
            started = time.monotonic()
            self.tick()
            if done():
                return True
            time.sleep(max(0.0, TICK_SECONDS - (time.monotonic() - started)))
        return done()

    def final(self) -> int:
        counts = self.ledger.counts(self.policy.name)
        return counts[JobStatus.SUCCEEDED] + counts[JobStatus.FAILED]

    def metrics(self) -> dict[str, float]:
        return metrics_from_log(self.log_file)

    def start(self) -> Self:
        """Start the event source and cold-start every function before anything is measured."""
        self.source.start()
        self._producer.submit(warm, "producer", 0.0).result()
        if not self.source.warmed.wait(timeout=120):
            raise LocalStackError("the consumer workers did not start")
        return self

    def stop(self) -> None:
        try:
            self._producer.shutdown()
            self.source.stop()
        finally:
            self.ledger_counts = self.ledger.counts(self.policy.name)
            self.ledger.close()

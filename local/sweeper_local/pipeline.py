"""One policy's pipeline on the local stack: its queue, tables, functions and a scheduler tick.

Used by `sweeper demo`, the rate benchmark and `sweeper local up`: provision what the CDK app
would, seed the ledger, start the event source (consumer worker processes) and fire the producer
(its own worker process) as EventBridge Scheduler would, each run its own scheduled time.
"""

from __future__ import annotations

import logging
import secrets
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Self

from sweeper.config import Policy
from sweeper.errors import LedgerError
from sweeper.ledger.store import Ledger
from sweeper.ledger.wake import DynamoWakeStore
from sweeper.models import JobStatus, NewJob
from sweeper.scheduling import schedule_jobs
from sweeper_local.aws import LOCAL_REGION, PipelineResources, provision
from sweeper_local.errors import LocalStackError
from sweeper_local.lambda_runtime import ExecutionEnvironment, Invocation, metrics_from_log
from sweeper_local.poller import EventSourceConfig, LocalEventSource
from sweeper_local.rehearsal import REHEARSAL_URL_VARIABLE
from sweeper_local.service import Service
from sweeper_local.stack import LocalStack

#: The scheduler's tick locally (a deployment uses the policy's schedule expression).
TICK_SECONDS = 1.0
#: The producer's local timeout beyond its own budget, as the CDK app sets it.
PRODUCER_TIMEOUT_MARGIN_SECONDS = 5.0
LOCAL_ACCOUNT = "123456789012"
#: How long every function may take to cold-start before the pipeline gives up.
WARM_TIMEOUT_SECONDS = 120.0

log = logging.getLogger(__name__)


def scheduler_event(policy: str, scheduled: datetime) -> dict[str, Any]:
    """The event the CDK app's schedule sends (the shape of events/scheduler_event.json)."""
    return {
        "version": "0",
        "id": secrets.token_hex(8),
        "detail-type": "Scheduled Event",
        "source": "aws.scheduler",
        "account": LOCAL_ACCOUNT,
        "time": scheduled.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "region": LOCAL_REGION,
        "resources": [
            f"arn:aws:scheduler:{LOCAL_REGION}:{LOCAL_ACCOUNT}:schedule/sweeper/{policy}"
        ],
        # Scheduler templates its context attributes as strings.
        "detail": {"policy": policy, "attempt": "1"},
    }


@dataclass
class ProducerTotals:
    runs: int = 0
    discovered: int = 0
    published: int = 0
    oldest_eligible_age_seconds: float = 0.0
    failed_runs: int = 0


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
        log_file: str | None = None,
        visibility_timeout_seconds: int | None = None,
        consumer_function_name: str = "sweeper-consumer",
        producer_function_name: str = "sweeper-producer",
        cap_consumer_cpu: bool = False,
        rehearsal_url: str | None = None,
        consumer_handler: str = "consumer",
        keep_wake: bool = False,
    ) -> None:
        """`cap_consumer_cpu`: hold each consumer environment to the CPU share Lambda gives
        `consumer.memory_mb` (sweeper_local.cpu_cap), as the rate benchmark does.
        `rehearsal_url`: where every vendor call goes (sweeper_local.rehearsal), by default
        the stack's vendor. `consumer_handler`: functions/<name> or `module:attribute` (the
        benchmark's baselines). `keep_wake`: the functions keep the policy's wake item
        (sweeper.ledger.wake) in the limiter table, as the CDK app has them; off by default, as
        the tests' own ledgers write without lowering it (a producer trusting the item would
        find their work only after the policy's producer_idle_check_seconds)."""
        if stack.database_url is None or stack.api_url is None:
            raise LocalStackError("the local stack is not started")
        self.stack = stack
        self.policy = policy
        self.resources: PipelineResources = provision(
            stack.aws.sqs(),
            stack.aws.dynamodb(),
            policy,
            prefix=prefix,
            # By default the policy's, as the CDK app sets it (six function timeouts plus the
            # batching window); the event source refuses one below the function timeout.
            visibility_timeout_seconds=visibility_timeout_seconds,
        )
        self.env = {
            **stack.aws.env(),
            "SWEEPER_POLICY": policy.model_dump_json(),
            "SWEEPER_DATABASE_URL": stack.database_url,
            "SWEEPER_QUEUE_URL": self.resources.queue_url,
            "SWEEPER_IDEMPOTENCY_TABLE": self.resources.idempotency_table,
            "SWEEPER_LIMITER_TABLE": self.resources.limiter_table,
            # The wake items live in the limiter table, as the CDK app keeps them.
            **({"SWEEPER_WAKE_TABLE": self.resources.limiter_table} if keep_wake else {}),
            # ... and a ledger that may pause (the idle-ledger drill's): no session kept open.
            **({"SWEEPER_LEDGER_MAY_PAUSE": "1"} if keep_wake else {}),
            "SWEEPER_DLQ_URL": self.resources.dlq_url,
            "POWERTOOLS_SERVICE_NAME": "sweeper",
            # What lets a rehearsal redirect the vendor calls (never set on AWS).
            "SWEEPER_LOCAL_STACK": "1",
            # Every vendor call goes to the stack's vendor, whatever host the policy names.
            REHEARSAL_URL_VARIABLE: rehearsal_url or stack.api_url,
            **(extra_env or {}),
        }
        #: The policy's wake items, when its functions keep them: the pipeline's writes lower it.
        self.wake = (
            DynamoWakeStore(stack.aws.dynamodb(), self.resources.limiter_table)
            if keep_wake
            else None
        )
        self.ledger = Ledger(stack.database_url, wake=self.wake)
        self.log_file = (
            log_file
            or tempfile.NamedTemporaryFile(  # noqa: SIM115 - kept for the user to read
                prefix=log_prefix, suffix=".log", delete=False
            ).name
        )
        self.producer_function_name = producer_function_name
        self.consumer_function_name = consumer_function_name
        self.totals = ProducerTotals()
        self.ledger_counts: dict[JobStatus, int] = {}
        self.source = LocalEventSource(
            stack.aws.sqs(),
            EventSourceConfig(
                queue_url=self.resources.queue_url,
                queue_arn=self.resources.queue_arn,
                function=consumer_handler,
                function_name=consumer_function_name,
                batch_size=policy.consumer.batch_size,
                batch_window_seconds=policy.consumer.batch_window_seconds,
                max_concurrency=policy.consumer.max_concurrency,
                timeout_seconds=policy.consumer.timeout_seconds,
                memory_mb=policy.consumer.memory_mb if cap_consumer_cpu else None,
            ),
            self.env,
            log_file=self.log_file,
        )
        self._producer = ExecutionEnvironment("producer", self.env, self.log_file)

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

    def fire(self, scheduled: datetime) -> Invocation:
        """Invoke the producer with the scheduler's event for `scheduled`, as its schedule does."""
        return self._producer.invoke(
            scheduler_event(self.policy.name, scheduled),
            function_name=self.producer_function_name,
            timeout_seconds=self.policy.producer_budget_seconds + PRODUCER_TIMEOUT_MARGIN_SECONDS,
        )

    def tick(self) -> dict[str, Any] | None:
        """One scheduler tick at this second: the producer's report, or None when it failed.

        A failed run (the database restarting, the producer killed) is logged and left to the
        next tick, as the schedule's next run picks up what this one did not publish.
        """
        result = self.fire(datetime.now(UTC).replace(microsecond=0))
        if result.error is not None:
            self.totals.failed_runs += 1
            log.warning("producer %s failed: %s", self.producer_function_name, result.error)
            return None
        report: dict[str, Any] = result.response
        self.totals.runs += 1
        self.totals.discovered += int(report["discovered"])
        self.totals.published += int(report["published"])
        self.totals.oldest_eligible_age_seconds = max(
            self.totals.oldest_eligible_age_seconds, report["oldest_eligible_age_seconds"] or 0.0
        )
        return report

    def run(self, done: Callable[[], bool], *, timeout_seconds: float) -> bool:
        """Tick once a second until `done()` or the timeout; True when done.

        A ledger error while asking `done()` (the database restarting) counts as not done yet.
        """
        deadline = time.monotonic() + timeout_seconds
        while time.monotonic() < deadline:
            started = time.monotonic()
            self.tick()
            if self._done(done):
                return True
            time.sleep(max(0.0, TICK_SECONDS - (time.monotonic() - started)))
        return self._done(done)

    @staticmethod
    def _done(done: Callable[[], bool]) -> bool:
        try:
            return done()
        except LedgerError as exc:
            log.warning("the ledger did not answer (%s); trying again at the next tick", exc)
            return False

    def final(self) -> int:
        counts = self.ledger.counts(self.policy.name)
        return counts[JobStatus.SUCCEEDED] + counts[JobStatus.FAILED]

    def function_pids(self) -> dict[int, str]:
        """The processes of the function environments running now: pid -> function name
        (the consumer's environments and the producer's), for a benchmark's CPU by process."""
        environments = [*self.source.environments, self._producer]
        return {e.pid: e.function for e in environments if e.pid is not None}

    def metrics(self) -> dict[str, float]:
        return metrics_from_log(self.log_file)

    def start(self) -> Self:
        """Start the event source and cold-start every function before anything is measured."""
        try:
            self.source.start()
            self._producer.initialise()
            self.source.wait_until_warm(WARM_TIMEOUT_SECONDS)
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        try:
            self._producer.close()
            self.source.stop()
        finally:
            self.ledger_counts = self.ledger.counts(self.policy.name)
            self.ledger.close()

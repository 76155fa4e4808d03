"""Drills: one fault at a time on a local stack of its own, judged by what users care about.

Each drill starts what it needs (its own PostgreSQL, the AWS emulator, the vendor simulator
enforcing the policy's quota, the consumers in worker processes and a producer ticking every
second: `LocalConsoleStack`), seeds jobs, injects one fault, waits with a deadline until the
system has settled, and reports:

* the figures: jobs final, vendor effects, objects with several keys, calls per key (max),
  self-caused 429s (the vendor's quota refusing us, apart from its incidents), messages left on
  the queue and its DLQ, and time to recover (from the end of the fault to the settled state);
* its own checks, showing that the fault happened and was met as designed (the alarm's metric
  moved, the forged key never reached the other object, ...);
* a verdict that passes only when the property holds (every job final, one effect per object,
  nothing lost: every job succeeded and no message is left behind) and every check held.

`sweeper drill --list | NAME | all` runs them; so do tests/drills. docs/runbook.md maps each drill
to the alarm it exercises.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import psycopg

from sweeper.config import MIN_CONSUMER_TIMEOUT_SECONDS
from sweeper.errors import LedgerError, SweeperError
from sweeper.ledger.store import Ledger
from sweeper.models import JobMessage, JobStatus, NewJob
from sweeper.observability import Metric
from sweeper.operations import pause_policy, resume_policy
from sweeper.redrive.letters import queue_depth
from sweeper.scheduling import schedule_jobs
from sweeper_local.aws import LOCAL_REGION
from sweeper_local.background import LocalConsoleStack
from sweeper_local.drill_early import not_yet_due
from sweeper_local.drill_wake import idle_ledger
from sweeper_local.lambda_runtime import (
    ExecutionEnvironment,
    Invocation,
    InvocationStatus,
    metrics_from_log,
)
from sweeper_local.poller import RECEIVE_WAIT_SECONDS, to_event_record
from sweeper_local.postgres import LocalPostgres
from sweeper_local.scenarios import SCENARIO_CONFIG, ScenarioError, catch_up_scenario, dlq_scenario
from sweeper_local.vendor import VendorAudit, VendorSimulator
from sweeper_tools.endpoints import LOCAL_CONSUMER_FUNCTION, write_local_file
from sweeper_tools.policy_file import load_config

if TYPE_CHECKING:
    from mypy_boto3_sqs.type_defs import MessageTypeDef

    from sweeper.operator_api.commands import Backend

Echo = Callable[[str], None]
Verdict = Literal["pass", "fail"]

#: Every job of the drill's policy, as the ledger holds it: the truth the figures are held to.
JOBS_SQL = """
SELECT tenant_id, object_id, operation_key, status
FROM sweeper_jobs
WHERE policy = %(policy)s
"""

#: When the server last started: a restart changes it.
SERVER_STARTED_SQL = "SELECT pg_postmaster_start_time()"

#: The drills' policy file: one policy, short leases and timeouts, a quick retry backoff.
DRILL_CONFIG = """
[[policies]]
name = "drill"
schedule = "rate(1 minute)"
lease_seconds = {lease_seconds}
producer_budget_seconds = 20
page_size = 200

[policies.quota]
limit = {quota}
period_seconds = 1.0

[policies.action]
read_timeout_seconds = 2.0

[policies.consumer]
reserved_concurrency = {concurrency}
max_concurrency = {concurrency}
timeout_seconds = {consumer_timeout}
max_receive_count = 20

[policies.retry]
base_seconds = 0.5
cap_seconds = 2.0

[policies.throttle]
max_wait_seconds = 0.5
reopen_jitter_seconds = 0.05
close_base_seconds = 0.5
close_cap_seconds = 5.0
"""

#: How long a drill waits, at most, for the system to settle after its fault.
SETTLE_TIMEOUT_SECONDS = 90.0
POLL_SECONDS = 0.25
#: How long past its long poll a receive under way may take to end (a loaded machine).
HOLD_MARGIN_SECONDS = 30.0


def drill_config(
    *, quota: int = 50, concurrency: int = 2, lease_seconds: int = 60, consumer_timeout: int = 10
) -> str:
    return DRILL_CONFIG.format(
        quota=quota,
        concurrency=concurrency,
        lease_seconds=lease_seconds,
        consumer_timeout=consumer_timeout,
    )


class DrillError(SweeperError):
    """A drill could not do what it meant to (the stack failed, or a deadline passed)."""


# -- the report ---------------------------------------------------------------------------------


@dataclass
class Figures:
    """What the drill measured once the system settled (or its deadline passed)."""

    jobs: int = 0
    jobs_final: int = 0
    succeeded: int = 0
    vendor_effects: int = 0
    objects_without_effect: int = 0
    objects_with_several_effects: int = 0
    effects_on_other_objects: int = 0
    objects_with_several_keys: int = 0
    max_calls_per_key: int = 0
    self_caused_429s: int = 0
    messages_left: int = 0
    time_to_recover_seconds: float | None = None


@dataclass(frozen=True)
class Check:
    value: Any
    expected: str
    ok: bool


@dataclass
class DrillReport:
    drill: str
    description: str
    alarm: str
    verdict: Verdict
    figures: Figures
    checks: dict[str, Check]
    failures: list[str]
    elapsed_seconds: float
    log_file: str | None = None  # the functions' log (Powertools JSON lines and EMF)

    @property
    def passed(self) -> bool:
        return self.verdict == "pass"

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def property_failures(figures: Figures) -> list[str]:
    """What breaks "every job final, one effect per object, nothing lost" (empty: it holds)."""
    found: list[str] = []
    if figures.jobs == 0:
        found.append("no job was seeded")
    if figures.jobs_final < figures.jobs:
        found.append(f"{figures.jobs - figures.jobs_final} of {figures.jobs} jobs not final")
    if figures.succeeded < figures.jobs_final:
        found.append(f"{figures.jobs_final - figures.succeeded} jobs final without succeeding")
    if figures.objects_without_effect:
        found.append(f"{figures.objects_without_effect} objects without an effect")
    if figures.objects_with_several_effects:
        found.append(f"{figures.objects_with_several_effects} objects with several effects")
    if figures.effects_on_other_objects:
        found.append(f"{figures.effects_on_other_objects} effects on objects of no job")
    if figures.messages_left < 0:
        found.append("the queues could not be read")
    if figures.messages_left > 0:
        found.append(f"{figures.messages_left} messages left on the queue or its DLQ")
    return found


# -- one drill's run ----------------------------------------------------------------------------


class DrillRun:
    """What a drill function works with: the stack, its parts, and the ways to wait and check."""

    def __init__(
        self,
        console: LocalConsoleStack,
        local_file: Path,
        postgres: LocalPostgres | None,
        echo: Echo,
    ) -> None:
        self.console = console
        self.local_file = local_file
        self.postgres = postgres
        self.say = echo
        (self.policy,) = console.policies
        self.runtime = console.policies[self.policy]
        vendor = console.stack.vendor
        if vendor is None:
            raise DrillError("a drill needs the vendor simulator")
        self.vendor: VendorSimulator = vendor
        # Its writes lower the policy's wake item when the stack keeps one, as every writer's
        # do (sweeper.ledger.wake).
        self.ledger = Ledger(console.database_url, wake=self.runtime.pipeline.wake)
        self.sqs = console.stack.aws.sqs()
        self.queue_url = self.runtime.resources.queue_url
        self.dlq_url = self.runtime.resources.dlq_url
        self.checks: dict[str, Check] = {}
        self.fault_over_at: float | None = None
        self.settled_at: float | None = None

    # -- acting ---------------------------------------------------------------------------------

    def seed(self, count: int, *, first: int = 0) -> None:
        """`count` jobs due now, one object each, over three tenants."""
        now = datetime.now(UTC)
        jobs = [
            NewJob(f"tenant-{i % 3}", f"object-{i:05d}", now) for i in range(first, first + count)
        ]
        schedule_jobs(self.ledger, self.runtime.policy, jobs, now)
        self.say(f"seeded {count} jobs")

    def hold_consumers(self) -> None:
        """Stop the event source receiving (drill plumbing, not the operator's pause), and wait
        until a long poll already under way has ended, so that nothing published from now on is
        taken."""
        source = self.runtime.pipeline.source
        if not source.pause_receiving(timeout_seconds=RECEIVE_WAIT_SECONDS + HOLD_MARGIN_SECONDS):
            raise DrillError("the event source's receive under way did not end")

    def release_consumers(self) -> None:
        self.runtime.pipeline.source.resume()

    def receive_published(self, count: int) -> list[MessageTypeDef]:
        """With consumers held: one message for each of `count` distinct jobs, left visible."""
        found: dict[str, MessageTypeDef] = {}

        def more() -> bool:
            response = self.sqs.receive_message(
                QueueUrl=self.queue_url,
                MaxNumberOfMessages=10,
                VisibilityTimeout=0,
                MessageSystemAttributeNames=["All"],
            )
            for message in response.get("Messages", []):
                found.setdefault(JobMessage.model_validate_json(message["Body"]).key, message)
            return len(found) >= count

        self.wait(f"the producer has published {count} messages", more, 30)
        return list(found.values())[:count]

    def send(self, bodies: Sequence[str]) -> None:
        """Put messages on the work queue, as another writer (or a duplicate publish) would."""
        for start in range(0, len(bodies), 10):
            chunk = bodies[start : start + 10]
            self.sqs.send_message_batch(
                QueueUrl=self.queue_url,
                Entries=[{"Id": str(i), "MessageBody": body} for i, body in enumerate(chunk)],
            )
        self.say(f"sent {len(bodies)} messages to the work queue")

    def fault_over(self) -> None:
        """The fault has stopped acting: recovery is timed from here."""
        self.fault_over_at = time.monotonic()

    # -- waiting --------------------------------------------------------------------------------

    def wait(self, what: str, condition: Callable[[], bool], timeout_seconds: float) -> None:
        """Poll until `condition` holds, or raise DrillError. A ledger error while polling is
        the drill's own observation failing (a database restart): it polls again."""
        self.say(f"... waiting until {what}")
        deadline = time.monotonic() + timeout_seconds
        while True:
            failure = self.console.failure()
            if failure is not None:
                raise DrillError(f"the local stack failed: {failure!r}")
            with contextlib.suppress(LedgerError, psycopg.Error):
                if condition():
                    return
            if time.monotonic() > deadline:
                raise DrillError(f"gave up after {timeout_seconds:.0f} s waiting until {what}")
            time.sleep(POLL_SECONDS)

    def counts(self) -> dict[JobStatus, int]:
        return self.ledger.counts(self.policy)

    def final(self) -> int:
        counts = self.counts()
        return counts[JobStatus.SUCCEEDED] + counts[JobStatus.FAILED]

    def succeeded(self) -> int:
        return self.counts()[JobStatus.SUCCEEDED]

    def jobs(self) -> int:
        """The obligations: every job but the cancelled (an operator ended those uncalled)."""
        return sum(n for status, n in self.counts().items() if status is not JobStatus.CANCELLED)

    def messages_left(self) -> int:
        return queue_depth(self.sqs, self.queue_url)[0] + queue_depth(self.sqs, self.dlq_url)[0]

    def settle(self, timeout_seconds: float = SETTLE_TIMEOUT_SECONDS) -> None:
        """Wait until every job is final and no message is left on the queue or its DLQ."""
        self.wait(
            "every job is final and the queues are empty",
            lambda: self.final() == self.jobs() and self.messages_left() == 0,
            timeout_seconds,
        )
        self.settled_at = time.monotonic()

    # -- observing ------------------------------------------------------------------------------

    def metric(self, name: str) -> int:
        """The total of one metric the functions emitted (their EMF lines), as CloudWatch sums."""
        return int(metrics_from_log(self.console.log_file).get(name, 0))

    def audit(self) -> VendorAudit:
        return self.vendor.audit()

    def server_started(self) -> datetime | None:
        """When the ledger's PostgreSQL last started (a restart changes it)."""
        with psycopg.connect(self.console.database_url, connect_timeout=5) as conn:
            row = conn.execute(SERVER_STARTED_SQL).fetchone()
        return None if row is None else row[0]

    def check(self, name: str, value: Any, ok: bool, expected: str) -> None:
        self.checks[name] = Check(value, expected, bool(ok))
        self.say(f"check {name}: {value!r} ({'ok' if ok else 'expected ' + expected})")

    def check_equal(self, name: str, value: Any, expected: Any) -> None:
        self.check(name, value, value == expected, f"== {expected!r}")

    def check_at_least(self, name: str, value: float, least: float) -> None:
        self.check(name, value, value >= least, f">= {least}")

    def check_at_most(self, name: str, value: float, most: float) -> None:
        self.check(name, value, value <= most, f"<= {most}")

    def figures(self) -> Figures:
        try:
            with psycopg.connect(self.console.database_url, connect_timeout=5) as conn:
                rows = conn.execute(JOBS_SQL, {"policy": self.policy}).fetchall()
        except psycopg.Error as exc:
            raise DrillError(f"cannot read the ledger for the figures ({exc.sqlstate})") from exc
        rows = [row for row in rows if row[3] != JobStatus.CANCELLED.value]  # not obligations
        audit = self.audit()
        effects_by_target: dict[str, int] = {}
        for target, keys in audit.keys_by_target.items():
            effects_by_target[target] = sum(audit.effects_by_key.get(k, 0) for k in keys)
        targets = {f"{tenant}/{obj}" for tenant, obj, _, _ in rows}
        statuses = [JobStatus(status) for _, _, _, status in rows]
        effects = [effects_by_target.get(t, 0) for t in targets]
        left = -1  # unknown: the queues could not be read
        with contextlib.suppress(SweeperError):
            left = self.messages_left()
        recover = None
        if self.fault_over_at is not None and self.settled_at is not None:
            recover = round(max(0.0, self.settled_at - self.fault_over_at), 2)
        return Figures(
            jobs=len(rows),
            jobs_final=sum(s in (JobStatus.SUCCEEDED, JobStatus.FAILED) for s in statuses),
            succeeded=sum(s is JobStatus.SUCCEEDED for s in statuses),
            vendor_effects=audit.effects_total,
            objects_without_effect=sum(n == 0 for n in effects),
            objects_with_several_effects=sum(n > 1 for n in effects),
            effects_on_other_objects=sum(
                n for t, n in effects_by_target.items() if t not in targets
            ),
            objects_with_several_keys=sum(len(k) > 1 for k in audit.keys_by_target.values()),
            max_calls_per_key=max(audit.calls_by_key.values(), default=0),
            self_caused_429s=audit.quota_rejections,
            messages_left=left,
            time_to_recover_seconds=recover,
        )

    def close(self) -> None:
        self.ledger.close()


# -- the drills ---------------------------------------------------------------------------------


def duplicate_delivery(run: DrillRun, jobs: int = 10, copies: int = 3) -> None:
    """Every message is on the queue three times (SQS delivers at least once; a publish may be
    repeated): each job is called once, the extra copies are acknowledged as duplicates."""
    run.hold_consumers()
    run.seed(jobs)
    bodies = [m["Body"] for m in run.receive_published(jobs)]
    run.send([body for body in bodies for _ in range(copies - 1)])
    run.release_consumers()
    run.fault_over()
    run.settle()
    run.check_equal(
        "Duplicates (extra copies acknowledged)",
        run.metric(Metric.DUPLICATES),
        jobs * (copies - 1),
    )
    run.check_equal("vendor calls per key (max)", run.figures().max_calls_per_key, 1)


def poison_message(run: DrillRun, jobs: int = 10) -> None:
    """Unreadable bodies and a body naming no ledger job arrive among real work: each is
    dropped without a call and without failing its batch; every real job succeeds."""
    run.seed(jobs)
    ghost = JobMessage(
        key=f"{run.policy}:tenant-0:ghost:v1",
        policy=run.policy,
        policy_version=1,
        tenant_id="tenant-0",
        object_id="ghost",
        scope="global",
        attempt=0,
        batch_id="not-a-run",
    )
    run.send(["not json at all", json.dumps({"v": 1, "key": "half a message"}), ghost.to_body()])
    run.fault_over()
    run.settle()
    run.check_equal("MalformedMessages", run.metric(Metric.MALFORMED), 2)
    run.check_equal("OrphanMessages", run.metric(Metric.ORPHANS), 1)
    run.check_equal("calls for the ghost object", run.audit().calls_by_key.get(ghost.key, 0), 0)
    errors = run.runtime.pipeline.source.stats.function_errors
    run.check_equal("consumer function errors", errors, 0)


def forged_message(run: DrillRun, jobs: int = 6) -> None:
    """Someone else writes to the work queue: a real job's key with another job's object, and
    with another scope. Neither is called; both jobs get their one effect on their own object."""
    run.hold_consumers()
    run.seed(jobs)
    first, second = (JobMessage.model_validate_json(m["Body"]) for m in run.receive_published(2))
    forged = [
        first.model_copy(update={"tenant_id": second.tenant_id, "object_id": second.object_id}),
        first.model_copy(update={"scope": "forged-scope"}),
    ]
    run.send([m.to_body() for m in forged])
    run.release_consumers()
    run.fault_over()
    run.settle()
    audit = run.audit()
    run.check_equal("MismatchedMessages", run.metric(Metric.MISMATCHED), len(forged))
    run.check_equal(
        "keys the other object was called with",
        list(audit.keys_by_target.get(f"{second.tenant_id}/{second.object_id}", ())),
        [second.key],
    )
    run.check_equal("calls with the forged key", audit.calls_by_key.get(first.key, 0), 1)


#: The throttle storm: an incident of this long, its 429s saying Retry-After this.
INCIDENT_SECONDS = 4.0
INCIDENT_RETRY_AFTER_SECONDS = 2


def throttle_storm(run: DrillRun, jobs: int = 100) -> None:
    """Mid-run the vendor answers every call 429 with Retry-After for a few seconds: the gate
    closes, calls stop until the vendor's time, and the reopening causes no 429 of our own."""
    run.seed(jobs)
    run.wait("10 jobs have succeeded", lambda: run.succeeded() >= 10, 30)
    _, end = run.vendor.start_incident(
        INCIDENT_SECONDS, retry_after_seconds=INCIDENT_RETRY_AFTER_SECONDS
    )
    run.say(f"vendor incident: 429, Retry-After {INCIDENT_RETRY_AFTER_SECONDS} s")
    run.wait("the incident is over", lambda: time.monotonic() >= end, INCIDENT_SECONDS + 5)
    run.fault_over()
    run.settle()
    audit = run.audit()
    closures = run.metric(Metric.THROTTLE_EVENTS)
    run.check_at_least("ThrottleEvents (the gate closed)", closures, 1)
    # Each closure lets through at most what was in flight past the last look at the gate.
    concurrency = run.runtime.policy.consumer.max_concurrency
    run.check_at_most(
        "calls during the incident",
        audit.calls_during_closure,
        (INCIDENT_SECONDS / INCIDENT_RETRY_AFTER_SECONDS + 1) * 2 * concurrency,
    )
    run.check_equal("self-caused 429s", audit.quota_rejections, 0)


def crash_after_accept(run: DrillRun, jobs: int = 5) -> None:
    """A consumer's execution environment is SIGKILLed after the vendor accepted its call and
    before the ledger commit. Its in-progress idempotency record stays behind (a raised
    exception would have removed it): redeliveries wait it out, then the vendor replays."""
    run.hold_consumers()
    run.seed(jobs)
    (message,) = run.receive_published(1)
    key = JobMessage.model_validate_json(message["Body"]).key
    pipeline = run.runtime.pipeline
    timeout = float(run.runtime.policy.consumer.timeout_seconds)
    event = {"Records": [to_event_record(message, run.runtime.resources.queue_arn, LOCAL_REGION)]}
    # One environment of the consumer's own kind, outside the event source, so that the kill
    # hits the call whose answer the vendor holds back.
    environment = ExecutionEnvironment("consumer", pipeline.env, pipeline.log_file)
    outcome: list[Invocation] = []
    run.vendor.set_fault_rates(timeout_after_effect_rate=1.0)  # the answer never comes back
    try:
        environment.initialise()
        caller = threading.Thread(
            target=lambda: outcome.append(
                environment.invoke(
                    event,
                    function_name=LOCAL_CONSUMER_FUNCTION.format(policy=run.policy),
                    timeout_seconds=timeout,
                )
            ),
            daemon=True,
        )
        caller.start()
        run.wait("the vendor has accepted the call", lambda: run.audit().answers_lost >= 1, 30)
        run.check_equal("effects before the kill", run.audit().effects_by_key, {key: 1})
        job = run.ledger.get(key)
        run.check_equal("ledger status at the kill", job and job.status, JobStatus.LEASED)
        assert environment.pid is not None
        os.kill(environment.pid, signal.SIGKILL)
        run.say(f"killed the consumer's process {environment.pid} (SIGKILL)")
        caller.join(timeout + 5)
    finally:
        run.vendor.set_fault_rates(timeout_after_effect_rate=0.0)
        environment.discard()
    died = outcome[0].status if outcome else None
    run.check_equal("the invocation", died, InvocationStatus.ENVIRONMENT_DIED)
    run.release_consumers()
    run.fault_over()
    run.settle()
    audit = run.audit()
    run.check_at_least(
        "InProgressElsewhere (the killed call's record stayed)",
        run.metric(Metric.IN_PROGRESS_ELSEWHERE),
        1,
    )
    run.check_equal("vendor calls with the key (lost, then replayed)", audit.calls_by_key[key], 2)
    run.check_equal("effects for the key", audit.effects_by_key.get(key, 0), 1)


def database_restart(run: DrillRun, jobs: int = 60) -> None:
    """Mid-run the ledger's PostgreSQL stops at once (a crash: `pg_ctl -m immediate`) and comes
    back: invocations fail and return their batches, leases expire or settle, nothing is lost."""
    if run.postgres is None:
        raise DrillError("the database restart drill needs a PostgreSQL of its own")
    run.seed(jobs)
    run.wait("10 jobs have succeeded", lambda: run.succeeded() >= 10, 30)
    started = run.server_started()
    before = run.final()
    run.postgres.restart(immediate=True)
    run.say("PostgreSQL restarted (immediate shutdown, crash recovery)")
    run.fault_over()
    run.check_at_most("jobs final at the restart", before, jobs - 1)
    run.check("the server restarted", run.server_started() != started, True, "a new start time")
    run.settle()


#: A database blip costs seconds: every job final within this long of the restart, where the
#: records it failed would otherwise wait out the queue's visibility timeout (60 s here).
BLIP_RECOVERY_SECONDS = 30.0
BLIP_JOBS = 300
BLIP_RESTART_AT = 200


def _database_blip(run: DrillRun, *, immediate: bool, jobs: int = BLIP_JOBS) -> None:
    """Mid-run the ledger's PostgreSQL restarts (`pg_ctl -m fast` or `-m immediate`): the
    records that meet the unreachable ledger come back in seconds (sweeper.returns), not after
    the visibility timeout, so every job is final within BLIP_RECOVERY_SECONDS of the restart."""
    if run.postgres is None:
        raise DrillError("the database blip drill needs a PostgreSQL of its own")
    run.seed(jobs)
    # Two thirds in: the rest (a hundred jobs, about 15 s at this stack's 7 jobs/s on two
    # cores) is work enough in flight, and the deadline then measures the blip, not the rate.
    run.wait(
        f"{BLIP_RESTART_AT} jobs have succeeded", lambda: run.succeeded() >= BLIP_RESTART_AT, 90
    )
    started = run.server_started()
    before = run.final()
    run.postgres.restart(immediate=immediate)
    mode = "immediate" if immediate else "fast"
    run.say(f"PostgreSQL restarted (-m {mode})")
    run.fault_over()
    restarted = time.monotonic()
    run.check_at_most("jobs final at the restart", before, jobs - 1)
    run.check("the server restarted", run.server_started() != started, True, "a new start time")
    run.wait("every job is final", lambda: run.final() == jobs, SETTLE_TIMEOUT_SECONDS)
    run.check_at_most(
        "seconds from the restart to every job final",
        round(time.monotonic() - restarted, 2),
        BLIP_RECOVERY_SECONDS,
    )
    run.check_at_least("records returned soon (LedgerUnreached)", run.metric("LedgerUnreached"), 1)
    run.settle()


def database_restart_fast(run: DrillRun) -> None:
    _database_blip(run, immediate=False)


def database_restart_immediate(run: DrillRun) -> None:
    _database_blip(run, immediate=True)


def worker_kill(run: DrillRun, jobs: int = 60) -> None:
    """Mid-run one consumer execution environment is SIGKILLed: the event source starts a new
    one, the batch returns after the visibility timeout, nothing is lost."""
    run.seed(jobs)
    run.wait("10 jobs have succeeded", lambda: run.succeeded() >= 10, 30)
    before = run.final()
    victim = _consumer_worker(run)
    os.kill(victim, signal.SIGKILL)
    run.say(f"killed consumer execution environment {victim} (SIGKILL)")
    run.fault_over()
    run.check_at_most("jobs final at the kill", before, jobs - 1)
    run.settle()
    source = run.runtime.pipeline.source
    run.check_at_least("environments lost (and replaced)", source.stats.environments_lost, 1)
    pids = [e.pid for e in source.environments]
    run.check("the killed environment is not among the live ones", pids, victim not in pids, "")


def _consumer_worker(run: DrillRun) -> int:
    """The pid of a live consumer execution environment of the event source."""
    for environment in run.runtime.pipeline.source.environments:
        if environment.pid is not None:
            return environment.pid
    raise DrillError("no consumer execution environment found to kill")


def lease_expiry(run: DrillRun, jobs: int = 8) -> None:
    """Leased jobs' messages are lost (as when a producer dies between its claim and its
    publish): the leases expire, the producer reclaims and publishes them again."""
    run.hold_consumers()
    run.seed(jobs)
    run.receive_published(jobs)
    lost = 0
    while True:
        response = run.sqs.receive_message(QueueUrl=run.queue_url, MaxNumberOfMessages=10)
        messages = response.get("Messages", [])
        if not messages:
            break
        for message in messages:
            run.sqs.delete_message(QueueUrl=run.queue_url, ReceiptHandle=message["ReceiptHandle"])
            lost += 1
    run.say(f"deleted {lost} published messages: their jobs stay leased")
    run.check_equal("jobs leased with no message", run.counts()[JobStatus.LEASED], jobs)
    run.release_consumers()
    run.fault_over()
    run.settle()
    run.check_at_least("LeasesReclaimed", run.metric(Metric.RECLAIMED), jobs)


#: The pause drill holds the pause this long once the batches in flight at the pause have ended.
PAUSE_HOLD_SECONDS = 4.0


def pause_resume(run: DrillRun, jobs: int = 60) -> None:
    """The operator pauses mid-run: in-flight batches finish, then nothing calls the vendor and
    the producer's runs are skipped; after resume every job completes once."""
    run.seed(jobs)
    run.wait("10 jobs have succeeded", lambda: run.succeeded() >= 10, 30)
    now = datetime.now(UTC)
    pause_policy(run.policy, run.ledger, None, actor="drill", reason="drill", now=now)
    run.wait("the consumers have stopped", lambda: run.runtime.paused, 10)
    # In-flight batches finish (as on AWS, where disabling the mapping stops new batches only);
    # the quiet stretch starts when the last of them has ended, however loaded the machine is.
    source = run.runtime.pipeline.source
    run.wait(
        "the batches in flight at the pause have ended",
        lambda: source.in_flight == 0,
        run.runtime.policy.consumer.timeout_seconds + 5,
    )
    quiet_from = time.monotonic()
    before = run.final()
    time.sleep(PAUSE_HOLD_SECONDS)  # observing that nothing happens takes a stretch of time
    resumed_at = time.monotonic()
    resume_policy(
        run.policy, run.ledger, None, actor="drill", reason="drill", now=datetime.now(UTC)
    )
    run.fault_over()
    run.check_at_most("jobs final at the pause", before, jobs - 1)
    run.check_equal(
        "vendor calls while paused (after in-flight batches)",
        sum(quiet_from <= at < resumed_at for at in run.audit().arrivals),
        0,
    )
    skipped = [r for r in run.ledger.runs(run.policy, 50) if r.scheduled_at >= now]
    run.check_at_least(
        "producer runs skipped while paused",
        sum(r.stop_reason == "paused" for r in skipped),
        1,
    )
    run.settle()


def calls_to(run: DrillRun, targets: Sequence[str]) -> int:
    """Vendor calls made for these objects ("tenant/object"), under any key."""
    audit = run.audit()
    return sum(
        audit.calls_by_key.get(key, 0)
        for target in targets
        for key in audit.keys_by_target.get(target, {})
    )


def operator_backend(run: DrillRun) -> Backend:
    """The operator's commands (`sweeper cancel`, `redrive`, ...) against the drill's stack."""
    from sweeper.operator_api.commands import Backend
    from sweeper_tools.endpoints import resolve

    return Backend(
        config=run.console.config,
        endpoints=resolve(
            local_file=str(run.local_file), database_url=None, region=None, profile=None, stack=None
        ),
        open_ledger=lambda: run.ledger,
    )


def job_control(run: DrillRun, jobs: int = 12, copies: int = 3) -> None:
    """The operator cancels a third of a published batch and holds a third; every message is
    then delivered three times and their letters redriven: a cancelled or held job is never
    called, the rest once each; after the unhold and a second redrive the held ones are too."""
    from sweeper.operator_api.changes import control, redrive
    from sweeper.operator_api.requests import ControlRequest, RedriveCommand

    backend = operator_backend(run)
    run.hold_consumers()
    run.seed(jobs)
    published = run.receive_published(jobs)
    bodies = {JobMessage.model_validate_json(m["Body"]).key: m["Body"] for m in published}
    keys = sorted(bodies)
    third = jobs // 3
    cancelled, held = keys[:third], keys[third : 2 * third]

    def targets(chosen: Sequence[str]) -> list[str]:
        return ["/".join(key.split(":")[1:3]) for key in chosen]

    for command, chosen in (("cancel", cancelled), ("hold", held)):
        report = control(
            backend,
            ControlRequest(command=command, keys=tuple(chosen), reason="drill"),
            actor="drill",
        )
        run.check_equal(f"{command}: jobs moved", report["moved"], third)
    # Redeliveries: every message twice more on the work queue ...
    run.send([body for body in bodies.values() for _ in range(copies - 1)])
    # ... and the cancelled and held jobs' letters in the DLQ, redriven
    for key in (*cancelled, *held):
        run.sqs.send_message(QueueUrl=run.dlq_url, MessageBody=bodies[key])
    first = redrive(backend, RedriveCommand(), actor="drill")
    # (The DLQ may hold more: the drill's own receives count towards max_receive_count.)
    run.check_at_least("redrive: cancelled letters dropped", first["dropped_cancelled"], third)
    run.check_at_least("redrive: held letters kept", first["kept_held"], third)
    run.release_consumers()
    run.fault_over()
    run.wait(
        "the work queue is empty and the other jobs succeeded",
        lambda: run.succeeded() == jobs - 2 * third and queue_depth(run.sqs, run.queue_url)[0] == 0,
        SETTLE_TIMEOUT_SECONDS,
    )
    run.check_equal("vendor calls for cancelled jobs", calls_to(run, targets(cancelled)), 0)
    run.check_equal("vendor calls for held jobs while held", calls_to(run, targets(held)), 0)
    run.check_equal("held jobs still held", run.counts()[JobStatus.HELD], third)
    run.check_equal("cancelled jobs still cancelled", run.counts()[JobStatus.CANCELLED], third)
    # Then the hold is lifted and the kept letters redriven: each held job is called once
    control(backend, ControlRequest(command="unhold", keys=tuple(held)), actor="drill")
    second = redrive(backend, RedriveCommand(), actor="drill")
    run.check_at_least("redrive after unhold: moved", second["moved"], third)
    run.settle()
    run.check_equal(
        "vendor calls for cancelled jobs at the end", calls_to(run, targets(cancelled)), 0
    )
    run.check_equal("calls per formerly held job", calls_to(run, targets(held)), third)


class _CommandClock:
    """An echo for a scenario that also notes when each of its commands started."""

    def __init__(self, echo: Echo) -> None:
        self.echo = echo
        self.started: list[tuple[str, float]] = []

    def __call__(self, text: str) -> None:
        if text.startswith("$ sweeper "):
            command = text.removeprefix("$ sweeper ").removesuffix(" --json")
            self.started.append((command, time.monotonic()))
        self.echo(text)

    def last(self, command: str) -> float | None:
        times = [at for name, at in self.started if name == command]
        return times[-1] if times else None

    def first(self, prefix: str) -> float | None:
        times = [at for name, at in self.started if name.startswith(prefix)]
        return times[0] if times else None


def _scenario(run: DrillRun, scenario: Any, name: str) -> tuple[Any, _CommandClock]:
    """Run one of the operator scenarios on the drill's stack, timing its commands."""
    clock = _CommandClock(run.say)
    try:
        report = scenario(run.console, run.local_file, echo=clock)
    except ScenarioError as exc:
        raise DrillError(f"the {name} scenario failed: {exc}") from exc
    return report, clock


def dlq_and_redrive(run: DrillRun) -> None:
    """A vendor incident outlasts max_receive_count: every message lands in the DLQ; the
    operator sees it in `status` and redrives once the gate reopens (the `dlq` scenario)."""
    report, clock = _scenario(run, dlq_scenario, "dlq")
    run.fault_over_at = clock.last("redrive")
    run.check_equal("DLQ depth seen by status", report.checks["status: DLQ depth"], 6)
    run.check_equal("moved by redrive", report.checks["redrive: moved"], 6)
    run.settle()


def missed_runs(run: DrillRun) -> None:
    """Paused while scheduled runs pass and one run is never delivered; after resume,
    `catch-up` releases every missed run in order (the `catch-up` scenario)."""
    report, clock = _scenario(run, catch_up_scenario, "catch-up")
    run.fault_over_at = clock.first("catch-up")
    run.check_equal("missed runs released", len(report.checks["catch-up: was"]), 5)
    run.check_equal("second catch-up finds none", report.checks["second catch-up: missed"], 0)
    run.settle()


SOAK_JOBS = 2000


#: The soak's jobs arrive in waves (obligations falling due over time), each once the backlog
#: is below the low-water mark, so that the queue stays the size a steady state has.
SOAK_WAVE = 200
SOAK_LOW_WATER = 100


def soak(run: DrillRun, jobs: int = SOAK_JOBS) -> None:
    """A few thousand jobs, arriving in waves, while the vendor answers 5xx now and then, loses
    answers after the effect, and has a 429 incident a third of the way in."""
    run.vendor.set_fault_rates(
        error_rate=0.02, server_error_rate=0.02, timeout_after_effect_rate=0.01
    )
    seeded = 0
    incident_end: float | None = None
    while seeded < jobs:
        wave = min(SOAK_WAVE, jobs - seeded)
        run.seed(wave, first=seeded)
        seeded += wave
        run.wait(
            f"fewer than {SOAK_LOW_WATER} jobs wait",
            lambda: run.jobs() - run.final() < SOAK_LOW_WATER,
            SETTLE_TIMEOUT_SECONDS * 2,
        )
        if incident_end is None and seeded >= jobs // 3:
            _, incident_end = run.vendor.start_incident(INCIDENT_SECONDS, retry_after_seconds=2)
            run.say(f"vendor incident: 429 for {INCIDENT_SECONDS:.0f} s")
    assert incident_end is not None
    end = incident_end
    run.wait("the incident is over", lambda: time.monotonic() >= end, SETTLE_TIMEOUT_SECONDS)
    run.fault_over_at = end  # recovery: from the incident's end to every job final
    run.settle()
    audit = run.audit()
    statuses = audit.responses_by_status
    run.check_at_least("5xx answers", statuses.get(500, 0) + statuses.get(503, 0), 1)
    run.check_at_least("answers lost after the effect", audit.answers_lost, 1)
    run.check_at_least("ThrottleEvents", run.metric(Metric.THROTTLE_EVENTS), 1)
    run.check_at_least("Retries", run.metric(Metric.RETRIES), 1)


# -- the registry -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Drill:
    name: str
    description: str
    alarm: str
    run: Callable[[DrillRun], None]
    config: str = field(default_factory=drill_config)
    tick_seconds: float | None = 1.0
    #: The work queue's visibility timeout: the consumer's timeout (the shortest AWS accepts,
    #: so that a returned batch comes back soon), or None for the policy's six timeouts.
    shortest_visibility: bool = True
    #: A PostgreSQL of its own that keeps every commit it acknowledged through a crash, as
    #: Aurora does (the local default trades that for speed), whatever database is offered.
    durable_database: bool = False
    #: The stack keeps each policy's wake item, as on AWS (sweeper.ledger.wake).
    keep_wake: bool = False
    slow: bool = False


DRILLS: dict[str, Drill] = {
    drill.name: drill
    for drill in (
        Drill(
            "duplicate-delivery",
            "every message delivered three times: one call and one effect per job",
            "none (Duplicates metric, by design)",
            duplicate_delivery,
        ),
        Drill(
            "poison-message",
            "unreadable and orphan bodies among real work: dropped, batches unharmed",
            "ConsumerErrors stays quiet (MalformedMessages, OrphanMessages metrics)",
            poison_message,
        ),
        Drill(
            "forged-message",
            "a job's key with another object or scope: never called",
            "MismatchedMessages",
            forged_message,
        ),
        Drill(
            "throttle-storm",
            "a 429 + Retry-After incident mid-run: the gate closes, no stampede at reopening",
            "QueueAge (a gate closed; ThrottleEvents)",
            throttle_storm,
        ),
        Drill(
            "crash-after-accept",
            "consumer SIGKILLed after the vendor accepted, before the ledger commit",
            "ConsumerErrors",
            crash_after_accept,
        ),
        Drill(
            "database-restart",
            "the ledger's PostgreSQL crashes and restarts mid-run",
            "ConsumerErrors, ProducerErrors",
            database_restart,
            config=drill_config(quota=20),
            durable_database=True,
        ),
        Drill(
            "db-restart-fast",
            f"{BLIP_JOBS} jobs; the ledger restarts (-m fast): all final within "
            f"{BLIP_RECOVERY_SECONDS:.0f} s",
            "ConsumerErrors (LedgerUnreached metric)",
            database_restart_fast,
            durable_database=True,
            shortest_visibility=False,
        ),
        Drill(
            "db-restart-immediate",
            f"{BLIP_JOBS} jobs; the ledger crashes (-m immediate): all final within "
            f"{BLIP_RECOVERY_SECONDS:.0f} s",
            "ConsumerErrors (LedgerUnreached metric)",
            database_restart_immediate,
            durable_database=True,
            shortest_visibility=False,
        ),
        Drill(
            "worker-kill",
            "a consumer worker process SIGKILLed mid-run",
            "ConsumerErrors",
            worker_kill,
            config=drill_config(quota=20),
        ),
        Drill(
            "lease-expiry",
            "leased jobs' messages lost: leases expire, are reclaimed and published again",
            "OldestEligibleAge (LeasesReclaimed metric)",
            lease_expiry,
            # The shortest lease (10 s) and consumer timeout the policy accepts: a reclaim waits
            # out the longer of the lease and six consumer timeouts (republish_delay_seconds),
            # 42 s from the claim instead of 60 s with the drills' usual 10 s timeout.
            config=drill_config(lease_seconds=10, consumer_timeout=MIN_CONSUMER_TIMEOUT_SECONDS),
        ),
        Drill(
            "pause-resume",
            "operator pause mid-run: no calls while paused, all complete after resume",
            "OldestEligibleAge (runs end `paused`)",
            pause_resume,
            config=drill_config(quota=20),
        ),
        Drill(
            "job-control",
            "cancel and hold under redeliveries and redrives: never called; unhold, then once",
            "none (Duplicates metric; the operator's actions are recorded)",
            job_control,
        ),
        Drill(
            "not-yet-due",
            "exact bodies of jobs due next year, and a postponed job's letter redriven: "
            "no call until their time, then one each",
            "none (NotYetDue metric; the batch audit's not yet due)",
            not_yet_due,
        ),
        Drill(
            "dlq-redrive",
            "an incident fills the DLQ; the operator redrives once the gate reopens",
            "DeadLetters",
            dlq_and_redrive,
            config=SCENARIO_CONFIG,
            shortest_visibility=False,
        ),
        Drill(
            "idle-ledger",
            "nothing due, the ledger refusing connections: no producer run reaches for it; "
            "work scheduled then is released by the next run",
            "none (the producer's not_due runs)",
            idle_ledger,
            tick_seconds=None,
            durable_database=True,
            keep_wake=True,
        ),
        Drill(
            "catch-up",
            "runs missed while paused (and one lost) released in order by catch-up",
            "ProducerScheduleDeadLetters, OldestEligibleAge",
            missed_runs,
            config=SCENARIO_CONFIG,
            tick_seconds=None,
            shortest_visibility=False,
        ),
        Drill(
            "soak",
            f"{SOAK_JOBS} jobs in waves with 5xx, lost answers and a 429 incident",
            "TerminalFailures stays quiet (QueueAge during the incident)",
            soak,
            config=drill_config(quota=20),
            slow=True,
        ),
    )
}


# -- running ------------------------------------------------------------------------------------


@contextlib.contextmanager
def _drill_stack(drill: Drill, database_url: str | None) -> Iterator[DrillRun]:
    # The functions' log outlives a failed drill, to investigate it from.
    log_file = tempfile.NamedTemporaryFile(  # noqa: SIM115 - kept to read
        prefix=f"sweeper-drill-{drill.name}-", suffix=".log", delete=False
    ).name
    with (
        tempfile.TemporaryDirectory(prefix="sweeper-drill-") as folder,
        contextlib.ExitStack() as parts,
    ):
        postgres: LocalPostgres | None = None
        if database_url is None or drill.durable_database:
            postgres = parts.enter_context(LocalPostgres(durable=drill.durable_database))
            database_url = postgres.url
        config_path = Path(folder) / "sweeper.toml"
        config_path.write_text(drill.config, encoding="utf-8")
        config = load_config(config_path)
        (policy,) = config.policies
        console = LocalConsoleStack(
            config,
            config_path=str(config_path),
            database_url=database_url,
            tick_seconds=drill.tick_seconds,
            visibility_timeout_seconds=(
                policy.consumer.timeout_seconds if drill.shortest_visibility else None
            ),
            log_file=log_file,
            intake_consumers=False,  # no drill sends hints: two processes fewer to start and stop
            keep_wake=drill.keep_wake,
        )
        # The vendor enforces the policy's quota: a 429 it gives outside an incident is ours.
        console.stack.vendor_quota = policy.quota
        parts.enter_context(console)
        local_file = Path(folder) / "local.json"
        write_local_file(console.local_file(), local_file)
        run = DrillRun(console, local_file, postgres, echo=_quiet)
        parts.callback(run.close)
        yield run


def _quiet(text: str) -> None:
    pass


def run_drill(
    name: str, *, database_url: str | None = None, echo: Echo | None = None
) -> DrillReport:
    """Run one drill on a local stack of its own and judge it.

    `database_url`: an empty, migrated database to use instead of a PostgreSQL of its own
    (tests); a drill that needs a durable one starts its own.
    """
    drill = DRILLS[name]
    say = echo or _quiet
    started = time.monotonic()
    failures: list[str] = []
    say(f"drill {name}: {drill.description}")
    try:
        with _drill_stack(drill, database_url) as run:
            run.say = say
            try:
                drill.run(run)
            except SweeperError as exc:  # the stack failed, or a deadline passed
                failures.append(str(exc))
            figures = run.figures()
            checks = dict(run.checks)
            log_file = run.console.log_file
    except SweeperError as exc:
        failures.append(f"{type(exc).__name__}: {exc}")
        figures, checks, log_file = Figures(), {}, None
    failures += property_failures(figures)
    failures += [
        f"check failed: {n} = {c.value!r}, expected {c.expected}"
        for n, c in checks.items()
        if not c.ok
    ]
    if not failures and log_file is not None:
        Path(log_file).unlink(missing_ok=True)  # kept only to investigate a failure
        log_file = None
    return DrillReport(
        drill=name,
        description=drill.description,
        alarm=drill.alarm,
        verdict="fail" if failures else "pass",
        figures=figures,
        checks=checks,
        failures=failures,
        elapsed_seconds=round(time.monotonic() - started, 2),
        log_file=log_file,
    )


def resolve(name: str) -> list[str]:
    """The drills a command-line name means: one, or every drill for `all`."""
    if name == "all":
        return list(DRILLS)
    if name not in DRILLS:
        raise DrillError(f"no drill named {name!r}; `sweeper drill --list` shows them")
    return [name]


# -- printing -----------------------------------------------------------------------------------

FIGURE_LABELS = {
    "jobs_final": "jobs final",
    "vendor_effects": "vendor effects",
    "objects_with_several_keys": "objects with several keys",
    "max_calls_per_key": "calls per key (max)",
    "self_caused_429s": "self-caused 429s",
    "messages_left": "messages left",
    "time_to_recover_seconds": "time to recover (s)",
}


def render(report: DrillReport) -> list[str]:
    """A report as lines for a person."""
    f = report.figures
    values = {
        "jobs_final": f"{f.jobs_final}/{f.jobs}",
        "vendor_effects": f"{f.vendor_effects} ({f.objects_without_effect} objects without, "
        f"{f.objects_with_several_effects} with several)",
        "objects_with_several_keys": f.objects_with_several_keys,
        "max_calls_per_key": f.max_calls_per_key,
        "self_caused_429s": f.self_caused_429s,
        "messages_left": f.messages_left,
        "time_to_recover_seconds": f.time_to_recover_seconds,
    }
    lines = [f"drill {report.drill}: {report.description}", f"  alarm: {report.alarm}"]
    lines += [f"  {FIGURE_LABELS[k]:<26} {v}" for k, v in values.items()]
    for name, check in report.checks.items():
        mark = "ok" if check.ok else f"FAILED, expected {check.expected}"
        lines.append(f"  check {name}: {check.value!r} {mark}")
    lines += [f"  failure: {failure}" for failure in report.failures]
    if report.failures and report.log_file:
        lines.append(f"  functions' log: {report.log_file}")
    lines.append(f"  verdict: {report.verdict} ({report.elapsed_seconds} s)")
    return lines


def summary(reports: Sequence[DrillReport]) -> list[str]:
    """One line per drill: the figures side by side, then the verdict."""
    head = (
        f"{'drill':<20} {'final':>11} {'effects':>7} {'keys>1':>6} {'calls/key':>9} "
        f"{'429s':>4} {'recover s':>9}  verdict"
    )
    lines = [head]
    for r in reports:
        f = r.figures
        recover = "-" if f.time_to_recover_seconds is None else f"{f.time_to_recover_seconds:.1f}"
        lines.append(
            f"{r.drill:<20} {f'{f.jobs_final}/{f.jobs}':>11} {f.vendor_effects:>7} "
            f"{f.objects_with_several_keys:>6} {f.max_calls_per_key:>9} {f.self_caused_429s:>4} "
            f"{recover:>9}  {r.verdict}"
        )
    return lines

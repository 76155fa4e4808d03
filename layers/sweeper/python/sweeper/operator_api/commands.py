"""The console commands as plain functions: one per command, each taking a `Backend` and its
request and returning the data `sweeper <command> --json` prints.

The CLI calls them directly (`--database-url`, or the local stack), and the operator API's
function calls the very same ones (`--stack`), so both paths answer alike by construction. A
command that changes something takes `actor`: the operator's login name on the direct path, the
caller's IAM principal ARN through the API; the ledger records it with the reason.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from sweeper.config import Policy, SweeperConfig
from sweeper.errors import OperatorError
from sweeper.operator_api.requests import (
    ActivityRequest,
    CatchUpRequest,
    ControlRequest,
    InspectRequest,
    JobRequest,
    OperatorRequest,
    OverviewRequest,
    PauseRequest,
    PruneRequest,
    RedriveCommand,
    ReleaseRequest,
    ResumeRequest,
    RetryRequest,
    RunsRequest,
    SearchRequest,
    StatusRequest,
)

if TYPE_CHECKING:
    from sweeper.endpoints import Endpoints
    from sweeper.ledger.store import Ledger
    from sweeper.limiter import ScopeState

#: Discovery runs `status` shows per policy with discovery.
STATUS_DISCOVERY_RUNS = 3
#: Runs (with their reconciliation) and operator actions the console page shows per policy,
#: and how far back it looks for runs.
PAGE_RUNS = 5
PAGE_ACTIONS = 5
PAGE_RUNS_DAYS = 7

Clock = Callable[[], datetime]
#: Every limiter key closed at a time (epoch seconds): `sweeper.limiter.closed_gates`.
Closures = Callable[[float], "list[ScopeState]"]
#: Told the work done so far, for a progress bar on the direct path (the API has none).
Progress = Callable[[int], None]


def utcnow() -> datetime:
    return datetime.now(UTC)


class ConfirmationNeededError(OperatorError):
    """A job control would move more jobs than the threshold and was not confirmed."""

    def __init__(self, command: str, policy: str, moved: int, threshold: int) -> None:
        super().__init__(
            f"{moved} jobs match, more than {threshold}: confirm to {command} them, or narrow "
            "the filters or --max"
        )
        self.command = command
        self.policy = policy
        self.moved = moved
        self.threshold = threshold


@dataclass
class Backend:
    """What the commands run against: the policy file, where things are, and the ledger.

    `open_ledger` is called at most once, when a command first needs the ledger (a release on
    AWS without a ledger URL never does). `consumer_function` is the direct path's
    `--consumer-function`; the API always uses the stack's own. `remaining_seconds` bounds the
    long commands (redrive) by the caller's own deadline, e.g. Lambda's.
    """

    config: SweeperConfig
    endpoints: Endpoints
    open_ledger: Callable[[], Ledger] | None
    clock: Clock = utcnow
    consumer_function: str | None = None
    remaining_seconds: Callable[[], float] | None = None
    progress: Progress | None = None
    _ledger: Ledger | None = field(default=None, repr=False)

    @property
    def has_ledger(self) -> bool:
        return self.open_ledger is not None

    @property
    def ledger(self) -> Ledger:
        if self._ledger is None:
            if self.open_ledger is None:
                self.endpoints.require_database()  # raises with the fix
                raise OperatorError("no ledger")  # pragma: no cover - require_database raised
            self._ledger = self.open_ledger()
        return self._ledger

    def policy(self, name: str | None) -> Policy:
        """The named policy, or the only one; OperatorError otherwise."""
        if name is None:
            if len(self.config.policies) != 1:
                names = [p.name for p in self.config.policies]
                raise OperatorError(f"--policy is required (the policy file has {names})")
            return self.config.policies[0]
        for policy in self.config.policies:
            if policy.name == name:
                return policy
        raise OperatorError(f"no policy named {name!r} (check --policy)")

    def gate(self) -> Callable[[str], ScopeState] | None:
        from sweeper.limiter import DynamoLimiter

        table = self.endpoints.limiter_table()
        if table is None:
            return None
        return DynamoLimiter(self.endpoints.dynamodb(), table).state

    def closures(self) -> Closures | None:
        """The read of every limiter key closed at a time (None: no limiter table known)."""
        return closures_reader(self.endpoints)

    def tell(self, done: int) -> None:
        if self.progress is not None:
            self.progress(done)


def _iso(value: datetime | None) -> str | None:
    return None if value is None else value.isoformat()


def closures_reader(endpoints: Endpoints) -> Closures | None:
    """The closed keys' read on the endpoints' limiter table (None: no table known)."""
    from sweeper.limiter import closed_gates

    table = endpoints.limiter_table()
    if table is None:
        return None
    client = endpoints.dynamodb()
    return lambda now: closed_gates(client, table, now)


# -- reading: status, runs, inspect ---------------------------------------------------------------


def status(backend: Backend, request: StatusRequest) -> dict[str, Any]:
    """Per policy: jobs by status, oldest eligible age, queues, gates, the last runs."""
    from sweeper.dead_letters import queue_depth
    from sweeper.operations import policy_status

    policies = (
        [backend.policy(request.policy)]
        if request.policy is not None
        else list(backend.config.policies)
    )
    sqs = backend.endpoints.sqs()
    gate = backend.gate()
    read_closures = backend.closures()
    # one read of the closed keys serves every policy (their further limits' closures)
    closed = None if read_closures is None else read_closures(backend.clock().timestamp())
    found = []
    for policy in policies:
        where = backend.endpoints.policy(policy.name)
        item = policy_status(
            policy,
            backend.ledger,
            now=backend.clock(),
            depth=lambda url: queue_depth(sqs, url),
            queue_url=where.queue_url,
            dlq_url=where.dlq_url,
            gate=gate,
            closed_keys=closed,
        ).as_dict()
        for name, url in (("intake", where.intake_queue_url), ("intake_dlq", where.intake_dlq_url)):
            if url is None:
                item[name] = None
            else:
                messages, in_flight = queue_depth(sqs, url)
                item[name] = {"messages": messages, "in_flight": in_flight}
        at = next_run_at(backend, policy)
        item["schedule"] = policy.schedule
        item["next_run"] = None if at is None else at.isoformat()
        item["discovery_runs"] = _discovery_runs(backend, policy)
        found.append(item)
    return {"target": backend.endpoints.mode, "policies": found}


def next_run_at(backend: Backend, policy: Policy) -> datetime | None:
    """When the policy's producer runs next (the local stack's tick when it has one)."""
    from sweeper.release import next_run

    now = backend.clock()
    local = backend.endpoints.local
    tick = local.tick_seconds if local is not None else None
    return next_run(
        policy,
        now,
        last_scheduled=backend.ledger.last_run_at_or_before(policy.name, now),
        every=timedelta(seconds=tick) if tick is not None else None,
        anchor=local.started_at if local is not None else None,
    )


def _discovery_runs(backend: Backend, policy: Policy) -> list[dict[str, Any]]:
    """The last discovery runs: counts, stop reason, time; no cursor (it holds source ids)."""
    from sweeper.discovery.store import DiscoveryStore

    if policy.discovery is None:
        return []
    return [
        {
            "run_id": run.run_id,
            "source": run.source,
            "started_at": run.started_at,
            "pass_number": run.pass_number,
            "scanned": run.scanned,
            "inserted": run.inserted,
            "moved_earlier": run.moved_earlier,
            "unchanged": run.unchanged,
            "rejected": run.rejected,
            "elapsed_seconds": run.elapsed_seconds,
            "stop_reason": run.stop_reason,
        }
        for run in DiscoveryStore(backend.ledger).runs(policy.name, STATUS_DISCOVERY_RUNS)
    ]


def runs(backend: Backend, request: RunsRequest) -> dict[str, Any]:
    """The per-batch audit since a time: each batch's counts and whether it reconciles."""
    from sweeper.audit import batch_audit

    policy = backend.policy(request.policy)
    since = request.since.astimezone(UTC)
    batches = batch_audit(policy.name, backend.ledger, since=since, limit=request.limit)
    return {
        "policy": policy.name,
        "since": since.isoformat(),
        "batches": [b.as_dict() for b in batches],
        "reconciled": all(b.reconciles for b in batches),
    }


def inspect(backend: Backend, request: InspectRequest) -> dict[str, Any]:
    """Terminal, stuck and held jobs: ids, classes, codes, attempts and times; beside them the
    jobs retrying by class and code, and the policy's closed scopes (`sweeper.failing`)."""
    from sweeper.failing import failures
    from sweeper.operations import inspect_jobs

    policy = backend.policy(request.policy)
    now = backend.clock()
    rows = inspect_jobs(
        policy.name,
        backend.ledger,
        now=now,
        stuck_after=timedelta(seconds=request.stuck_after_seconds),
        limit=request.limit,
    )
    read = backend.closures()
    closed = None if read is None else read(now.timestamp())
    failing = failures(policy, backend.ledger, now=now, closed_keys=closed)
    return {"policy": policy.name, "jobs": rows, **failing.as_dict()}


# -- the console page's reads: overview, activity, search, job ----------------------------------


def limits_of(policy: Policy) -> dict[str, Any]:
    """The policy's configured limits, as the page lists them beside the gates."""
    quota = policy.quota
    return {
        "quota": f"{quota.limit} calls per {quota.period_seconds:g} s"
        + (" (adaptive)" if quota.adaptive else ""),
        "scope": policy.scope.kind,
        "consumer_concurrency": min(
            policy.consumer.reserved_concurrency, policy.consumer.max_concurrency
        ),
        "max_in_flight_per_scope": policy.max_in_flight_per_scope,
        "max_attempts": policy.max_attempts,
        "lease_seconds": policy.lease_seconds,
    }


def policy_overview(
    policy: Policy,
    ledger: Ledger,
    *,
    now: datetime,
    queues: Callable[[str], tuple[Any, str | None, str | None]] | None,
    gate: Callable[[str], ScopeState] | None,
    closures: Closures | None = None,
) -> dict[str, Any]:
    """Jobs by state, oldest eligible age, limits and gates, queue and DLQ depth (where
    `queues` reads them), the last runs with their reconciliation, the last operator actions.
    The web console's direct backend and the operator API both answer with this."""
    from sweeper.audit import batch_report
    from sweeper.operations import policy_status

    depth = dlq_url = queue_url = None
    if queues is not None:
        depth, queue_url, dlq_url = queues(policy.name)
    item = policy_status(
        policy,
        ledger,
        now=now,
        depth=depth,
        queue_url=queue_url,
        dlq_url=dlq_url,
        gate=gate,
        closed_keys=None if closures is None else closures(now.timestamp()),
    ).as_dict()
    audits = ledger.batch_audit(policy.name, now - timedelta(days=PAGE_RUNS_DAYS), PAGE_RUNS)
    item["runs"] = [batch_report(row).as_dict() for row in audits]
    item["limits"] = limits_of(policy)
    item["queues_read"] = queues is not None
    item["gates_read"] = gate is not None
    item["actions"] = [
        {
            "at": a.at.isoformat(),
            "action": a.action,
            "actor": a.actor,
            "reason": a.reason,
            "progress": None
            if not a.steps
            else {"steps": a.steps, "totals": a.totals or {}, "done": bool(a.done)},
        }
        for a in ledger.recent_actions(policy.name, PAGE_ACTIONS)
    ]
    return item


def overview(backend: Backend, request: OverviewRequest) -> dict[str, Any]:
    """The console page's summary of one policy, with the target's queues and gates."""
    from sweeper.dead_letters import queue_depth

    policy = backend.policy(request.policy)
    sqs = backend.endpoints.sqs()

    def queues(name: str) -> tuple[Any, str | None, str | None]:
        where = backend.endpoints.policy(name)
        return (lambda url: queue_depth(sqs, url)), where.queue_url, where.dlq_url

    return policy_overview(
        policy,
        backend.ledger,
        now=backend.clock(),
        queues=queues,
        gate=backend.gate(),
        closures=backend.closures(),
    )


def activity(backend: Backend, request: ActivityRequest) -> dict[str, Any]:
    """Claims and completions per time bucket over the last hours."""
    from sweeper.operations import activity as buckets

    policy = backend.policy(request.policy)
    return {"buckets": buckets(policy.name, backend.ledger, now=backend.clock())}


def search(backend: Backend, request: SearchRequest) -> dict[str, Any]:
    """The job with this operation key, or this tenant's jobs."""
    from sweeper.operations import search_jobs

    policy = backend.policy(request.policy)
    return {"jobs": search_jobs(policy.name, backend.ledger, request.query, limit=request.limit)}


def job(backend: Backend, request: JobRequest) -> dict[str, Any]:
    """One job's history (None when no job has the key)."""
    from sweeper.operations import job_history

    return {"job": job_history(request.key, backend.ledger)}


# -- changing: every one takes the actor the ledger records ------------------------------------


def retry(backend: Backend, request: RetryRequest, *, actor: str) -> dict[str, Any]:
    """Chosen terminal jobs back to pending with a fresh attempt budget."""
    from sweeper.operations import retry_jobs

    policy = backend.policy(request.policy)
    moved = retry_jobs(
        policy.name,
        backend.ledger,
        actor=actor,
        now=backend.clock(),
        keys=list(request.keys) if request.keys else None,
        outcomes=list(request.outcomes) if request.outcomes else None,
        tenant_id=request.tenant_id,
        limit=request.limit,
        reason=request.reason,
    )
    return {"policy": policy.name, "retried": len(moved), "keys": moved}


def redrive(backend: Backend, request: RedriveCommand, *, actor: str) -> dict[str, Any]:
    """Dead letters back to the work queue, as the redrive function does."""
    import time

    from sweeper.dead_letters import SqsDeadLetterQueue
    from sweeper.redrive import RedriveReport, RedriveRequest, run_redrive

    policy = backend.policy(request.policy)
    where = backend.endpoints.policy(policy.name)
    gate = backend.gate()
    if where.queue_url is None or where.dlq_url is None or gate is None:
        raise OperatorError(f"the target has no queue, DLQ or limiter table for {policy.name}")
    dlq = SqsDeadLetterQueue(backend.endpoints.sqs(), where.dlq_url, where.queue_url)
    deadline = time.monotonic() + request.budget_seconds
    outer = backend.remaining_seconds

    def remaining() -> float:
        left = deadline - time.monotonic()
        return left if outer is None else min(left, outer())

    def progress(report: RedriveReport) -> None:
        backend.tell(report.examined + report.errors)

    report = run_redrive(
        RedriveRequest(
            policy=policy.name,
            tenant_id=request.tenant_id,
            scope=request.scope,
            outcome=list(request.outcomes) if request.outcomes else None,
            max_messages=request.max_messages,
            rate_per_second=request.rate_per_second,
            dry_run=request.dry_run,
            include_terminal=request.include_terminal,
        ),
        backend.ledger,
        dlq,
        gate,
        policy=policy.name,
        clock=backend.clock,
        remaining_seconds=remaining,
        default_rate_per_second=policy.quota.rate_per_second,
        progress=progress,
        actor=actor,
    )
    return report.as_dict()


def dlq_depth(backend: Backend, policy_name: str | None) -> int:
    """Messages in the policy's DLQ (the direct path's progress bar length)."""
    from sweeper.dead_letters import queue_depth

    where = backend.endpoints.policy(backend.policy(policy_name).name)
    if where.dlq_url is None:
        return 0
    return queue_depth(backend.endpoints.sqs(), where.dlq_url)[0]


def _switch(backend: Backend, policy: Policy) -> Any:
    """The consumer's event source mappings on AWS; None locally (the stack polls the flag)."""
    from sweeper.pause_switch import EventSourceSwitch

    if backend.endpoints.mode == "local":
        return None
    name = backend.consumer_function or backend.endpoints.policy(policy.name).consumer_function
    if not name:
        raise OperatorError("no consumer function in the stack outputs: pass --consumer-function")
    return EventSourceSwitch(backend.endpoints.lambda_client(), name)


def pause(backend: Backend, request: PauseRequest, *, actor: str) -> dict[str, Any]:
    """Pause a policy: the producer skips, consumers stop, queued messages stay."""
    from sweeper.operations import pause_policy

    return _pause_switch(pause_policy, backend, request, actor)


def resume(backend: Backend, request: ResumeRequest, *, actor: str) -> dict[str, Any]:
    """Resume a paused policy: consumers first, then the producer."""
    from sweeper.operations import resume_policy

    return _pause_switch(resume_policy, backend, request, actor)


def _pause_switch(
    turn: Callable[..., Any], backend: Backend, request: PauseRequest | ResumeRequest, actor: str
) -> dict[str, Any]:
    policy = backend.policy(request.policy)
    result = turn(
        policy.name,
        backend.ledger,
        _switch(backend, policy),
        actor=actor,
        reason=request.reason,
        now=backend.clock(),
    )
    return dict(result.as_dict())


def release(backend: Backend, request: ReleaseRequest, *, actor: str) -> dict[str, Any]:
    """Run the policy's producer now: in this process locally, else the deployed producer
    function (Lambda Invoke, so the run has its own role, logs and metrics). Refused while
    paused. The run is recorded as the producer's, under a `release-` batch id, and, where
    this process holds the ledger, as an operator action of `actor` (migration 0012)."""
    policy = backend.policy(request.policy)
    report = release_report(backend, policy)
    if backend.has_ledger:
        backend.ledger.record_action(
            policy.name,
            "release",
            actor,
            backend.clock(),
            detail={"batch_id": report.get("batch_id")},
        )
    return report


def release_report(backend: Backend, policy: Policy) -> dict[str, Any]:
    """The producer's report of a release now (also `smoke`'s canary release)."""
    from botocore.config import Config as BotoConfig

    from sweeper.release import invoke_producer, release_now
    from sweeper.sqs_queue import SqsPublisher

    where = backend.endpoints.policy(policy.name)
    if backend.endpoints.local is not None:
        if where.queue_url is None:
            raise OperatorError(f"the local stack has no work queue for {policy.name}")
        publisher = SqsPublisher(backend.endpoints.sqs(), where.queue_url)
        return release_now(policy, backend.ledger, publisher, clock=backend.clock).as_dict()
    if where.producer_function is None:
        raise OperatorError(
            f"stack {backend.endpoints.stack!r} names no producer function for "
            f"{policy.name} (output {policy.name}ProducerFunctionName); check --stack"
        )
    # Without a ledger the function itself skips a paused policy (and says so).
    if backend.has_ledger and backend.ledger.is_paused(policy.name):
        raise OperatorError(f"policy {policy.name} is paused: `sweeper resume` it first")
    # Wait as long as the producer may run; never retried (a retry is a second run).
    client = backend.endpoints.lambda_client(
        BotoConfig(
            read_timeout=int(policy.producer_budget_seconds) + 60,
            retries={"total_max_attempts": 1},
        )
    )
    return invoke_producer(
        client,
        where.producer_function,
        policy.name,
        backend.clock(),
        region=backend.endpoints.region,
    )


def catch_up(backend: Backend, request: CatchUpRequest, *, actor: str) -> dict[str, Any]:
    """Release the scheduled runs missed in a range, in order, each with its own batch id."""
    from sweeper.operations import CatchUpRun
    from sweeper.operations import catch_up as release_missed
    from sweeper.sqs_queue import SqsPublisher

    policy = backend.policy(request.policy)
    where = backend.endpoints.policy(policy.name)
    if where.queue_url is None:
        raise OperatorError(f"the target has no work queue for {policy.name}")
    publisher = SqsPublisher(backend.endpoints.sqs(), where.queue_url)
    done = [0]

    def progress(run: CatchUpRun) -> None:
        done[0] += 1
        backend.tell(done[0])

    report = release_missed(
        policy,
        backend.ledger,
        publisher,
        request.since.astimezone(UTC),
        (request.until or backend.clock()).astimezone(UTC),
        actor=actor,
        clock=backend.clock,
        dry_run=request.dry_run,
        progress=progress,
    )
    return report.as_dict()


def missed_run_count(backend: Backend, request: CatchUpRequest) -> int:
    """How many runs a catch-up would release (the direct path's progress bar length)."""
    from sweeper.operations import missed_runs

    policy = backend.policy(request.policy)
    until = (request.until or backend.clock()).astimezone(UTC)
    return len(missed_runs(policy, backend.ledger, request.since.astimezone(UTC), until))


def prune(backend: Backend, request: PruneRequest, *, actor: str) -> dict[str, Any]:
    """Delete old settled rows in small batches, each its own short transaction, recorded
    first; failed jobs only past their policy's retention (all policies: the longest)."""
    from sweeper.prune import PruneReport, failed_retention
    from sweeper.prune import prune as run_prune

    chosen = [backend.policy(request.policy)] if request.policy else backend.config.policies

    def progress(report: PruneReport) -> None:
        backend.tell(report.batches)

    report = run_prune(
        backend.ledger,
        older_than=timedelta(days=request.older_than_days),
        failed_older_than=failed_retention(chosen),
        now=backend.clock(),
        actor=actor,
        reason=request.reason,
        policy=chosen[0].name if request.policy else None,
        batch_rows=request.batch_rows,
        progress=progress,
    )
    return report.as_dict()


def control(backend: Backend, request: ControlRequest, *, actor: str) -> dict[str, Any]:
    """cancel, hold, unhold or postpone the selected jobs; above the threshold only when
    confirmed (ConfirmationNeededError says how many match)."""
    from sweeper.models import JobSelection, JobStatus
    from sweeper.operations import CONFIRM_ABOVE, control_jobs

    policy = backend.policy(request.policy)
    selection = JobSelection(
        keys=request.keys,
        tenant_id=request.tenant_id,
        statuses=None
        if request.statuses is None
        else tuple(JobStatus(s) for s in request.statuses),
        outcomes=request.outcomes,
        due_from=request.due_from,
        due_before=request.due_before,
    )
    now = backend.clock()

    def run(dry: bool) -> Any:
        return control_jobs(
            request.action,
            policy.name,
            backend.ledger,
            selection,
            actor=actor,
            now=now,
            reason=request.reason,
            until=request.until,
            limit=request.limit,
            dry_run=dry,
            max_postpone=timedelta(days=policy.max_postpone_days),
        )

    if not request.dry_run and not request.confirmed:
        preview = run(True)
        if preview.moved > CONFIRM_ABOVE:
            raise ConfirmationNeededError(
                request.command, policy.name, preview.moved, CONFIRM_ABOVE
            )
    report: dict[str, Any] = run(request.dry_run).as_dict()
    return report


def run_command(backend: Backend, request: OperatorRequest, *, actor: str) -> dict[str, Any]:
    """Run one console command; the data its `--json` prints."""
    match request:
        case StatusRequest():
            return status(backend, request)
        case RunsRequest():
            return runs(backend, request)
        case InspectRequest():
            return inspect(backend, request)
        case OverviewRequest():
            return overview(backend, request)
        case ActivityRequest():
            return activity(backend, request)
        case SearchRequest():
            return search(backend, request)
        case JobRequest():
            return job(backend, request)
        case RetryRequest():
            return retry(backend, request, actor=actor)
        case RedriveCommand():
            return redrive(backend, request, actor=actor)
        case PauseRequest():
            return pause(backend, request, actor=actor)
        case ResumeRequest():
            return resume(backend, request, actor=actor)
        case ReleaseRequest():
            return release(backend, request, actor=actor)
        case CatchUpRequest():
            return catch_up(backend, request, actor=actor)
        case PruneRequest():
            return prune(backend, request, actor=actor)
        case ControlRequest():
            return control(backend, request, actor=actor)
    raise OperatorError(f"unknown command {request.command!r}")  # pragma: no cover

"""The operator's console: status, pause and resume, catch-up, inspect, retry, job control.

Plain logic over the ledger and small adapters, shared by `sweeper` (the CLI) and the local
stack. Every action that changes something is recorded in the ledger with who did it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta
from typing import Any

from sweeper.action_log import ActionLog, require_reason
from sweeper.config import Policy
from sweeper.config.policy import DEFAULT_MAX_POSTPONE_DAYS
from sweeper.errors import OperatorError
from sweeper.failing import (
    CLOSURE_WHY,
    ClosedScopeView,
    RetryingView,
    failures,
    limit_key_pattern,
)
from sweeper.ledger.console import control_sources
from sweeper.ledger.store import InspectRow, Ledger
from sweeper.limiter import ScopeState
from sweeper.models import ControlAction, JobSelection, JobStatus, NewJob, OutcomeClass
from sweeper.pause_switch import EventSourceSwitch
from sweeper.postpone import check_postpone
from sweeper.producer import PAUSED, new_batch_id, on_consumers, run_producer
from sweeper.schedule_expression import occurrences
from sweeper.scheduling import scope_for
from sweeper.sqs_queue import Publisher

Clock = Callable[[], datetime]
GateState = Callable[[str], ScopeState]
#: (messages in the queue, of which in flight) for a queue URL.
QueueDepth = Callable[[str], tuple[int, int]]

#: Gates read by `status`: the busiest scopes holding unsettled work.
STATUS_SCOPES = 20
#: Closed keys of further limits `status` lists per policy (the soonest to reopen last).
STATUS_LIMIT_KEYS = 20
STATUS_RUNS = 5


def _iso(value: datetime | None) -> str | None:
    return None if value is None else value.isoformat()


# -- status -------------------------------------------------------------------------------------


def closed_limits(
    policy: Policy, closed: Sequence[ScopeState], now: datetime
) -> list[LimitClosureView]:
    """The closed keys of the policy's further limits, the longest closed first."""
    found: list[LimitClosureView] = []
    for limit in policy.further_limits:
        pattern = limit_key_pattern(policy, limit)
        for gate in closed:
            if gate.closed_until is None or not pattern.fullmatch(gate.scope):
                continue
            reopens = datetime.fromtimestamp(gate.closed_until, now.tzinfo).isoformat()
            why = CLOSURE_WHY.get(gate.reason or "")
            found.append(LimitClosureView(limit.name, gate.scope, reopens, gate.reason, why))
    return sorted(found, key=lambda view: (view.reopens_at, view.key), reverse=True)


@dataclass(frozen=True, slots=True)
class GateView:
    scope: str
    closed: bool
    reopens_at: str | None
    reason: str | None
    unsettled_jobs: int


@dataclass(frozen=True, slots=True)
class LimitClosureView:
    """A further limit's key closed now (`NAME:KEY`, as the limiter holds it)."""

    limit: str
    key: str
    reopens_at: str
    reason: str | None
    why: str | None


@dataclass(frozen=True, slots=True)
class QueueView:
    messages: int
    in_flight: int


@dataclass
class PolicyStatus:
    policy: str
    paused: bool
    paused_at: str | None
    paused_by: str | None
    pause_reason: str | None
    counts: dict[str, int]
    oldest_eligible_age_seconds: float | None
    leased_in_flight: int
    queue: QueueView | None
    dlq: QueueView | None
    gates: list[GateView]
    runs: list[dict[str, Any]]
    #: Closed keys of the policy's further limits (an app-wide limit holds every scope); None:
    #: the limiter's closures were not read.
    closed_limits: list[LimitClosureView] | None = None
    #: Closed keys beyond the STATUS_LIMIT_KEYS listed.
    closed_limits_unlisted: int = 0
    #: Jobs retrying, by class and code; the policy's scopes closed now (None: not read).
    retrying: list[RetryingView] = field(default_factory=list)
    closed_scopes: list[ClosedScopeView] | None = None
    closed_scopes_unlisted: int = 0

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def policy_status(
    policy: Policy,
    ledger: Ledger,
    *,
    now: datetime,
    depth: QueueDepth | None = None,
    queue_url: str | None = None,
    dlq_url: str | None = None,
    gate: GateState | None = None,
    closed_keys: Sequence[ScopeState] | None = None,
) -> PolicyStatus:
    """Where one policy stands: ledger counts, ages, queues, gates, the last runs.

    `closed_keys` is every limiter key closed now (`sweeper.limiter.closed_gates`): those of the
    policy's further limits are listed as `closed_limits`."""
    state = ledger.policy_state(policy.name)
    scopes = ledger.active_scopes(policy.name, STATUS_SCOPES)
    if not re.search(r"{(tenant_id|object_id)}", policy.scope.key_template):
        # One scope for the whole policy: show its gate even when nothing is waiting.
        scopes.setdefault(scope_for(policy, NewJob("", "", now)), 0)
    gates: list[GateView] = []
    read: list[ScopeState] = []
    if gate is not None:
        for scope, unsettled in scopes.items():
            seen = gate(scope)
            read.append(seen)
            closed = seen.closed(now.timestamp())
            reopens = None
            if closed and seen.closed_until is not None:
                reopens = datetime.fromtimestamp(seen.closed_until, now.tzinfo).isoformat()
            gates.append(
                GateView(scope, closed, reopens, seen.reason if closed else None, unsettled)
            )

    limits = closed_limits(policy, closed_keys or (), now)
    failing = failures(
        policy, ledger, now=now, gates=None if gate is None else read, closed_keys=closed_keys
    )

    def queue(url: str | None) -> QueueView | None:
        if depth is None or url is None:
            return None
        messages, in_flight = depth(url)
        return QueueView(messages, in_flight)

    return PolicyStatus(
        policy=policy.name,
        paused=state.paused,
        paused_at=_iso(state.paused_at) if state.paused else None,
        paused_by=state.paused_by if state.paused else None,
        pause_reason=state.reason if state.paused else None,
        counts={status.value: n for status, n in ledger.counts(policy.name).items()},
        oldest_eligible_age_seconds=ledger.oldest_eligible_age(policy.name, now),
        leased_in_flight=on_consumers(ledger, policy, now),
        queue=queue(queue_url),
        dlq=queue(dlq_url),
        gates=gates,
        closed_limits=None if closed_keys is None else limits[:STATUS_LIMIT_KEYS],
        closed_limits_unlisted=max(0, len(limits) - STATUS_LIMIT_KEYS),
        retrying=failing.retrying,
        closed_scopes=failing.closed_scopes,
        closed_scopes_unlisted=failing.closed_scopes_unlisted,
        runs=[
            {
                "scheduled_at": _iso(run.scheduled_at),
                "batch_id": run.batch_id,
                "invocations": run.invocations,
                "discovered": run.discovered,
                "published": run.published,
                "publish_failures": run.publish_failures,
                "reclaimed": run.reclaimed,
                "stop_reason": run.stop_reason,
            }
            for run in ledger.runs(policy.name, STATUS_RUNS)
        ],
    )


# -- pause and resume ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PauseResult:
    policy: str
    paused: bool
    changed: bool  # False when it already was in that state
    event_source_mappings: list[str]

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def pause_policy(
    policy: str,
    ledger: Ledger,
    switch: EventSourceSwitch | None,
    *,
    actor: str,
    reason: str | None,
    now: datetime,
) -> PauseResult:
    """Pause: the producer skips (and records the skipped runs), consumers stop, messages stay.

    The ledger flag is set first, so no new work is released while the consumers are stopped;
    on AWS `switch` disables the consumer's event source mapping, locally the stack polls the flag.
    """
    changed = ledger.pause(policy, actor, reason, now)
    mappings = switch.set_enabled(False) if switch is not None else []
    return PauseResult(policy, True, changed, mappings)


def resume_policy(
    policy: str,
    ledger: Ledger,
    switch: EventSourceSwitch | None,
    *,
    actor: str,
    reason: str | None,
    now: datetime,
) -> PauseResult:
    """Resume: consumers first (queued work drains), then the producer's flag."""
    mappings = switch.set_enabled(True) if switch is not None else []
    changed = ledger.resume(policy, actor, reason, now)
    return PauseResult(policy, False, changed, mappings)


# -- catch-up -----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CatchUpRun:
    scheduled_at: str
    batch_id: str
    was: str  # "missing": never ran; "paused": skipped while paused
    released: bool  # False: another invocation holds that time
    discovered: int
    published: int
    stop_reason: str


@dataclass
class CatchUpReport:
    policy: str
    since: str
    until: str
    dry_run: bool
    missed: int
    runs: list[CatchUpRun] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def missed_runs(
    policy: Policy, ledger: Ledger, since: datetime, until: datetime
) -> list[tuple[datetime, str]]:
    """The scheduled times in [since, until] that never ran or were skipped while paused."""
    anchor = ledger.last_run_at_or_before(policy.name, since)
    times = occurrences(policy.schedule, policy.timezone, since, until, anchor=anchor)
    recorded = ledger.runs_between(policy.name, since, until)
    missed = []
    for at in times:
        if at not in recorded:
            missed.append((at, "missing"))
        elif recorded[at] == PAUSED:
            missed.append((at, "paused"))
    return missed


def catch_up(
    policy: Policy,
    ledger: Ledger,
    publisher: Publisher,
    since: datetime,
    until: datetime,
    *,
    actor: str,
    clock: Clock,
    dry_run: bool = False,
    progress: Callable[[CatchUpRun], None] | None = None,
) -> CatchUpReport:
    """Release the missed scheduled runs in order, each with its own batch id.

    Each is the producer's own run (`run_producer`) at its scheduled time, so the run table's
    uniqueness still stops a time from being released twice. Recorded before the first
    release (who, the range, how many missed), then one step per run released.
    """
    if ledger.is_paused(policy.name):
        raise OperatorError(f"policy {policy.name} is paused: resume it before catching up")
    missed = missed_runs(policy, ledger, since, until)
    report = CatchUpReport(policy.name, since.isoformat(), until.isoformat(), dry_run, len(missed))
    log = None
    if not dry_run and missed:
        log = ActionLog.begin(
            ledger,
            policy=policy.name,
            action="catch_up",
            actor=actor,
            reason=None,
            detail={"since": report.since, "until": report.until, "missed": len(missed)},
            clock=clock,
        )
    for at, was in missed:
        batch_id = new_batch_id()
        if dry_run:
            run = CatchUpRun(at.isoformat(), batch_id, was, False, 0, 0, "dry_run")
        else:
            if was == "paused":
                ledger.reopen_skipped_run(policy.name, at, batch_id, clock())
            produced = run_producer(
                policy,
                at,
                ledger,
                publisher,
                clock=clock,
                remaining_seconds=_budget(clock, policy.producer_budget_seconds),
                batch_id=batch_id,
            )
            run = CatchUpRun(
                at.isoformat(),
                produced.batch_id,
                was,
                not produced.duplicate_invocation,
                produced.discovered,
                produced.published,
                produced.stop_reason,
            )
        report.runs.append(run)
        if log is not None:
            log.step(
                {
                    "scheduled_at": run.scheduled_at,
                    "batch_id": run.batch_id,
                    "was": run.was,
                    "released": run.released,
                    "published": run.published,
                }
            )
        if progress is not None:
            progress(run)
    if log is not None:
        log.done({"runs": len(report.runs)})
    return report


def _budget(clock: Clock, seconds: float) -> Callable[[], float]:
    end = clock() + timedelta(seconds=seconds)
    return lambda: (end - clock()).total_seconds()


# -- inspect, retry (prune: sweeper.prune) --------------------------------------------------------


def inspect_jobs(
    policy: str, ledger: Ledger, *, now: datetime, stuck_after: timedelta, limit: int
) -> list[dict[str, Any]]:
    """Terminal jobs, expired leases, pending rows overdue by `stuck_after` and held jobs (their
    `updated_at` is when the hold began): ids, classes, codes, attempts and times, never
    customer data."""

    def row(job: InspectRow) -> dict[str, Any]:
        kind = {JobStatus.FAILED: "terminal", JobStatus.HELD: "held"}.get(job.status, "stuck")
        return {
            "kind": kind,
            "operation_key": job.operation_key,
            "status": job.status.value,
            "outcome": None if job.last_outcome is None else job.last_outcome.value,
            "error_code": job.last_error_code,
            "attempts": job.attempt_count,
            "due_at": _iso(job.due_at),
            "next_attempt_at": _iso(job.next_attempt_at),
            "lease_expires_at": _iso(job.lease_expires_at),
            "updated_at": _iso(job.updated_at),
            "completed_at": _iso(job.completed_at),
            "trace_id": job.last_trace_id,  # the X-Ray trace of its last delivery
        }

    return [row(job) for job in ledger.inspect(policy, now, now - stuck_after, limit)]


def retry_jobs(
    policy: str,
    ledger: Ledger,
    *,
    actor: str,
    now: datetime,
    keys: Sequence[str] | None = None,
    outcomes: Sequence[OutcomeClass] | None = None,
    tenant_id: str | None = None,
    limit: int = 1000,
    reason: str | None = None,
) -> list[str]:
    """Terminal jobs back to pending with a fresh attempt budget; recorded in the ledger."""
    if keys is None and outcomes is None and tenant_id is None:
        raise OperatorError("choose the jobs to retry: operation keys, an outcome or a tenant")
    return ledger.retry_failed(
        policy,
        actor,
        now,
        keys=keys,
        outcomes=outcomes,
        tenant_id=tenant_id,
        limit=limit,
        reason=reason,
    )


# -- job control: cancel, hold, unhold, postpone --------------------------------------------------

#: Above this many jobs a job control asks for a confirmation (`--yes` on the CLI).
CONFIRM_ABOVE = 100
#: Jobs moved by one job control unless told otherwise (`--max`).
CONTROL_DEFAULT_MAX = 1000


@dataclass
class ControlReport:
    policy: str
    action: str
    dry_run: bool
    #: Jobs moved (in a dry run: that would be moved), by the state they left.
    moved: int
    from_states: dict[str, int]
    keys: list[str]
    until: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def control_jobs(
    action: ControlAction,
    policy: str,
    ledger: Ledger,
    selection: JobSelection,
    *,
    actor: str,
    now: datetime,
    reason: str | None = None,
    until: datetime | None = None,
    limit: int = CONTROL_DEFAULT_MAX,
    dry_run: bool = False,
    max_postpone: timedelta = timedelta(days=DEFAULT_MAX_POSTPONE_DAYS),
) -> ControlReport:
    """Cancel, hold, unhold or postpone the selected jobs (at most `limit`), recorded in the
    ledger with who did it and why; a dry run only says which jobs it would move. A
    postponement goes at most `max_postpone` ahead (the policy's `max_postpone_days`)."""
    if selection.empty:
        raise OperatorError(
            f"choose the jobs to {action.value}: operation keys, a tenant, a status, an outcome "
            "or a due range"
        )
    if action in (ControlAction.CANCEL, ControlAction.HOLD, ControlAction.POSTPONE):
        reason = require_reason(action.value, reason)
    if (action is ControlAction.POSTPONE) != (until is not None):
        raise OperatorError("postpone needs a time to postpone to (--until), and only postpone")
    if until is not None:
        check_postpone(until, now=now, bound=max_postpone)
    sources = control_sources(action)
    if selection.statuses is not None and not set(selection.statuses) <= set(sources):
        allowed = ", ".join(s.value for s in sources)
        raise OperatorError(f"{action.value} moves jobs from {allowed} only (--status)")
    if dry_run:
        moved = ledger.preview_control(action, policy, selection, limit=limit, until=until)
    else:
        moved = ledger.control(
            action,
            policy,
            selection,
            actor=actor,
            now=now,
            limit=limit,
            reason=reason,
            until=until,
            detail={
                "keys": None if selection.keys is None else len(selection.keys),
                "tenant_filter": selection.tenant_id is not None,
                "statuses": None
                if selection.statuses is None
                else [s.value for s in selection.statuses],
                "outcomes": None
                if selection.outcomes is None
                else [o.value for o in selection.outcomes],
                "due_from": _iso(selection.due_from),
                "due_before": _iso(selection.due_before),
                "until": _iso(until),
                "limit": limit,
            },
        )
    from_states: dict[str, int] = {}
    for _key, status in moved:
        from_states[status.value] = from_states.get(status.value, 0) + 1
    return ControlReport(
        policy, action.value, dry_run, len(moved), from_states, [k for k, _ in moved], _iso(until)
    )


# -- the console page: activity, search, one job's history ------------------------------------

#: The console page's chart: this many hours, in buckets of this many minutes.
ACTIVITY_HOURS = 6
ACTIVITY_BUCKET_MINUTES = 15
#: Search hits and history events shown at most.
SEARCH_LIMIT = 100
HISTORY_EVENTS = 200


def activity(
    policy: str,
    ledger: Ledger,
    *,
    now: datetime,
    hours: int = ACTIVITY_HOURS,
    bucket_minutes: int = ACTIVITY_BUCKET_MINUTES,
) -> list[dict[str, Any]]:
    """Claims (jobs the runs published) and completions (jobs settled) per time bucket over the
    last `hours`, oldest first; buckets start on multiples of `bucket_minutes` past the hour,
    the last one holding `now`."""
    bucket = timedelta(minutes=bucket_minutes)
    start = now.replace(minute=now.minute - now.minute % bucket_minutes, second=0, microsecond=0)
    end = start + bucket
    since = end - timedelta(hours=hours)
    return [
        {
            "at": _iso(b.at),
            "claimed": b.claimed,
            "succeeded": b.succeeded,
            "failed": b.failed,
        }
        for b in ledger.activity(policy, since, end, bucket)
    ]


def search_jobs(
    policy: str, ledger: Ledger, query: str, *, limit: int = SEARCH_LIMIT
) -> list[dict[str, Any]]:
    """The job with this operation key, or this tenant's jobs (ids, states, times)."""
    query = query.strip()
    if not query:
        return []
    return [
        {
            "operation_key": job.operation_key,
            "tenant_id": job.tenant_id,
            "status": job.status.value,
            "outcome": None if job.last_outcome is None else job.last_outcome.value,
            "error_code": job.last_error_code,
            "attempts": job.attempt_count,
            "due_at": _iso(job.due_at),
            "updated_at": _iso(job.updated_at),
        }
        for job in ledger.search(policy, query, limit)
    ]


def job_history(key: str, ledger: Ledger) -> dict[str, Any] | None:
    """One job as the ledger keeps it: its row (attempts, last outcome and error code, lease,
    hold, cancel, postponement, trace, the batch that carried it) and its operator events with
    who acted and why; None when no job has this key."""
    job = ledger.get(key)
    if job is None:
        return None
    return {
        "operation_key": job.operation_key,
        "policy": job.policy,
        "tenant_id": job.tenant_id,
        "object_id": job.object_id,
        "scope": job.scope,
        "status": job.status.value,
        "due_at": _iso(job.due_at),
        "next_attempt_at": _iso(job.next_attempt_at),
        "attempts": job.attempt_count,
        "retry_round": job.retry_round,
        "outcome": None if job.last_outcome is None else job.last_outcome.value,
        "error_code": job.last_error_code,
        "lease_expires_at": _iso(job.lease_expires_at),
        "created_at": _iso(job.created_at),
        "updated_at": _iso(job.updated_at),
        "completed_at": _iso(job.completed_at),
        "held_at": _iso(job.held_at),
        "hold_reason": job.hold_reason,
        "cancelled_at": _iso(job.cancelled_at),
        "cancel_reason": job.cancel_reason,
        "postponed_until": _iso(job.postponed_until),
        "trace_id": job.last_trace_id,
        "batch_id": job.batch_id,
        "events": [
            {
                "at": _iso(e.at),
                "event": e.event,
                "from_status": e.from_status,
                "to_status": e.to_status,
                "previous_attempts": e.previous_attempts,
                "previous_outcome": e.previous_outcome,
                "previous_error_code": e.previous_error_code,
                "previous_due_at": _iso(e.previous_due_at),
                "actor": e.actor,
                "reason": e.reason,
            }
            for e in ledger.job_events(job.id, HISTORY_EVENTS)
        ],
    }

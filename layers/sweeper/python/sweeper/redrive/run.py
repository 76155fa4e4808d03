"""Redrive: bring dead letters back to the work queue when the ledger and the gate say so.

Each dead letter is decided by its job's row in the ledger (one query per received batch):

| ledger / gate                                   | the dead letter                              |
|-------------------------------------------------|----------------------------------------------|
| outside the request's filters                   | stays (`not_matching`)                       |
| succeeded                                       | deleted, counted as a duplicate              |
| failed (terminal)                               | stays, unless terminal jobs are included:    |
|                                                 | then retried in the ledger and moved         |
| a limit of its job closed, or paused live       | stays (`kept_closed`) until every limit is   |
|                                                 | open and unpaused (sweeper.redrive.limits)   |
| pending or leased, its time not come (due,      | stays (`kept_not_due`) until the ledger      |
| next attempt or postponement ahead)             | allows a call (LedgerTarget.callable_at)     |
| pending or leased, gate open                    | moved: SendMessage (same body), then delete  |
| body unreadable, or names no job                | stays, counted as an error (the run fails)   |
| body disagrees with its key's ledger row        | stays, counted as an error (the run fails)   |

The scheduled run (every 15 minutes) decides as above: a letter whose job died of a limit is
kept while any of its limits is closed or paused live, and moved back, paced, by the first run
after every one has reopened (never before); on demand the rule is the same. With `[policies.
redrive] automatic = "throttled"` the schedule runs every minute and a scheduled run is a
`Watch` (sweeper.redrive.auto): it moves only the letters whose job died of a limit, waiting in
place for a reopening within the run, and leaves the rest for an operator.

Moves are paced at `rate_per_second` and stop before the time budget runs out. Messages that
stay are hidden while the run works (so none is examined twice) and released at the end.
A dry run decides the same way and changes nothing but the receive counts of the DLQ.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from sweeper.errors import RedriveIncompleteError
from sweeper.events import ScheduleEvent
from sweeper.ledger.store import Ledger
from sweeper.limiter import ScopeState
from sweeper.models import JobMessage, JobStatus, LedgerTarget, OutcomeClass
from sweeper.observability import Metric
from sweeper.redrive.auto import Watch, died_of_limit
from sweeper.redrive.letters import DeadLetter, DeadLetterQueue
from sweeper.redrive.limits import LimitLook
from sweeper.redrive.log import RedriveLog
from sweeper.sqs_queue import SQS_MAX_BATCH

logger = logging.getLogger(__name__)

#: Stop when less time than this is left: a move and the final release must still fit.
MIN_REMAINING_SECONDS = 5.0
#: Received messages stay hidden this much longer than the run may last, then reappear by
#: themselves if the run died before releasing them.
VISIBILITY_MARGIN_SECONDS = 30
#: The pace when neither the request nor the policy gives one.
DEFAULT_RATE_PER_SECOND = 10.0
Clock = Callable[[], datetime]
GateState = Callable[[str], ScopeState]


class RedriveRequest(BaseModel):
    """An on-demand redrive (the Lambda's event, or `sweeper redrive`); every field optional."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    policy: str | None = Field(default=None, description="defaults to the function's own")
    tenant_id: str | None = Field(default=None, min_length=1)
    scope: str | None = Field(default=None, min_length=1)
    outcome: list[OutcomeClass] | None = Field(
        default=None, min_length=1, description="only jobs whose last outcome is one of these"
    )
    max_messages: int | None = Field(default=None, ge=1, description="at most this many moved")
    rate_per_second: float | None = Field(default=None, gt=0, le=1000)
    dry_run: bool = False
    include_terminal: bool = Field(
        default=False, description="retry terminal jobs in the ledger and move their messages"
    )


def request_from_event(event: dict[str, Any], own_policy: str) -> RedriveRequest:
    """The scheduler's event (a scheduled run) or an on-demand request, for this policy."""
    if event.get("source") == "aws.scheduler" or "detail-type" in event:
        schedule = ScheduleEvent.model_validate(event)
        return RedriveRequest(policy=schedule.detail.policy)
    request = RedriveRequest.model_validate(event)
    return request if request.policy else request.model_copy(update={"policy": own_policy})


@dataclass
class RedriveReport:
    """What one run did; logged, returned, and turned into metrics."""

    policy: str
    dry_run: bool
    examined: int = 0
    moved: int = 0  # in a dry run: would be moved
    retried_terminal: int = 0  # of the moved: terminal jobs given a fresh budget
    dropped_settled: int = 0
    #: Cancelled jobs' letters: dropped, never sent back to work.
    dropped_cancelled: int = 0
    kept_terminal: int = 0
    #: Held jobs' letters: left in the DLQ (after an unhold the producer publishes the job anew).
    kept_held: int = 0
    #: Letters of pending or leased jobs whose time has not come: left in the DLQ.
    kept_not_due: int = 0
    #: Letters of jobs under a limit closed or paused live: left in the DLQ until it reopens.
    kept_closed: int = 0
    #: A watching run's letters whose job died otherwise than of a limit: left for an operator.
    kept_for_operator: int = 0
    #: A watching run's seconds spent waiting in place for reopenings.
    waited_seconds: float = 0.0
    not_matching: int = 0
    errors: int = 0
    left: int = 0  # messages in the DLQ after the run
    stop_reason: str = "drained"
    elapsed_seconds: float = 0.0
    closed_scopes: list[str] = field(default_factory=list)
    #: The policy's limits an operator paused live (`sweeper limits set --pause`).
    paused_limits: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    def metrics(self) -> list[tuple[str, int]]:
        return [
            (Metric.REDRIVE_MOVED, self.moved),
            (Metric.REDRIVE_DROPPED_SETTLED, self.dropped_settled),
            (Metric.REDRIVE_KEPT_TERMINAL, self.kept_terminal),
            (Metric.REDRIVE_KEPT_CLOSED, self.kept_closed),
            (Metric.REDRIVE_KEPT_FOR_OPERATOR, self.kept_for_operator),
            (Metric.REDRIVE_ERRORS, self.errors),
        ]

    def raise_for_errors(self) -> None:
        """Fail the run (so the error alarm fires) when some dead letter could not be handled."""
        if self.errors:
            raise RedriveIncompleteError(self.errors, self)


@dataclass
class _Run:
    request: RedriveRequest
    policy: str
    ledger: Ledger
    dlq: DeadLetterQueue
    gate: GateState
    clock: Clock
    remaining_seconds: Callable[[], float]
    sleep: Callable[[float], None]
    monotonic: Callable[[], float]
    interval: float
    report: RedriveReport
    #: Who the ledger records for this run (`run_redrive`'s `actor`).
    actor: str
    #: Received and neither moved nor deleted: released (visible again) when the run ends.
    held: dict[str, DeadLetter] = field(default_factory=dict)
    #: The gates read, by key (a watching run reads them afresh per page and per reopening).
    gates: dict[str, ScopeState] = field(default_factory=dict)
    #: Every key found closed during the run (the report's `closed_scopes`).
    closed: set[str] = field(default_factory=set)
    next_move_at: float = 0.0
    #: The job's limits beside its scope's, and their live pauses (None: the scope's gate only).
    limits: LimitLook | None = None
    paused: list[str] | None = None  # read once per run, at its first letter that could move
    #: A scheduled run of the throttled letters' redrive (None: every other run).
    watch: Watch | None = None
    #: A watching run's letters waiting in place for their time (epoch seconds).
    awaiting: list[_Awaiting] = field(default_factory=list)
    #: A watching run met a throttled letter: it keeps watch until its window ends.
    incident: bool = False


@dataclass(frozen=True)
class _Awaiting:
    letter: DeadLetter
    message: JobMessage
    at: float


def run_redrive(
    request: RedriveRequest,
    ledger: Ledger,
    dlq: DeadLetterQueue,
    gate: GateState,
    *,
    policy: str,
    clock: Clock,
    remaining_seconds: Callable[[], float],
    default_rate_per_second: float = DEFAULT_RATE_PER_SECOND,
    sleep: Callable[[float], None] = time.sleep,
    monotonic: Callable[[], float] = time.monotonic,
    progress: Callable[[RedriveReport], None] | None = None,
    actor: str,
    limits: LimitLook | None = None,
    watch: Watch | None = None,
) -> RedriveReport:
    """Work off the DLQ once; see the module docstring. Queue or ledger failures raise.

    `actor` is who the ledger records, per page that changed something (`sweeper.redrive.log`),
    and for each terminal job retried: the operator who asked (`sweeper redrive`, the operator
    API's caller) or the function itself (`redrive_log.function_actor`). `limits`: the job's
    further limits' gates and the live pauses are read too (else only the scope's gate).
    `watch`: a scheduled run of the throttled letters' redrive (sweeper.redrive.auto).
    """
    started = monotonic()
    name = request.policy or policy
    alerted = False
    if watch is not None and dlq.depth() == 0:
        # Nothing to move; a record deferred to a gate's reopening may still die at it.
        alerted = watch.gate_closed_lately(clock().timestamp())
        if not alerted:
            return RedriveReport(policy=name, dry_run=request.dry_run, stop_reason="empty")
    run = _Run(
        request=request,
        policy=name,
        ledger=ledger,
        dlq=dlq,
        gate=gate,
        clock=clock,
        remaining_seconds=remaining_seconds,
        sleep=sleep,
        monotonic=monotonic,
        interval=1.0 / (request.rate_per_second or default_rate_per_second),
        report=RedriveReport(policy=name, dry_run=request.dry_run),
        next_move_at=started,
        actor=actor,
        limits=limits,
        watch=watch,
        incident=alerted,
    )
    log = RedriveLog(
        ledger,
        policy=name,
        actor=actor,
        request=request.model_dump(mode="json", exclude_none=True),
        clock=clock,
    )

    def page_done(report: RedriveReport) -> None:
        log.page(report)
        if progress is not None:
            progress(report)

    try:
        run.report.stop_reason = _work(run, page_done)
        run.report.kept_closed += len(run.awaiting)  # their time did not come within the run
    finally:
        if run.held:
            dlq.release(list(run.held.values()))
        log.page(run.report)  # what a page cut short by an error did
    run.report.left = dlq.depth()
    run.report.closed_scopes = sorted(run.closed)
    run.report.paused_limits = run.paused or []
    run.report.elapsed_seconds = round(monotonic() - started, 3)
    log.finish(run.report)
    return run.report


def _work(run: _Run, page_done: Callable[[RedriveReport], None]) -> str:
    cap = run.request.max_messages
    while True:
        if cap is not None and run.report.moved >= cap:
            return "max_messages"
        left = run.remaining_seconds()
        if left < MIN_REMAINING_SECONDS:
            return "budget"
        if run.watch is not None:
            _refresh(run)
        letters = run.dlq.receive(SQS_MAX_BATCH, math.ceil(left) + VISIBILITY_MARGIN_SECONDS)
        if not letters:
            if run.watch is None:
                return "drained"
            ended = _keep_watch(run, run.watch)
            if ended is not None:
                return ended
            continue
        run.held.update((letter.message_id, letter) for letter in letters)
        messages: dict[str, JobMessage] = {}
        for letter in letters:
            try:
                messages[letter.message_id] = JobMessage.model_validate_json(letter.body)
            except ValidationError:
                logger.error("unreadable dead letter kept", extra={"message_id": letter.message_id})
                run.report.errors += 1
        views = run.ledger.jobs_for_redrive(sorted({m.key for m in messages.values()}))
        stop: str | None = None
        for letter in letters:
            message = messages.get(letter.message_id)
            if message is None:
                continue
            if stop is None and cap is not None and run.report.moved >= cap:
                stop = "max_messages"
            if stop is not None:
                continue
            run.report.examined += 1
            stop = _decide(run, letter, message, views.get(message.key))
        page_done(run.report)
        if stop is not None:
            return stop


def _decide(
    run: _Run, letter: DeadLetter, message: JobMessage, view: LedgerTarget | None
) -> str | None:
    """Handle one dead letter; a stop reason when the run must end here."""
    report, request = run.report, run.request
    ids = {"message_id": letter.message_id, "operation_key": message.key}
    if view is None:
        logger.error("dead letter names no ledger job; kept", extra=ids)
        report.errors += 1
        return None
    if disagree := message.disagreements(view):
        # Only what the ledger holds for the key is ever sent back to work; a body naming
        # another target stays here for a person to look at, and fails the run (alarm).
        logger.error(
            "dead letter disagrees with its ledger row; kept", extra={**ids, "fields": disagree}
        )
        report.errors += 1
        return None
    if not _matches(request, run.policy, message, view):
        report.not_matching += 1
        return None
    if view.status in (JobStatus.SUCCEEDED, JobStatus.CANCELLED):
        settled = view.status is JobStatus.SUCCEEDED
        report.dropped_settled += settled
        report.dropped_cancelled += not settled
        if not request.dry_run:
            run.dlq.delete(letter)
            del run.held[letter.message_id]
            what = "settled" if settled else "cancelled"
            logger.info(f"{what} job's dead letter dropped", extra=ids)
        return None
    if view.status is JobStatus.HELD:
        report.kept_held += 1
        return None
    terminal = view.status is JobStatus.FAILED
    if terminal and not request.include_terminal:
        report.kept_terminal += 1
        return None
    if run.watch is not None:
        if not died_of_limit(view):
            report.kept_for_operator += 1
            return None
        at = _time_comes(run, view)
        if at is not None:
            _await(run, letter, message, view, at)
            return None
    if _closed(run, view):
        report.kept_closed += 1
        return None
    if view.early_at(run.clock()):
        # Moved now, it would only be acknowledged uncalled: it waits here for its time.
        report.kept_not_due += 1
        return None
    if run.watch is not None:
        run.incident = True
    if request.dry_run:
        report.moved += 1
        report.retried_terminal += int(terminal)
        return None
    wait = run.next_move_at - run.monotonic()
    if run.remaining_seconds() - max(0.0, wait) < MIN_REMAINING_SECONDS:
        return "budget"
    if wait > 0:
        run.sleep(wait)
    run.next_move_at = max(run.monotonic(), run.next_move_at) + run.interval
    if terminal:
        run.ledger.retry_failed(
            run.policy, run.actor, run.clock(), keys=[message.key], reason="redrive"
        )
        report.retried_terminal += 1
    run.dlq.move(letter, view.tenant_id)
    del run.held[letter.message_id]
    report.moved += 1
    logger.info("dead letter moved", extra={**ids, "terminal": terminal})
    return None


def _matches(request: RedriveRequest, policy: str, message: JobMessage, view: LedgerTarget) -> bool:
    if view.policy != policy or message.policy != policy:
        return False
    if request.tenant_id is not None and view.tenant_id != request.tenant_id:
        return False
    if request.scope is not None and view.scope != request.scope:
        return False
    return request.outcome is None or view.last_outcome in request.outcome


def _closed(run: _Run, view: LedgerTarget) -> bool:
    """Is a limit of the job closed now, or paused live? Each gate read once per run (per page
    and per reopening in a watching run)."""
    if _paused(run):
        return True
    now = run.clock().timestamp()
    closed = [key for key, state in _gates(run, view).items() if state.closed(now)]
    run.closed.update(closed)
    return bool(closed)


def _paused(run: _Run) -> bool:
    if run.limits is None:
        return False
    if run.paused is None:
        run.paused = run.limits.paused()
    return bool(run.paused)


def _gates(run: _Run, view: LedgerTarget) -> dict[str, ScopeState]:
    keys = [view.scope]
    if run.limits is not None:
        keys += run.limits.further_keys(view)
    for key in keys:
        if key not in run.gates:
            run.gates[key] = run.gate(key)
    return {key: run.gates[key] for key in keys}


# -- a watching run (sweeper.redrive.auto) ------------------------------------------------------


def _time_comes(run: _Run, view: LedgerTarget) -> float | None:
    """When a throttled letter may move, if later than now (epoch seconds): the last of its
    limits' reopenings and its job's own time. None: now, or never known (a live pause)."""
    if _paused(run):
        return None
    now = run.clock().timestamp()
    closed = {key: state for key, state in _gates(run, view).items() if state.closed(now)}
    run.closed.update(closed)
    ends = [state.closed_until for state in closed.values() if state.closed_until is not None]
    if view.early_at(run.clock()):
        ends.append(view.not_before.timestamp())
    at = max(ends, default=now)
    return at if at > now else None


def _await(
    run: _Run, letter: DeadLetter, message: JobMessage, view: LedgerTarget, at: float
) -> None:
    """Wait in place for `at` if it falls within the run's window; else keep the letter."""
    assert run.watch is not None
    if run.monotonic() + (at - run.clock().timestamp()) <= run.watch.until:
        run.awaiting.append(_Awaiting(letter, message, at))
        run.incident = True
    elif _closed(run, view):
        run.report.kept_closed += 1
    else:
        run.report.kept_not_due += 1


def _refresh(run: _Run) -> None:
    """Read the gates and pauses afresh: a reopening may have come, or a new closure."""
    run.gates.clear()
    run.paused = None


def _keep_watch(run: _Run, watch: Watch) -> str | None:
    """The DLQ looked empty: wait for the first reopening awaited and decide its letters again,
    or look again after a poll while the window lasts; a stop reason when the run ends."""
    if run.awaiting:
        at = min(waiting.at for waiting in run.awaiting)
        wait = max(0.0, at - run.clock().timestamp())
        if run.remaining_seconds() - wait < MIN_REMAINING_SECONDS:
            return "budget"
        run.sleep(wait)
        run.report.waited_seconds = round(run.report.waited_seconds + wait, 3)
        due = [waiting for waiting in run.awaiting if waiting.at <= at]
        run.awaiting = [waiting for waiting in run.awaiting if waiting.at > at]
        _refresh(run)
        views = run.ledger.jobs_for_redrive(sorted({w.message.key for w in due}))
        for waiting in due:
            stop = _decide(run, waiting.letter, waiting.message, views.get(waiting.message.key))
            if stop is not None:
                return stop
        return None
    if run.incident and run.monotonic() + watch.poll_seconds < watch.until:
        run.sleep(watch.poll_seconds)
        return None
    return "drained"

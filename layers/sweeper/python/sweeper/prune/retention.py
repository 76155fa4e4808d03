"""Scheduled retention: delete one policy's old ledger metadata in small batches, in a budget.

What goes, oldest first: succeeded jobs (with their job events) completed before the policy's
`settled_job_days`, failed ones (obligations not fulfilled) only before its
`failed_retention_days`, run records scheduled before its `run_days`, and operator actions
taken before its `operator_action_days` that no remaining job event names. Each batch is its
own short transaction (SKIP LOCKED, so live work is never waited on); a batch is started only
while the budget leaves room for it, so a run stops on time and the next scheduled run goes
on. Unsettled jobs are never deleted. The run is recorded before its first batch, as an
operator action of the function (`retention`) with a fixed reason, and each batch records its
step in the statement that deletes it (migration 0015), so a run cut short still says what it
deleted.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from datetime import datetime, timedelta
from typing import Any

from sweeper.action_log import ActionLog
from sweeper.config import RetentionConfig
from sweeper.ledger.retention import PruneStep
from sweeper.ledger.store import Ledger
from sweeper.observability import Metric

#: A batch is started only with at least this much budget left...
MIN_REMAINING_SECONDS = 1.0
#: ... and at least this many times the longest batch so far.
BATCH_TIME_MARGIN = 2.0
#: Who the operator action names as having pruned: this function, on its schedule ...
RETENTION_ACTOR = "retention"
#: ... and why, always the same.
RETENTION_REASON = "scheduled retention (the policy's retention settings)"
DONE = "done"
BUDGET = "budget"


@dataclass
class RetentionReport:
    """What one run deleted, and whether it finished (ids and counts only)."""

    policy: str
    jobs_cutoff: str
    runs_cutoff: str
    operator_actions_cutoff: str
    jobs_deleted: int = 0
    job_events_deleted: int = 0
    runs_deleted: int = 0
    operator_actions_deleted: int = 0
    batches: int = 0
    #: DONE when every kind ran out of old rows; BUDGET when the budget stopped it first.
    stop_reason: str = DONE
    seconds: float = 0.0

    @property
    def complete(self) -> bool:
        return self.stop_reason == DONE

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "complete": self.complete}

    def metrics(self) -> list[tuple[str, float]]:
        """(metric name, count) for this run."""
        return [
            (Metric.PRUNED_JOBS, self.jobs_deleted),
            (Metric.PRUNED_JOB_EVENTS, self.job_events_deleted),
            (Metric.PRUNED_RUNS, self.runs_deleted),
            (Metric.PRUNED_OPERATOR_ACTIONS, self.operator_actions_deleted),
            (Metric.PRUNE_INCOMPLETE, 0 if self.complete else 1),
        ]


def run_retention(
    policy: str,
    retention: RetentionConfig,
    ledger: Ledger,
    *,
    now: datetime,
    remaining_seconds: Callable[[], float],
    monotonic: Callable[[], float] = time.monotonic,
) -> RetentionReport:
    """Prune `policy`'s old rows per `retention`, within `remaining_seconds()`; recorded as an
    operator action by the schedule."""
    started = monotonic()
    jobs_cutoff = now - timedelta(days=retention.settled_job_days)
    failed_cutoff = now - timedelta(days=retention.failed_retention_days)
    runs_cutoff = now - timedelta(days=retention.run_days)
    actions_cutoff = now - timedelta(days=retention.operator_action_days)
    report = RetentionReport(
        policy, jobs_cutoff.isoformat(), runs_cutoff.isoformat(), actions_cutoff.isoformat()
    )
    rows = retention.batch_rows
    log = ActionLog.begin(
        ledger,
        policy=policy,
        action="prune",
        actor=RETENTION_ACTOR,
        reason=RETENTION_REASON,
        detail={
            "cutoffs": {
                "jobs": report.jobs_cutoff,
                "failed_jobs": failed_cutoff.isoformat(),
                "runs": report.runs_cutoff,
                "operator_actions": report.operator_actions_cutoff,
            },
            "batch_rows": rows,
        },
        clock=lambda: now,
    )
    step = PruneStep(log.action_id, now)

    def jobs() -> int:
        deleted, events = ledger.prune_settled_batch(
            jobs_cutoff, rows, policy, failed_before=failed_cutoff, step=step
        )
        report.jobs_deleted += deleted
        report.job_events_deleted += events
        return deleted

    def runs() -> int:
        deleted = ledger.prune_runs_batch(runs_cutoff, rows, policy, step)
        report.runs_deleted += deleted
        return deleted

    def actions() -> int:
        deleted = ledger.prune_actions_batch(actions_cutoff, rows, policy, step)
        report.operator_actions_deleted += deleted
        return deleted

    budget = _BatchBudget(remaining_seconds, monotonic)

    def batch_done() -> None:
        report.batches += 1
        budget.batch_done()

    # Jobs first: their events go with them, which frees the actions that named them.
    if not delete_in_batches((jobs, runs, actions), rows, room=budget.room, after=batch_done):
        report.stop_reason = BUDGET
    report.seconds = round(monotonic() - started, 3)
    log.done(
        {
            "jobs": report.jobs_deleted,
            "job_events": report.job_events_deleted,
            "runs": report.runs_deleted,
            "operator_actions": report.operator_actions_deleted,
            "complete": report.complete,
        }
    )
    return report


def delete_in_batches(
    deletes: Sequence[Callable[[], int]],
    batch_rows: int,
    *,
    room: Callable[[], bool] = lambda: True,
    after: Callable[[], None] = lambda: None,
) -> bool:
    """Call each of `deletes` (one batch a call, returning the rows it deleted) in turn until
    a batch deletes fewer than `batch_rows`, then the next; `after()` once each batch is done.
    No batch starts when `room()` says no: False then, True when every kind ran out of rows.
    The operator's prune (`sweeper.prune.run`) and the scheduled retention share it."""
    for delete in deletes:
        while True:
            if not room():
                return False
            deleted = delete()
            after()
            if deleted < batch_rows:
                break
    return True


@dataclass
class _BatchBudget:
    """Room for a batch while the budget leaves at least MIN_REMAINING_SECONDS and
    BATCH_TIME_MARGIN times the longest batch so far."""

    remaining_seconds: Callable[[], float]
    monotonic: Callable[[], float]
    longest: float = 0.0
    started: float = 0.0

    def room(self) -> bool:
        if self.remaining_seconds() < max(MIN_REMAINING_SECONDS, BATCH_TIME_MARGIN * self.longest):
            return False
        self.started = self.monotonic()
        return True

    def batch_done(self) -> None:
        self.longest = max(self.longest, self.monotonic() - self.started)

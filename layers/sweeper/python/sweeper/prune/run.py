"""The operator's prune (`sweeper prune`): old settled rows deleted in batches, recorded first.

The prune's operator action (who, why, cutoffs) is written before the first batch, and every
batch records its step in the very statement that deletes it (`sweeper.ledger.retention`), so
an interrupted prune leaves the record of what it deleted up to where it stopped. A failed job
is an obligation not fulfilled: it is kept at least for its policy's failed-job retention
(`retention.failed_job_days`), whatever `older_than` says.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from datetime import datetime, timedelta
from typing import Any

from sweeper.action_log import ActionLog, require_reason
from sweeper.config import Policy
from sweeper.config.policy import DEFAULT_FAILED_JOB_RETENTION_DAYS
from sweeper.errors import OperatorError
from sweeper.ledger.retention import PruneStep
from sweeper.ledger.store import Ledger
from sweeper.prune.retention import delete_in_batches

#: Rows per prune transaction: small enough that no lock is held for long.
PRUNE_BATCH_ROWS = 1000
#: Settled rows younger than this are never pruned by hand.
MIN_OLDER_THAN = timedelta(days=1)


@dataclass
class PruneReport:
    older_than_days: float
    cutoff: str
    #: Failed jobs are deleted only when they failed before this (their policy's retention).
    failed_cutoff: str
    jobs_deleted: int = 0
    runs_deleted: int = 0
    batches: int = 0
    #: The operator action recording this prune (written before the first batch).
    action_id: int | None = None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def failed_retention(policies: Sequence[Policy]) -> timedelta:
    """How long a prune over these policies keeps failed jobs: the longest retention of any
    (the default when none is configured)."""
    days = [p.retention.failed_retention_days for p in policies]
    return timedelta(days=max(days, default=DEFAULT_FAILED_JOB_RETENTION_DAYS))


def prune(
    ledger: Ledger,
    *,
    older_than: timedelta,
    failed_older_than: timedelta,
    now: datetime,
    actor: str,
    reason: str | None,
    policy: str | None = None,
    batch_rows: int = PRUNE_BATCH_ROWS,
    progress: Callable[[PruneReport], None] | None = None,
) -> PruneReport:
    """Delete settled jobs completed, and runs scheduled, before now - older_than (failed jobs
    before now - failed_older_than at the latest); in batches, each its own short transaction
    that records its step of the prune's action."""
    why = require_reason("prune", reason)
    if older_than < MIN_OLDER_THAN:
        raise OperatorError("keep at least one day of settled rows")
    cutoff = now - older_than
    failed_cutoff = now - max(older_than, failed_older_than)
    report = PruneReport(
        older_than.total_seconds() / 86_400, cutoff.isoformat(), failed_cutoff.isoformat()
    )
    log = ActionLog.begin(
        ledger,
        policy=policy,
        action="prune",
        actor=actor,
        reason=why,
        detail={
            "cutoff": report.cutoff,
            "failed_cutoff": report.failed_cutoff,
            "batch_rows": batch_rows,
        },
        clock=lambda: now,
    )
    report.action_id = log.action_id
    step = PruneStep(log.action_id, now)

    def jobs() -> int:
        deleted, _events = ledger.prune_settled_batch(
            cutoff,
            batch_rows,
            policy,
            failed_before=failed_cutoff,
            step=step,
        )
        report.jobs_deleted += deleted
        return deleted

    def runs() -> int:
        deleted = ledger.prune_runs_batch(cutoff, batch_rows, policy, step)
        report.runs_deleted += deleted
        return deleted

    def batch_done() -> None:
        report.batches += 1
        if progress is not None:
            progress(report)

    delete_in_batches((jobs, runs), batch_rows, after=batch_done)
    log.done({"jobs": report.jobs_deleted, "runs": report.runs_deleted})
    return report

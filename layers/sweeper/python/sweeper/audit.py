"""The per-batch audit: what each producer run released and what became of it.

A batch carries the jobs it first published in their retry round (a re-send after a lease
expired stays with the batch that carried the job first). Its counters are kept in the ledger,
each incremented in the statement that makes the change it counts; the jobs still unsettled are
counted at read time. For every batch they reconcile:

    carried (published - resent) = settled (succeeded + terminal) + in flight (unsettled)

The figures are ids, counts and times, never customer data.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any

from sweeper.ledger.store import BatchAudit, Ledger

#: Batches per report unless asked otherwise.
DEFAULT_BATCHES = 500


@dataclass(frozen=True, slots=True)
class BatchReport:
    """One batch's figures, as `sweeper runs` prints them."""

    batch_id: str
    scheduled_at: str
    started_at: str
    finished_at: str | None
    stop_reason: str | None
    discovered: int
    #: Messages the run sent, re-sends included (the run record's and the metric's figure).
    published: int
    #: Messages the run could not send (their jobs went back to pending, carried by no batch).
    publish_failures: int
    resent: int
    #: Jobs this batch carries: published - resent.
    carried: int
    consumed: int
    succeeded: int
    retried: int
    #: Deliveries the vendor snoozed: no attempt spent, the job waits (a snooze that would pass
    #: the policy's max_snooze_seconds ends it terminal instead, counted there).
    snoozed: int
    terminal: int
    duplicates: int
    #: Deliveries acknowledged uncalled because their job's time had not come (due, next
    #: attempt or postponement ahead): the job stays in the ledger as it was.
    not_yet_due: int
    settled: int
    in_flight: int
    #: Taken out of the batch by an operator: cancelled before settling, and held now.
    cancelled: int
    held: int
    oldest_age_at_release_seconds: float | None
    #: Every job the batch carries is settled (and the run itself has finished).
    drained: bool
    #: From the run's start to its last job's settlement; None while any is in flight.
    time_to_drain_seconds: float | None
    #: carried == settled + cancelled + held + in flight.
    reconciles: bool

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def batch_report(row: BatchAudit) -> BatchReport:
    """The figures of one batch from its audit row."""
    carried = row.published - row.resent
    settled = row.succeeded + row.terminal
    drained = row.finished_at is not None and row.in_flight + row.held == 0
    drain: float | None = None
    if drained:
        end = row.last_settled_at if carried and row.last_settled_at else row.finished_at
        assert end is not None  # drained implies finished
        drain = round(max(0.0, (end - row.started_at).total_seconds()), 3)
    age = row.oldest_released_age_seconds
    return BatchReport(
        batch_id=row.batch_id,
        scheduled_at=row.scheduled_at.isoformat(),
        started_at=row.started_at.isoformat(),
        finished_at=None if row.finished_at is None else row.finished_at.isoformat(),
        stop_reason=row.stop_reason,
        discovered=row.discovered,
        published=row.published,
        publish_failures=row.publish_failures,
        resent=row.resent,
        carried=carried,
        consumed=row.consumed,
        succeeded=row.succeeded,
        retried=row.retried,
        snoozed=row.snoozed,
        terminal=row.terminal,
        duplicates=row.duplicates,
        not_yet_due=row.not_yet_due,
        settled=settled,
        in_flight=row.in_flight,
        cancelled=row.cancelled,
        held=row.held,
        oldest_age_at_release_seconds=None if age is None else round(age, 3),
        drained=drained,
        time_to_drain_seconds=drain,
        reconciles=carried == settled + row.cancelled + row.held + row.in_flight,
    )


def batch_audit(
    policy: str, ledger: Ledger, *, since: datetime, limit: int = DEFAULT_BATCHES
) -> list[BatchReport]:
    """The policy's batches scheduled at or after `since`, newest first."""
    return [batch_report(row) for row in ledger.batch_audit(policy, since, limit)]

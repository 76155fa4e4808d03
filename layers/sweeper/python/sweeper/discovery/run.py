"""One discovery run: read the source page by page from the persisted cursor, check each row,
upsert the obligations, advance the cursor with them; stop when the pass is complete or the
run's time budget is spent (the next run resumes where this one committed).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any

from sweeper.config import Policy
from sweeper.discovery.rows import Rejected, Source, check_row
from sweeper.discovery.store import REJECTED_SAMPLE_MAX, CursorState, DiscoveryStore
from sweeper.errors import CursorMovedError, DiscoveryFailedError, DiscoverySourceError
from sweeper.models import NewJob
from sweeper.params import ParamsRules

#: Stop when less than this many of the slowest page's durations are left, or this floor.
PAGE_TIME_MARGIN = 2.0
MIN_REMAINING_SECONDS = 1.0

#: Why a run stopped.
COMPLETE = "complete"  # the pass reached the end of the source
BUDGET = "budget"  # time ran out; the cursor holds the place
DUPLICATE = "duplicate_invocation"  # this scheduled time already has a run
SUPERSEDED = "superseded"  # another run moved the cursor; this one stepped aside
SOURCE_ERROR = "source_error"  # the system of record could not be read

Clock = Callable[[], datetime]


@dataclass(slots=True)
class DiscoveryReport:
    """What one run did: recorded in the ledger, logged, turned into metrics. No row values."""

    run_id: str
    policy: str
    source: str
    scheduled_at: datetime
    pass_number: int = 0
    pages: int = 0
    scanned: int = 0
    inserted: int = 0
    moved_earlier: int = 0
    unchanged: int = 0
    not_due: int = 0
    rejected: int = 0
    rejected_sample: list[dict[str, Any]] = field(default_factory=list)
    pass_complete: bool = False
    #: Seconds since the last complete pass (0 when this run completed one; since the first
    #: page of the pass when none ever completed).
    lag_seconds: float = 0.0
    elapsed_seconds: float = 0.0
    stop_reason: str = BUDGET
    error: str | None = None

    def as_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["scheduled_at"] = self.scheduled_at.isoformat()
        return data


def discovery_run_id(policy: str, source: str, scheduled_at: datetime) -> str:
    """The run's identity: policy, source and scheduled time (a repeat delivery has the same)."""
    return f"discover:{policy}:{source}:{scheduled_at.isoformat()}"


def run_discovery(
    policy: Policy,
    source: Source,
    store: DiscoveryStore,
    *,
    scheduled_at: datetime,
    clock: Clock,
    remaining_seconds: Callable[[], float],
    page_size: int | None = None,
    monotonic: Callable[[], float] = time.monotonic,
) -> DiscoveryReport:
    """Run one pass (or the part of it the budget allows); see the module docstring.

    A source error ends the run after recording it, as DiscoveryFailedError carrying the report.
    """
    started = monotonic()
    limit = page_size or (policy.discovery.page_size if policy.discovery else 1000)
    run_id = discovery_run_id(policy.name, source.kind, scheduled_at)
    state = store.cursor(policy.name, source.kind, clock())
    start = store.start_run(run_id, policy.name, source.kind, scheduled_at, state, clock())
    report = DiscoveryReport(
        start.run_id, policy.name, source.kind, scheduled_at, pass_number=state.pass_number
    )
    if start.duplicate:
        report.stop_reason = DUPLICATE
        return report
    slowest = 0.0
    try:
        while True:
            if remaining_seconds() < max(MIN_REMAINING_SECONDS, PAGE_TIME_MARGIN * slowest):
                report.stop_reason = BUDGET
                break
            page_started = monotonic()
            state = _page(policy, source, store, report, state, limit, clock)
            slowest = max(slowest, monotonic() - page_started)
            if report.pass_complete:
                report.stop_reason = COMPLETE
                break
    except CursorMovedError:
        report.stop_reason = SUPERSEDED
    except DiscoverySourceError as exc:
        report.stop_reason = SOURCE_ERROR
        report.error = exc.reason
    report.elapsed_seconds = round(monotonic() - started, 3)
    if not report.pass_complete:
        since = state.last_complete_at or state.pass_started_at
        report.lag_seconds = 0.0 if since is None else max(0.0, (clock() - since).total_seconds())
    store.finish_run(report.run_id, clock(), report.elapsed_seconds, report.stop_reason)
    if report.error is not None:
        raise DiscoveryFailedError(f"discovery run {report.run_id} failed: {report.error}", report)
    return report


def _page(
    policy: Policy,
    source: Source,
    store: DiscoveryStore,
    report: DiscoveryReport,
    state: CursorState,
    limit: int,
    clock: Clock,
) -> CursorState:
    """Read, check and commit one page; the cursor state after it."""
    now = clock()
    rejected: list[Rejected] = []
    if state.cursor is None and state.pass_scanned == 0:
        rejected.extend(source.pass_rejects(now))  # rows the pass's order cannot reach
    unordered = len(rejected)
    page = source.read_page(state.cursor, limit, now)
    base = state.pass_scanned
    rejected.extend(Rejected(base + offset, reason) for offset, reason in page.rejected_in_page)
    jobs: list[NewJob] = []
    rules = ParamsRules.of(policy)
    for row in page.rows:
        checked = check_row(row, rules)
        if isinstance(checked, str):
            rejected.append(Rejected(base + row.offset, checked))
        else:
            jobs.append(checked)
    rejected.sort(key=lambda r: (r.position is not None, r.position or 0))
    room = REJECTED_SAMPLE_MAX - len(report.rejected_sample)
    commit = store.commit_page(
        policy,
        report.run_id,
        jobs,
        source=source.kind,
        state=state,
        cursor_after=page.next_cursor,
        complete=page.exhausted,
        scanned=page.scanned,
        unordered=unordered,
        not_due=page.not_due,
        rejected=rejected,
        sample_room=room,
        now=now,
    )
    report.pages += 1
    report.scanned += page.scanned + unordered
    report.inserted += commit.inserted
    report.moved_earlier += commit.moved_earlier
    report.unchanged += commit.unchanged
    report.not_due += page.not_due
    report.rejected += len(rejected)
    report.rejected_sample.extend(r.as_dict() for r in rejected[: max(0, room)])
    report.pass_complete = page.exhausted
    return commit.state

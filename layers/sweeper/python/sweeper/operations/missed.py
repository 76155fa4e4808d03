"""The scheduled runs a policy missed (never ran, or skipped while paused), and catching them
up (`sweeper catch-up`): each released in order as the producer's own run."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta
from typing import Any

from sweeper.action_log import ActionLog
from sweeper.config import Policy
from sweeper.errors import OperatorError
from sweeper.ledger.store import Ledger
from sweeper.producer.run import PAUSED, new_batch_id, run_producer
from sweeper.schedule_expression import occurrences
from sweeper.sqs_queue import Publisher

Clock = Callable[[], datetime]


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
                connect_always=True,  # an operator's catch-up records every run it releases
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

"""The idle-ledger drill: a producer with nothing due does not touch the ledger.

With every job final, the ledger's PostgreSQL stops accepting connections (a paused Aurora in
the drill's terms): the producer's runs read the policy's wake item, see nothing claimable
before a later time and a full read of the ledger within the policy's
`producer_idle_check_seconds`, and return without connecting; a run that reached for the
ledger would fail, connections being refused. Then the ledger accepts again, work is scheduled
(which lowers the item before it commits) and the next run releases all of it.

Registered in `sweeper_local.drills.DRILLS`; it imports that module's helpers when it runs.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Final

from sweeper.producer.run import NOT_DUE

if TYPE_CHECKING:
    from sweeper_local.drills import DrillRun

#: The producer runs fired while the ledger refuses connections.
IDLE_RUNS: Final = 3


def _fire(run: DrillRun) -> dict[str, Any] | None:
    """One scheduled producer run now: its report, or None when it failed."""
    result = run.runtime.pipeline.fire(datetime.now(UTC))
    if result.error is not None:
        run.say(f"producer run failed: {result.error}")
        return None
    report: dict[str, Any] = result.response
    return report


def idle_ledger(run: DrillRun, jobs: int = 10) -> None:
    """Work done, the ledger refusing connections, producer runs that do not reach for it;
    then the ledger back, new work scheduled, and the next run releasing every job."""
    if run.postgres is None:
        from sweeper_local.drills import DrillError

        raise DrillError("the idle-ledger drill needs a PostgreSQL of its own")
    wake = run.ledger.wake
    if wake is None:
        from sweeper_local.drills import DrillError

        raise DrillError("the local stack keeps no wake item")
    run.seed(jobs)
    first = _fire(run)  # the stack's schedule does not tick in this drill: each run is ours
    run.check_equal(
        "jobs the first run released", None if first is None else first["published"], jobs
    )
    run.settle()
    _fire(run)  # the first run with nothing left: it raises the item past now
    item = wake.read(run.policy)
    run.check(
        "wake item after the work is done",
        None if item.at is None else item.at.isoformat(),
        item.at is not None and item.at > datetime.now(UTC),
        "later than now (nothing can become claimable)",
    )
    run.check(
        "last full read of the ledger",
        None if item.checked_at is None else item.checked_at.isoformat(),
        item.checked_at is not None and item.checked_at <= datetime.now(UTC),
        "set by that run (the trust bound counts from it)",
    )
    with run.postgres.refusing():
        run.say("PostgreSQL stopped: every connection is refused")
        reports = [_fire(run) for _ in range(IDLE_RUNS)]
        reached = sum(1 for report in reports if report is None)
        run.check_equal("producer runs that reached for the refusing ledger", reached, 0)
        reasons = [report["stop_reason"] for report in reports if report is not None]
        run.check_equal("stop reasons of the idle runs", reasons, [NOT_DUE] * IDLE_RUNS)
    run.say("PostgreSQL accepts connections again")
    run.ledger.close()  # the drill's own session ended with the server: the next write reopens
    run.seed(jobs, first=jobs)  # lowers the wake item before it commits
    report = _fire(run)
    released = None if report is None else report["published"]
    run.check_equal("jobs the next run released", released, jobs)
    run.fault_over()
    run.settle()

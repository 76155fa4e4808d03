"""What a redrive records (migration 0015): who asked, then each page it changed.

A redrive that moves or drops nothing records nothing (the schedule runs every few minutes; an
empty DLQ or letters that stay are no change). The first page that moves a letter, retries a
terminal job or drops the letter of a succeeded or cancelled job writes the action (its actor
and request) with that page's step; every later page that changes something adds its step, and
the end a last step marked `done`. A run cut short by an error or a killed process so leaves
the record of every page it finished. Counts only: the job events of a retry name its jobs.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any, Protocol

from sweeper.action_log import ActionLog
from sweeper.ledger.store import Ledger


class RedriveReport(Protocol):
    """What a step reads of `sweeper.redrive.run.RedriveReport` (that module imports this one)."""

    dry_run: bool
    moved: int
    retried_terminal: int
    dropped_settled: int
    dropped_cancelled: int
    stop_reason: str


#: Who the scheduled redrive function is in the ledger ...
SCHEDULE_ACTOR = "redrive-schedule"
#: ... and the function invoked directly with a request (Lambda names no caller in the event;
#: CloudTrail's data events for the function do).
INVOKE_ACTOR = "redrive-invoke"
#: The counts each step records: what the page changed.
COUNTED = ("moved", "retried_terminal", "dropped_settled", "dropped_cancelled")


def function_actor(event: dict[str, Any]) -> str:
    """The actor of a run of the redrive function: its schedule, or a direct invoke."""
    scheduled = event.get("source") == "aws.scheduler" or "detail-type" in event
    return SCHEDULE_ACTOR if scheduled else INVOKE_ACTOR


class RedriveLog:
    """The record of one redrive run, written page by page."""

    def __init__(
        self,
        ledger: Ledger,
        *,
        policy: str,
        actor: str,
        request: dict[str, Any],
        clock: Callable[[], datetime],
    ) -> None:
        self._ledger = ledger
        self._policy = policy
        self._actor = actor
        self._request = request
        self._clock = clock
        self._log: ActionLog | None = None
        self._recorded = dict.fromkeys(COUNTED, 0)

    def page(self, report: RedriveReport) -> None:
        """Record what changed since the last step, if anything did (never in a dry run)."""
        if report.dry_run:
            return
        now = {name: int(getattr(report, name)) for name in COUNTED}
        delta = {name: now[name] - self._recorded[name] for name in COUNTED}
        if not any(delta.values()):
            return
        if self._log is None:
            self._log = ActionLog.begin(
                self._ledger,
                policy=self._policy,
                action="redrive",
                actor=self._actor,
                reason=None,
                detail={"request": self._request},
                clock=self._clock,
            )
        self._log.step(delta)
        self._recorded = now

    def finish(self, report: RedriveReport) -> None:
        """The last step, with the run's totals and why it stopped (if it recorded anything)."""
        self.page(report)
        if self._log is not None:
            self._log.done({**self._recorded, "stop_reason": report.stop_reason})

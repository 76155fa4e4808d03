"""The side effect a job asks for, behind one small interface.

`HttpAction` (sweeper.actions.http) is the production implementation; tests and benchmarks pass
others. An action classifies what happened and never raises for an HTTP status: it returns an
`ActionResult`. It raises only for bugs.
"""

from __future__ import annotations

from typing import Protocol

from sweeper.models import ActionCall, ActionResult


class Action(Protocol):
    def perform(self, job: ActionCall, timeout_seconds: float | None = None) -> ActionResult:
        """Carry out the job's effect once, sending its operation key as the idempotency key.

        `timeout_seconds` caps the whole call (connect + read); None means the action's own
        configured timeouts.
        """
        ...

"""A long operator action, recorded before it begins and then step by step (migration 0015).

Prune, the scheduled retention, redrive and catch-up change many rows or messages over a
while. Each writes its operator action first (who, why, with what parameters), then one step
per batch deleted, page moved or run released, and a last step marked `done`: an interrupted
action leaves a record of everything it did up to where it stopped. Counts only, never
customer data.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sweeper.ledger.store import Ledger

Clock = Callable[[], datetime]


@dataclass(frozen=True, slots=True)
class ActionLog:
    """One recorded action's id, and how its steps are written."""

    ledger: Ledger
    action_id: int
    clock: Clock

    @classmethod
    def begin(
        cls,
        ledger: Ledger,
        *,
        policy: str | None,
        action: str,
        actor: str,
        reason: str | None,
        detail: dict[str, Any],
        clock: Clock,
    ) -> ActionLog:
        """Record the action before any of it happens."""
        action_id = ledger.record_action(
            policy, action, actor, clock(), reason=reason, detail=detail
        )
        return cls(ledger, action_id, clock)

    def step(self, detail: dict[str, Any]) -> None:
        """Record what one step did (counts)."""
        self.ledger.record_step(self.action_id, self.clock(), detail)

    def done(self, detail: dict[str, Any]) -> None:
        """Record that the action finished, with its totals."""
        self.step({**detail, "done": True})


def require_reason(command: str, reason: str | None) -> str:
    """The reason given, stripped; OperatorError naming the flag when there is none."""
    from sweeper.errors import OperatorError

    if not (reason or "").strip():
        raise OperatorError(f"give a reason to {command} (--reason), as the ledger records it")
    return (reason or "").strip()

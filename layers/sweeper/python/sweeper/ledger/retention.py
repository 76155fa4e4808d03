"""Retention's part of the ledger: pruning settled history in batches (`sweeper.prune.retention`,
`sweeper.prune.run`), and deleting the smoke check's canary (`sweeper_tools.smoke`).

Each prune batch takes the prune's operator action (`action_id`, recorded before the first
batch) and records its step in the statement that deletes it (migration 0015).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sweeper.ledger import retention_sql
from sweeper.ledger.executor import Executor


@dataclass(frozen=True, slots=True)
class PruneStep:
    """The recorded prune action a batch writes its step under (migration 0015), and when."""

    action_id: int
    at: datetime


def _batch(
    before: datetime, limit: int, policy: str | None, step: PruneStep | None
) -> dict[str, Any]:
    return {
        "before": before,
        "limit": limit,
        "policy": policy,
        "action_id": None if step is None else step.action_id,
        "now": before if step is None else step.at,
    }


class RetentionLedger(Executor):
    """The retention side of `sweeper.ledger.store.Ledger`."""

    def prune_settled_batch(
        self,
        before: datetime,
        limit: int,
        policy: str | None = None,
        *,
        failed_before: datetime | None = None,
        step: PruneStep | None = None,
    ) -> tuple[int, int]:
        """Delete one batch of settled jobs completed before `before`, failed ones only before
        `failed_before` (None keeps every failed job), with their job events; (jobs, job
        events) deleted. With `step`, the batch is recorded as a step of that action."""
        params = {**_batch(before, limit, policy, step), "failed_before": failed_before}
        jobs, events = self._execute(retention_sql.PRUNE_SETTLED, params)[0]
        return int(jobs), int(events)

    def prune_actions_batch(
        self, before: datetime, limit: int, policy: str | None = None, step: PruneStep | None = None
    ) -> int:
        """Delete one batch of operator actions taken before `before` that no job event names
        (never the action `step` records under); how many."""
        return len(self._execute(retention_sql.PRUNE_ACTIONS, _batch(before, limit, policy, step)))

    def prune_runs_batch(
        self, before: datetime, limit: int, policy: str | None = None, step: PruneStep | None = None
    ) -> int:
        """Delete one batch of run records scheduled before `before`; how many."""
        return len(self._execute(retention_sql.PRUNE_RUNS, _batch(before, limit, policy, step)))

"""Retention's part of the ledger: pruning settled history in batches (`sweeper.retention`,
`sweeper.prune`), and deleting the smoke check's canary (`sweeper.smoke`).

Each prune batch takes the prune's operator action (`action_id`, recorded before the first
batch) and records its step in the statement that deletes it (migration 0015).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sweeper.ledger import queries
from sweeper.ledger.executor import Executor


def _batch(
    before: datetime, limit: int, policy: str | None, action_id: int | None, now: datetime | None
) -> dict[str, Any]:
    return {
        "before": before,
        "limit": limit,
        "policy": policy,
        "action_id": action_id,
        "now": now or before,
    }


class RetentionLedger(Executor):
    """The retention side of `sweeper.ledger.store.Ledger`."""

    def prune_batch(
        self,
        before: datetime,
        limit: int,
        policy: str | None = None,
        *,
        failed_before: datetime | None = None,
        action_id: int | None = None,
        now: datetime | None = None,
    ) -> int:
        """Delete one batch of settled rows completed before `before` (failed ones only
        before `failed_before`; none without it); how many."""
        return self.prune_settled_batch(
            before, limit, policy, failed_before=failed_before, action_id=action_id, now=now
        )[0]

    def prune_settled_batch(
        self,
        before: datetime,
        limit: int,
        policy: str | None = None,
        *,
        failed_before: datetime | None = None,
        action_id: int | None = None,
        now: datetime | None = None,
    ) -> tuple[int, int]:
        """Delete one batch of settled jobs completed before `before`, failed ones only before
        `failed_before` (None keeps every failed job), with their job events; (jobs, job
        events) deleted. With `action_id`, the batch is recorded as a step of that action."""
        params = _batch(before, limit, policy, action_id, now)
        rows = self._execute(queries.PRUNE_SETTLED, {**params, "failed_before": failed_before})
        jobs, events = rows[0]
        return int(jobs), int(events)

    def prune_actions_batch(
        self,
        before: datetime,
        limit: int,
        policy: str | None = None,
        *,
        action_id: int | None = None,
        now: datetime | None = None,
    ) -> int:
        """Delete one batch of operator actions taken before `before` that no job event names
        (never `action_id` itself, whose step the batch records); how many."""
        rows = self._execute(queries.PRUNE_ACTIONS, _batch(before, limit, policy, action_id, now))
        return len(rows)

    def prune_runs_batch(
        self,
        before: datetime,
        limit: int,
        policy: str | None = None,
        *,
        action_id: int | None = None,
        now: datetime | None = None,
    ) -> int:
        """Delete one batch of run records scheduled before `before`; how many."""
        rows = self._execute(queries.PRUNE_RUNS, _batch(before, limit, policy, action_id, now))
        return len(rows)

    def delete_canary(self, key: str, *, policy: str, tenant_id: str, prefix: str) -> bool:
        """Delete a smoke canary (and its job events) in any status; whether it was there."""
        rows = self._execute(
            queries.DELETE_CANARY,
            {"key": key, "policy": policy, "tenant_id": tenant_id, "prefix": prefix},
        )
        return bool(rows)

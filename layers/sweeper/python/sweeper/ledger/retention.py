"""Retention's part of the ledger: pruning settled history in batches (`sweeper.retention`), and
deleting the smoke check's canary (`sweeper.smoke`)."""

from __future__ import annotations

from datetime import datetime

from sweeper.ledger import queries
from sweeper.ledger.executor import Executor


class RetentionLedger(Executor):
    """The retention side of `sweeper.ledger.store.Ledger`."""

    def prune_batch(self, before: datetime, limit: int, policy: str | None = None) -> int:
        """Delete one batch of settled rows completed before `before`; how many."""
        return self.prune_settled_batch(before, limit, policy)[0]

    def prune_settled_batch(
        self, before: datetime, limit: int, policy: str | None = None
    ) -> tuple[int, int]:
        """Delete one batch of settled jobs completed before `before`, with their job events;
        (jobs, job events) deleted."""
        rows = self._execute(
            queries.PRUNE_SETTLED, {"before": before, "limit": limit, "policy": policy}
        )
        jobs, events = rows[0]
        return int(jobs), int(events)

    def prune_actions_batch(self, before: datetime, limit: int, policy: str | None = None) -> int:
        """Delete one batch of operator actions taken before `before` that no job event names;
        how many."""
        rows = self._execute(
            queries.PRUNE_ACTIONS, {"before": before, "limit": limit, "policy": policy}
        )
        return len(rows)

    def prune_runs_batch(self, before: datetime, limit: int, policy: str | None = None) -> int:
        """Delete one batch of run records scheduled before `before`; how many."""
        rows = self._execute(
            queries.PRUNE_RUNS, {"before": before, "limit": limit, "policy": policy}
        )
        return len(rows)

    def delete_canary(self, key: str, *, policy: str, tenant_id: str, prefix: str) -> bool:
        """Delete a smoke canary (and its job events) in any status; whether it was there."""
        rows = self._execute(
            queries.DELETE_CANARY,
            {"key": key, "policy": policy, "tenant_id": tenant_id, "prefix": prefix},
        )
        return bool(rows)

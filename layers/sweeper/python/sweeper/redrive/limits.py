"""What the redrive asks of a dead letter's limits before moving it back to work.

A job is under every limit of its policy: its scope's (the first) and each further one, keyed
as the consumer keys them (`LimitConfig.limiter_key`), and each may be paused live by an
operator (sweeper.limiter.live). While any of them is closed or paused, a letter moved back
would only be deferred by the consumer, spending a receive on its way back to the DLQ: the
redrive keeps it (`kept_closed`), and a later run (the schedule's next) moves it once every
limit has reopened and no pause is left.
"""

from __future__ import annotations

from dataclasses import dataclass

from sweeper.config import Policy
from sweeper.limiter.live import LiveLimitStore
from sweeper.models import LedgerTarget


@dataclass(frozen=True)
class LimitLook:
    """A policy's limits as the redrive reads them (`live`: None, no live limits to read)."""

    policy: Policy
    live: LiveLimitStore | None = None

    def further_keys(self, view: LedgerTarget) -> list[str]:
        """The limiter keys of the job's limits beside its scope."""
        policy = self.policy
        return [
            limit.limiter_key(
                policy=policy.name,
                tenant_id=view.tenant_id,
                object_id=view.object_id,
                host=policy.action.scope_host,
                params=view.params,
            )
            for limit in policy.further_limits
        ]

    def paused(self) -> list[str]:
        """The names of the policy's limits an operator paused live (one GetItem each)."""
        if self.live is None:
            return []
        changes = (self.live.get(self.policy.name, limit.name) for limit in self.policy.limits)
        return [change.limit for change in changes if change is not None and change.paused]

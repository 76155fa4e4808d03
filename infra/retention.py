"""Retention: per policy, a scheduled function that prunes the ledger's old metadata.

It gets exactly what deleting ledger rows needs: the ledger (the application credential and the
database port) and HTTPS to the AWS API endpoints for Secrets Manager. No queue, no table, no
vendor. One run at a time: two would only skip each other's locked rows.
"""

from __future__ import annotations

import math

from constructs import Construct

from infra.ledger_function import LedgerAccess, LedgerFunction
from sweeper.config import Policy

PRUNE_MEMORY_MB = 256
#: Lambda's timeout leaves room past the budget for the batch in hand and the run's record.
PRUNE_TIMEOUT_MARGIN_SECONDS = 30
PRUNE_RESERVED_CONCURRENCY = 1


def prune_timeout_seconds(policy: Policy) -> int:
    """The prune's budget plus room to finish the batch in hand."""
    return math.ceil(policy.retention.budget_seconds) + PRUNE_TIMEOUT_MARGIN_SECONDS


class Retention(Construct):
    """The prune function of one policy and the schedule that runs it."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        policy: Policy,
        ledger: LedgerAccess,
    ) -> None:
        super().__init__(scope, construct_id)
        self.policy = policy
        self.function = LedgerFunction(
            self,
            "Function",
            policy=policy,
            ledger=ledger,
            aws_apis="Secrets Manager",
            code_name="prune",
            description=f"{policy.name} prune: deletes old settled ledger metadata",
            timeout_seconds=prune_timeout_seconds(policy),
            memory_mb=PRUNE_MEMORY_MB,
            reserved_concurrency=PRUNE_RESERVED_CONCURRENCY,
            lowers_wake=False,  # it deletes settled rows only: nothing becomes due
        )
        self.schedule = self.function.run_on_schedule(
            policy.retention.schedule, "prune old ledger metadata"
        )

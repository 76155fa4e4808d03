"""Redrive: per policy, a scheduled function that works off the dead-letter queue.

What it decides per message (back to the work queue, or settle as terminal in the ledger) is the
function's business (issue 4); here it gets exactly the access that needs: receive and delete on
the DLQ, send on the work queue, the ledger, a read of the throttle gate in the limiter table,
and its own schedule.
"""

from __future__ import annotations

from constructs import Construct

from infra.ledger_function import LedgerAccess, LedgerFunction
from infra.pipeline import Pipeline
from infra.tables import Tables
from sweeper_tools.deploy.redrive import redrive_schedule

REDRIVE_TIMEOUT_SECONDS = 300
REDRIVE_MEMORY_MB = 512
#: One redrive at a time per policy: two would race for the same dead letters.
REDRIVE_RESERVED_CONCURRENCY = 1


class Redrive(Construct):
    """The redrive function of one pipeline and the schedule that runs it."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        pipeline: Pipeline,
        ledger: LedgerAccess,
        tables: Tables,
    ) -> None:
        super().__init__(scope, construct_id)
        policy = pipeline.policy
        self.function = LedgerFunction(
            self,
            "Function",
            policy=policy,
            ledger=ledger,
            aws_apis="SQS and Secrets Manager",
            code_name="redrive",
            description=f"{policy.name} redrive: works off the dead-letter queue",
            environment={
                "SWEEPER_QUEUE_URL": pipeline.queue.queue_url,
                "SWEEPER_DLQ_URL": pipeline.dead_letter_queue.queue_url,
                "SWEEPER_LIMITER_TABLE": tables.limiter.table_name,
            },
            timeout_seconds=REDRIVE_TIMEOUT_SECONDS,
            memory_mb=REDRIVE_MEMORY_MB,
            reserved_concurrency=REDRIVE_RESERVED_CONCURRENCY,
        )
        pipeline.dead_letter_queue.grant_consume_messages(self.function.role)
        pipeline.queue.grant_send_messages(self.function.role)
        tables.grant_gate_reader(self.function.role)
        if policy.redrive.watches:
            # An empty DLQ's run keeps watch when a gate closed lately (sweeper.redrive.auto).
            tables.grant_gate_scanner(self.function.role)
        # DynamoDB is a gateway endpoint: its traffic leaves for the service's prefix list.
        self.function.allow_https_to(ledger.network.dynamodb_peer, "DynamoDB (the throttle gate)")
        self.schedule = self.function.run_on_schedule(
            redrive_schedule(policy.redrive), "run the redrive"
        )

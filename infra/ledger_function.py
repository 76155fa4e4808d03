"""A function of one policy that works on the ledger, built one way for every such function.

The producer, consumer, redrive, discovery, prune and intake functions each need the same four
things besides their own grants: the policy in their environment, the ledger's connection
settings, read access to the runtime secret with a path to the database (or its proxy) on its
port, and HTTPS to the AWS interface endpoints they call (Secrets Manager at least). What they
are built from (the VPC, the database, the packaged code) is one `LedgerAccess`, made once by
the stack. The producer, redrive, discovery and prune functions also run on a schedule of their
own, with its dead-letter queue: `LedgerFunction.run_on_schedule`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from constructs import Construct

from infra.database import Database
from infra.function import SweeperFunction, policy_json
from infra.network import Network
from infra.packaging import Packaging
from infra.scheduling import ScheduledInvocation
from infra.tables import Tables
from sweeper.config import Policy


@dataclass(frozen=True)
class LedgerAccess:
    """What every function of the stack stands on: the VPC it runs in, the ledger's database
    (its settings, secret and proxy), and the code and layers it runs."""

    network: Network
    database: Database
    packaging: Packaging
    #: Where each policy's wake item is kept (the limiter table): every writer lowers it.
    tables: Tables


class LedgerFunction(SweeperFunction):
    """A SweeperFunction of `policy` with the ledger's environment, grants and network path.

    `aws_apis` names, for its security-group rule, what the function reaches through the
    interface endpoints (e.g. "SQS and Secrets Manager"); None when its HTTPS rule is its own.
    Unless `lowers_wake` is False (a function that makes nothing due), its ledger writes lower
    the policy's wake item (sweeper.ledger.wake): its table in the environment, a grant on that
    one item, and HTTPS to DynamoDB unless `reaches_dynamodb` says its own rules already do.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        policy: Policy,
        ledger: LedgerAccess,
        aws_apis: str | None,
        code_name: str,
        description: str,
        timeout_seconds: int,
        memory_mb: int,
        environment: Mapping[str, str] | None = None,
        reserved_concurrency: int | None = None,
        lowers_wake: bool = True,
        reaches_dynamodb: bool = False,
    ) -> None:
        super().__init__(
            scope,
            construct_id,
            code_name=code_name,
            description=description,
            packaging=ledger.packaging,
            network=ledger.network,
            environment={
                "SWEEPER_POLICY": policy_json(policy),
                **(environment or {}),
                **ledger.database.runtime_environment(),
                # Its ledger writes lower the policy's wake item (sweeper.ledger.wake).
                **({"SWEEPER_WAKE_TABLE": ledger.tables.limiter.table_name} if lowers_wake else {}),
            },
            timeout_seconds=timeout_seconds,
            memory_mb=memory_mb,
            reserved_concurrency=reserved_concurrency,
        )
        self.policy = policy
        ledger.database.grant_runtime_access(self)
        if aws_apis is not None:
            self.allow_https_to(ledger.network.aws_api_peer, aws_apis)
        if lowers_wake:
            ledger.tables.grant_wake(self.role, [policy.name])
        if lowers_wake and not reaches_dynamodb:
            # DynamoDB is a gateway endpoint: its traffic leaves for the service's prefix list.
            self.allow_https_to(ledger.network.dynamodb_peer, "DynamoDB (the wake item)")

    def run_on_schedule(
        self, expression: str, description: str, *, schedule_id: str = "Schedule"
    ) -> ScheduledInvocation:
        """EventBridge Scheduler runs the function on `expression`, in the policy's time zone,
        with the schedule's dead-letter queue and invoke role and the function's failure
        destination (infra/scheduling.py).

        The schedule is the function's sibling, `schedule_id` in the same scope: its place in
        the tree, hence its logical IDs, is where it always was. Call it after the function's
        own grants: the failure destination adds its statement to the role's policy, and the
        statements keep the order they have always had.
        """
        scope = self.node.scope
        assert isinstance(scope, Construct)  # a LedgerFunction always has a parent
        return ScheduledInvocation(
            scope,
            schedule_id,
            function=self.function,
            expression=expression,
            timezone=self.policy.timezone,
            policy_name=self.policy.name,
            description=f"sweeper {self.policy.name}: {description}",
        )

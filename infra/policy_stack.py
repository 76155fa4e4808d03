"""One policy's resources in a nested stack of their own (docs/decisions.md, "A nested stack
per policy").

CloudFormation holds at most 500 resources in a template, and one policy of the richest kind
(discovery, intake with its webhook and rules, several limits, retention) brings about a hundred:
functions with their roles, log groups and security groups, queues, schedules, alarms. In one
stack, four policies passed the limit. Here the root stack holds what every policy shares (the
VPC, the ledger, the tables, the operator API, the alarm topic and the ledger's alarms) and each
policy is a nested stack: its size does not grow with the number of policies.

The nested stack's id is `Policy-<name>`, and inside it every construct keeps the id it had in
the single stack (`Pipeline-<name>`, ...): a resource's logical ID depends on its policy alone,
so adding, changing or removing one policy never replaces another's resources. References to the
root stack (the VPC, the tables, the topic, the ledger's metrics and alarms its dashboard draws)
arrive as the nested stack's parameters, CDK's own wiring; the root reads the nested stack's
outputs for its own outputs.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from aws_cdk import NestedStack, Tags
from aws_cdk import aws_events as events
from constructs import Construct

from infra.discovery import Discovery
from infra.intake import Intake
from infra.intake_sender import IntakeSender
from infra.ledger_function import LedgerAccess
from infra.observability import Observability, PolicyHome
from infra.pipeline import Pipeline
from infra.redrive import Redrive
from infra.retention import Retention
from infra.tables import Tables
from sweeper.config import Policy
from sweeper_tools.planning.stack_estimate import policy_stack_id

POLICY_TAG_KEY = "sweeper:policy"


class PolicyStack(NestedStack):
    """Pipeline, redrive, intake, discovery, retention and their alarms, for one policy."""

    def __init__(
        self,
        scope: Construct,
        *,
        policy: Policy,
        ledger: LedgerAccess,
        tables: Tables,
        observability: Observability,
        intake_sender: IntakeSender,
        intake_bus: events.IEventBus | None,
        policy_dir: Path | None,
        sharing: Sequence[Policy],
    ) -> None:
        super().__init__(
            scope,
            policy_stack_id(policy.name),
            description=f"sweeper policy {policy.name}",
        )
        self.policy = policy
        self.pipeline = Pipeline(
            self,
            f"Pipeline-{policy.name}",
            policy=policy,
            ledger=ledger,
            tables=tables,
            policy_dir=policy_dir,
            sharing=sharing,
        )
        self.redrive = Redrive(
            self, f"Redrive-{policy.name}", pipeline=self.pipeline, ledger=ledger, tables=tables
        )
        self.intake = Intake(
            self,
            f"Intake-{policy.name}",
            policy=policy,
            ledger=ledger,
            sender=intake_sender,
            bus=intake_bus,
        )
        # The policy's alarms and dashboard live with its resources; the topic is shared.
        alarms = PolicyHome(self, "Observability", policy=policy)
        observability.watch(self.pipeline, self.redrive, home=alarms)
        observability.watch_intake(self.intake, home=alarms)
        self.discovery: Discovery | None = None
        if policy.discovery is not None:
            self.discovery = Discovery(
                self, f"Discovery-{policy.name}", policy=policy, ledger=ledger
            )
            observability.watch_discovery(self.discovery, home=alarms)
        self.retention: Retention | None = None
        if policy.retention.enabled:
            self.retention = Retention(
                self, f"Retention-{policy.name}", policy=policy, ledger=ledger
            )
            observability.watch_retention(self.retention, home=alarms)
        Tags.of(self).add(POLICY_TAG_KEY, policy.name)

"""The sweeper stack: composes one construct per concern and owns tags, outputs and cdk-nag
acknowledgments that concern the stack as a whole. It defines no resource itself.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from aws_cdk import CfnOutput, Stack, Tags
from constructs import Construct

from infra.database import Database
from infra.function import SweeperFunction
from infra.intake_bus import IntakeBus
from infra.intake_sender import IntakeSender
from infra.ledger_function import LedgerAccess
from infra.migrations import Migrations
from infra.network import Network
from infra.observability import Observability, policy_dashboard_name
from infra.operator_api import OperatorApi
from infra.operator_audit import OperatorTrail, direct_invoke_guard
from infra.options import DeploymentOptions
from infra.packaging import Packaging
from infra.policy_stack import PolicyStack
from infra.protection import DeletionProtection
from infra.queues import admit_only
from infra.scheduling import ScheduledInvocation
from infra.stack_size import TemplateSize, measure
from infra.tables import Tables
from sweeper.config import SweeperConfig
from sweeper_tools.planning.consumer_defaults import deployed_config
from sweeper_tools.planning.stack_estimate import policy_stack_id

APP_TAG = "sweeper"
#: Taggable in CDK's model but not in CloudFormation's schema for it (validation rejects Tags).
UNTAGGABLE_RESOURCE_TYPES = ["AWS::RDS::DBProxyTargetGroup"]


class SweeperStack(Stack):
    """Network, database, tables, migrations, the operator API, the alarm topic;
    per policy a nested stack (infra/policy_stack.py) with its pipeline, redrive, intake,
    discovery, retention and their alarms."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: SweeperConfig,
        options: DeploymentOptions,
        deps_layer_dir: Path,
        **kwargs: Any,
    ) -> None:
        super().__init__(
            scope,
            construct_id,
            description="sweeper: scheduled cleanup obligations against a rate-limited API",
            **kwargs,
        )
        # The policies as deployed: a consumer's sizing that a policy leaves out is what its
        # plan derives from its limits and its vendor's latency (every function reads that).
        config = deployed_config(config)
        self.config = config
        network = Network(self, "Network", options=options)
        database = Database(self, "Database", network=network, options=options)
        tables = Tables(self, "Tables")
        packaging = Packaging(self, "Packaging", deps_layer_dir=deps_layer_dir)
        migrations = Migrations(
            self, "Migrations", network=network, database=database, packaging=packaging
        )
        ledger = LedgerAccess(
            network=network, database=database, packaging=packaging, tables=tables
        )
        observability = Observability(self, "Observability", alarm_email=options.alarm_email)
        observability.watch_database(database)
        intake_sender = IntakeSender(self, "IntakeSender")
        intake_bus: IntakeBus | None = None
        if any(policy.intake.event_patterns for policy in config.policies):
            intake_bus = IntakeBus(
                self,
                "IntakeBus",
                sender_role=intake_sender.role,
                senders=options.intake_event_senders,
            )
        self.policy_stacks: list[PolicyStack] = []
        for policy in config.policies:
            policy_stack = PolicyStack(
                self,
                policy=policy,
                ledger=ledger,
                tables=tables,
                observability=observability,
                intake_sender=intake_sender,
                intake_bus=intake_bus.bus if intake_bus is not None else None,
                policy_dir=options.policy_dir,
                sharing=[other for other in config.policies if other is not policy],
            )
            self.policy_stacks.append(policy_stack)
            pipeline, intake = policy_stack.pipeline, policy_stack.intake
            if policy_stack.discovery is not None:
                self._output(
                    f"{pascal_case(policy.name)}DiscoveryFunctionName",
                    policy_stack.discovery.function.function.function_name,
                    "discovery function",
                )
            prefix = pascal_case(policy.name)
            self._output(f"{prefix}QueueUrl", pipeline.queue.queue_url, "work queue")
            self._output(
                f"{prefix}DeadLetterQueueUrl", pipeline.dead_letter_queue.queue_url, "its DLQ"
            )
            self._output(
                f"{prefix}ProducerFunctionName",
                pipeline.producer.function.function_name,
                "producer function",
            )
            self._output(
                f"{prefix}ConsumerFunctionName",
                pipeline.consumer.function.function_name,
                "consumer function",
            )
            self._output(f"{prefix}IntakeQueueUrl", intake.queue.queue_url, "intake queue")
            self._output(
                f"{prefix}IntakeDeadLetterQueueUrl",
                intake.dead_letter_queue.queue_url,
                "intake queue's DLQ",
            )
            if intake.webhook_url is not None and intake.secret is not None:
                self._output(f"{prefix}WebhookUrl", intake.webhook_url.url, "webhook base URL")
                self._output(
                    f"{prefix}WebhookSecretArn", intake.secret.secret_arn, "webhook signing secret"
                )

        operator_api = OperatorApi(
            self,
            "OperatorApi",
            config=config,
            ledger=ledger,
            tables=tables,
            pipelines=[policy_stack.pipeline for policy_stack in self.policy_stacks],
            intakes=[policy_stack.intake for policy_stack in self.policy_stacks],
        )
        # A message on a work queue starts a call: only what puts jobs there may send.
        for policy_stack in self.policy_stacks:
            pipeline = policy_stack.pipeline
            admit_only(
                pipeline.queue,
                [
                    pipeline.producer.role,
                    policy_stack.redrive.function.role,
                    operator_api.operator.role,
                ],
            )
        self._output(
            "OperatorApiUrl",
            operator_api.operator_url.url,
            "operator API, every console command (IAM only; `sweeper <command> --stack`)",
        )
        self._output(
            "OperatorApiReadOnlyUrl",
            operator_api.read_only_url.url,
            "operator API, read-only: status, runs, inspect (IAM only)",
        )
        self._output(
            "OperatorPolicyArn",
            operator_api.operator_policy.managed_policy_arn,
            "managed policy to attach to operators: every console command",
        )
        self._output(
            "OperatorReadOnlyPolicyArn",
            operator_api.read_only_policy.managed_policy_arn,
            "managed policy to attach to read-only operators: status, runs, inspect",
        )
        operator_functions = [operator_api.read_only.function, operator_api.operator.function]
        self._output(
            "OperatorDirectInvokeGuard",
            self.to_json_string(direct_invoke_guard(operator_functions)),
            "policy to apply as an SCP or permissions boundary: the operator functions only "
            "through their URLs (docs/runbook.md, 'Who acted')",
        )
        if options.operator_trail:
            trail = OperatorTrail(self, "OperatorTrail", functions=operator_functions)
            self._output(
                "OperatorTrailBucketName",
                trail.bucket.bucket_name,
                "CloudTrail data events of the operator functions: who invoked them",
            )
        self._output(
            "IntakeSenderRoleArn",
            intake_sender.role.role_arn,
            "role that may send to the intake queues (`sweeper schedule --stack`)",
        )
        if intake_bus is not None:
            self._output(
                "IntakeEventBusName",
                intake_bus.bus.event_bus_name,
                "intake event bus: the policies' event_patterns rules listen here",
            )
            self._output("IntakeEventBusArn", intake_bus.bus.event_bus_arn, "intake event bus")
        self._output("IdempotencyTableName", tables.idempotency.table_name, "idempotency table")
        self._output("LimiterTableName", tables.limiter.table_name, "limiter table")
        self._output("DatabaseSecretArn", database.secret.secret_arn, "ledger admin credential")
        if database.app_secret is not None:
            self._output(
                "DatabaseAppSecretArn",
                database.app_secret.secret_arn,
                "ledger application credential (producer, consumer, redrive)",
            )
        if database.cluster is not None:
            self._output(
                "DatabaseEndpoint", database.cluster.cluster_endpoint.hostname, "ledger writer"
            )
        if database.proxy is not None:
            self._output("DatabaseProxyEndpoint", database.proxy.endpoint, "ledger proxy")
        self._output("AlarmTopicArn", observability.topic.topic_arn, "alarm notifications")
        self._output(
            "DashboardName",
            policy_dashboard_name(self.stack_name, config.policies[0].name),
            "the first policy's CloudWatch dashboard (each policy has one, with the ledger's row)",
        )
        Tags.of(self).add("app", APP_TAG, exclude_resource_types=UNTAGGABLE_RESOURCE_TYPES)

        # Functions come up once the ledger's schema exists (a first deploy fails, if it fails,
        # with the cluster created and deletable), and nothing takes work before then: no
        # scheduled run either.
        for node in self.node.find_all():
            if isinstance(node, SweeperFunction) and node is not migrations.function:
                node.function.node.add_dependency(migrations.resource)
            if isinstance(node, ScheduledInvocation):
                node.schedule.node.add_dependency(migrations.resource)
        if database.cluster is not None:
            protection = DeletionProtection(
                self,
                "DeletionProtection",
                cluster=database.cluster,
                enabled=options.deletion_protection,
            )
            protection.after(list(self.node.children))

    def template_sizes(self, outdir: Path) -> list[TemplateSize]:
        """After synth: the resources and outputs of this stack's template and each policy's."""
        sizes = [measure(f"{self.stack_name} (root)", outdir / self.template_file)]
        sizes += [
            measure(policy_stack_id(nested.policy.name), outdir / nested.template_file)
            for nested in self.policy_stacks
        ]
        return sizes

    def _output(self, logical_id: str, value: str, description: str) -> None:
        """An output whose logical ID never changes: tools and tests read it by name."""
        output = CfnOutput(self, logical_id, value=value, description=f"sweeper {description}")
        output.override_logical_id(logical_id)


def pascal_case(name: str) -> str:
    """`data-exports` → `DataExports`: policy names as logical-ID parts."""
    return "".join(part.capitalize() for part in name.split("-"))

"""The operator API: every console command from an operator's own machine, IAM only.

Two functions run the same code (`functions/operator`) in the VPC, each behind a function URL
with `AWS_IAM` auth: the read-only one serves status, runs and inspect and is granted only what
they read; the operator one serves every command. Two managed policies say who may call which:
read-only may invoke the read-only URL alone, operator both. So a principal with the read-only
policy cannot reach the function that changes anything, and that function's handler refuses a
change whoever asks (docs/decisions.md: why function URLs, what they cost). A direct Invoke
passes no URL authorizer and may write any caller into the event: infra/operator_audit.py holds
the guard against it and the trail that records every invoker.
"""

from __future__ import annotations

from collections.abc import Sequence

from aws_cdk import ArnFormat, Stack
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from constructs import Construct

from infra.function import SweeperFunction
from infra.intake import Intake
from infra.ledger_function import LedgerAccess
from infra.nag import acknowledge
from infra.packaging import CONFIG_FILE_PATH, config_layer
from infra.pipeline import Pipeline
from infra.tables import Tables
from sweeper.config import SweeperConfig

READ_TIMEOUT_SECONDS = 60
#: A redrive may take its budget (the CLI's default 600 s) inside Lambda's 900 s.
OPERATE_TIMEOUT_SECONDS = 900
OPERATOR_MEMORY_MB = 512
#: At most a few operators at once; a runaway client cannot crowd out the pipeline's functions.
OPERATOR_RESERVED_CONCURRENCY = 5

EVENT_SOURCE_MAPPING_REASON = (
    "lambda:ListEventSourceMappings supports no resource-level permission; "
    "UpdateEventSourceMapping is limited by the lambda:FunctionArn condition to the consumers."
)


class OperatorApi(Construct):
    """The two operator functions, their IAM-only URLs and the two managed policies."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: SweeperConfig,
        ledger: LedgerAccess,
        tables: Tables,
        pipelines: Sequence[Pipeline],
        intakes: Sequence[Intake],
    ) -> None:
        super().__init__(scope, construct_id)
        stack = Stack.of(self)
        # The policy file in a layer, not the environment: Lambda's 4 KB hold a few policies.
        self.config_layer = config_layer(self, "ConfigLayer", config_file_text(config))
        self.read_only = self._function("ReadOnly", "read", ledger, READ_TIMEOUT_SECONDS)
        self.operator = self._function("Operator", "operate", ledger, OPERATE_TIMEOUT_SECONDS)

        queues = [q for p in pipelines for q in (p.queue, p.dead_letter_queue)]
        queues += [q for i in intakes for q in (i.queue, i.dead_letter_queue)]
        for function in (self.read_only, self.operator):
            # Where things are: the stack's outputs, as `sweeper status --stack` reads them.
            function.role.add_to_policy(
                iam.PolicyStatement(
                    actions=["cloudformation:DescribeStacks"], resources=[stack.stack_id]
                )
            )
            for queue in queues:
                queue.grant(function.role, "sqs:GetQueueAttributes")
            tables.grant_gate_reader(function.role)
            # `status` lists the closed keys of further limits: one Scan of the limiter table
            tables.grant_gate_scanner(function.role)
            function.allow_https_to(ledger.network.dynamodb_peer, "DynamoDB (the throttle gates)")
            # CloudFormation and Lambda have no endpoint in the VPC: through the NAT.
            function.allow_https_to(ec2.Peer.any_ipv4(), "CloudFormation and Lambda APIs (NAT)")

        # Its writes (unhold, retry, postpone) lower their policy's wake item.
        tables.grant_wake(self.operator.role, [policy.name for policy in config.policies])
        # `sweeper limits set` writes its policy's live limits (the read-only function reads
        # them with its gate read)
        tables.grant_live_limits(self.operator.role, [policy.name for policy in config.policies])
        # What only the operator function changes: catch-up and redrive send to the work
        # queue, redrive works the DLQ, release invokes the producer, pause switches consumers.
        for pipeline in pipelines:
            pipeline.queue.grant_send_messages(self.operator.role)
            pipeline.dead_letter_queue.grant_consume_messages(self.operator.role)
        # `sweeper release` invokes a policy's producer: the function itself, no qualifier
        # (CDK's grant adds `<arn>:*`, a wildcard that would need acknowledging per policy).
        self.operator.role.add_to_policy(
            iam.PolicyStatement(
                actions=["lambda:InvokeFunction"],
                resources=[p.producer.function.function_arn for p in pipelines],
            )
        )
        self.operator.role.add_to_policy(
            iam.PolicyStatement(actions=["lambda:ListEventSourceMappings"], resources=["*"])
        )
        self.operator.role.add_to_policy(
            iam.PolicyStatement(
                actions=["lambda:UpdateEventSourceMapping", "lambda:GetEventSourceMapping"],
                resources=[
                    stack.format_arn(
                        service="lambda",
                        resource="event-source-mapping",
                        resource_name="*",
                        arn_format=ArnFormat.COLON_RESOURCE_NAME,
                    )
                ],
                conditions={
                    "StringEquals": {
                        "lambda:FunctionArn": [p.consumer.function.function_arn for p in pipelines]
                    }
                },
            )
        )
        acknowledge(
            self.operator.role, "AwsSolutions-IAM5[Resource::*]", EVENT_SOURCE_MAPPING_REASON
        )
        acknowledge(
            self.operator.role,
            "AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:lambda:<AWS::Region>:"
            "<AWS::AccountId>:event-source-mapping:*]",
            EVENT_SOURCE_MAPPING_REASON,
        )
        self.read_only_url = self.read_only.function.add_function_url(
            auth_type=lambda_.FunctionUrlAuthType.AWS_IAM
        )
        self.operator_url = self.operator.function.add_function_url(
            auth_type=lambda_.FunctionUrlAuthType.AWS_IAM
        )
        self.read_only_policy = iam.ManagedPolicy(
            self,
            "ReadOnlyPolicy",
            description="sweeper operator API, read-only: status, runs, inspect",
            statements=[*_invoke_url(self.read_only), _describe(stack)],
        )
        self.operator_policy = iam.ManagedPolicy(
            self,
            "OperatorPolicy",
            description="sweeper operator API: every console command, recorded with the caller",
            statements=[
                *_invoke_url(self.read_only),
                *_invoke_url(self.operator),
                _describe(stack),
            ],
        )

    def _function(
        self,
        construct_id: str,
        access: str,
        ledger: LedgerAccess,
        timeout_seconds: int,
    ) -> SweeperFunction:
        function = SweeperFunction(
            self,
            construct_id,
            code_name="operator",
            description=f"operator API ({access}): the console commands for IAM callers",
            packaging=ledger.packaging,
            network=ledger.network,
            environment={
                "SWEEPER_CONFIG_FILE": CONFIG_FILE_PATH,
                "SWEEPER_STACK_NAME": Stack.of(self).stack_name,
                "SWEEPER_OPERATOR_ACCESS": access,
                # read-only: as the reader (migration 0014, SELECT only), with its own secret
                **ledger.database.runtime_environment(read_only=access == "read"),
                # Its writes (unhold, retry, postpone) lower the policy's wake item.
                **(
                    {}
                    if access == "read"
                    else {"SWEEPER_WAKE_TABLE": ledger.tables.limiter.table_name}
                ),
            },
            timeout_seconds=timeout_seconds,
            memory_mb=OPERATOR_MEMORY_MB,
            reserved_concurrency=OPERATOR_RESERVED_CONCURRENCY,
        )
        function.function.add_layers(self.config_layer)
        ledger.database.grant_runtime_access(function, read_only=access == "read")
        function.allow_https_to(ledger.network.aws_api_peer, "SQS and Secrets Manager")
        return function


def _invoke_url(function: SweeperFunction) -> list[iam.PolicyStatement]:
    """Call the function through its IAM URL, and only so (new URLs need both actions)."""
    arn = function.function.function_arn
    return [
        iam.PolicyStatement(
            actions=["lambda:InvokeFunctionUrl"],
            resources=[arn],
            conditions={"StringEquals": {"lambda:FunctionUrlAuthType": "AWS_IAM"}},
        ),
        iam.PolicyStatement(
            actions=["lambda:InvokeFunction"],
            resources=[arn],
            conditions={"Bool": {"lambda:InvokedViaFunctionUrl": "true"}},
        ),
    ]


def _describe(stack: Stack) -> iam.PolicyStatement:
    """Read the stack's outputs (the CLI finds the URLs there)."""
    return iam.PolicyStatement(
        actions=["cloudformation:DescribeStacks"], resources=[stack.stack_id]
    )


def config_file_text(config: SweeperConfig) -> str:
    """What the config layer holds: only what the policy file set (a discriminator such as
    `discovery.kind` stays, though it equals its default), validated again when read."""
    return config.model_dump_json(exclude_unset=True)

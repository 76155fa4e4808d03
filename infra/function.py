"""One sweeper Lambda function: its own role, log group and security group, in the VPC.

Every function (producer, consumer, redrive, migrate) is built here so that they share the
runtime, the layers and the hardening, and differ only in what they are granted.
"""

from __future__ import annotations

from collections.abc import Mapping

from aws_cdk import Duration, Token
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_secretsmanager as secretsmanager
from constructs import Construct

from infra.nag import acknowledge
from infra.network import Network
from infra.packaging import HANDLER, LAMBDA_ARCHITECTURE, LAMBDA_RUNTIME, Packaging
from sweeper.config import Policy
from sweeper.errors import ConfigError
from sweeper.observability import METRICS_NAMESPACE

SERVICE_NAME = "sweeper"
#: Secrets Manager appends six random characters to a secret's name in its complete ARN.
_COMPLETE_SECRET_ARN_SUFFIX_LENGTH = 6
LOG_RETENTION = logs.RetentionDays.THREE_MONTHS
HTTPS_PORT = 443
#: Lambda's limit on the whole environment of a function.
LAMBDA_ENVIRONMENT_MAX_BYTES = 4096
#: What an unresolved token (a queue URL, a table name) may take once deployed.
ENVIRONMENT_TOKEN_ESTIMATE_BYTES = 256

#: What Lambda needs on the execution role to place the function's network interfaces in the
#: VPC: the AWSLambdaVPCAccessExecutionRole managed policy, written out so that it is reviewed
#: with the role. EC2 does not support resource-level permissions for these describe/attach calls.
VPC_ACCESS_ACTIONS = [
    "ec2:CreateNetworkInterface",
    "ec2:DescribeNetworkInterfaces",
    "ec2:DescribeSubnets",
    "ec2:DeleteNetworkInterface",
    "ec2:AssignPrivateIpAddresses",
    "ec2:UnassignPrivateIpAddresses",
]

WILDCARD_RESOURCE_REASON = (
    "Only the VPC network-interface actions (CreateNetworkInterface, Describe*, "
    "DeleteNetworkInterface, Assign/UnassignPrivateIpAddresses) and X-Ray's PutTraceSegments / "
    "PutTelemetryRecords are granted on '*': neither service supports resource-level "
    "permissions for them. Every data-plane grant on this role names its queue, table or secret."
)
RUNTIME_REASON = (
    "python3.13 on arm64 is the platform the deps layer is built for (layers/build.py pins "
    "wheels to it); moving to a newer runtime is a deliberate change of layer and tests."
)


class SweeperFunction(Construct):
    """A Lambda function with the house defaults and nothing granted beyond its own logs."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        code_name: str,
        description: str,
        packaging: Packaging,
        network: Network,
        environment: Mapping[str, str],
        timeout_seconds: int,
        memory_mb: int,
        reserved_concurrency: int | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        full_environment = {
            **environment,
            "POWERTOOLS_SERVICE_NAME": SERVICE_NAME,
            "POWERTOOLS_METRICS_NAMESPACE": METRICS_NAMESPACE,
        }
        _check_environment_size(code_name, full_environment)

        self.log_group = logs.LogGroup(self, "Logs", retention=LOG_RETENTION)
        # Our own role: CDK's default would attach two AWS managed policies (basic execution and
        # VPC access) that grant logging to every log group in the account.
        self.role = iam.Role(
            self,
            "Role",
            assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
            description=f"sweeper {description}",
        )
        self.role.add_to_policy(iam.PolicyStatement(actions=VPC_ACCESS_ACTIONS, resources=["*"]))
        self.log_group.grant_write(self.role)

        #: The peers egress on 443 is open to (each once: allow_https_to).
        self._https_peers: set[str] = set()
        self.security_group = ec2.SecurityGroup(
            self,
            "SecurityGroup",
            vpc=network.vpc,
            allow_all_outbound=False,
            description=f"sweeper {description}",
        )
        self.function = lambda_.Function(
            self,
            "Function",
            description=f"sweeper {description}",
            runtime=LAMBDA_RUNTIME,
            architecture=LAMBDA_ARCHITECTURE,
            handler=HANDLER,
            code=Packaging.function_code(code_name),
            layers=packaging.layers,
            environment=full_environment,
            timeout=Duration.seconds(timeout_seconds),
            memory_size=memory_mb,
            reserved_concurrent_executions=reserved_concurrency,
            role=self.role,
            log_group=self.log_group,
            vpc=network.vpc,
            vpc_subnets=network.function_subnets,
            security_groups=[self.security_group],
            tracing=lambda_.Tracing.ACTIVE,
        )
        acknowledge(self.role, "AwsSolutions-IAM5[Resource::*]", WILDCARD_RESOURCE_REASON)
        acknowledge(self.function, "AwsSolutions-L1", RUNTIME_REASON)

    def allow_https_to(self, peer: ec2.IPeer, description: str) -> None:
        """Open egress on 443 only, to one peer (the VPC endpoints, or the vendor API); once
        per peer, whatever each caller needs it for."""
        if peer.unique_id in self._https_peers:
            return
        self._https_peers.add(peer.unique_id)
        self.security_group.add_egress_rule(peer, ec2.Port.tcp(HTTPS_PORT), description)


def policy_json(policy: Policy) -> str:
    """The policy as a function receives it in `SWEEPER_POLICY`: only what the policy file set.

    Lambda's environment holds 4 KB in all, and a policy dumped with every default takes over
    2 KB before it says anything. The function validates it again (`Settings`), so each default
    comes back as it was; `tests/infra/test_policy_environment.py` holds the round trip.
    """
    return policy.model_dump_json(exclude_unset=True)


def _check_environment_size(name: str, environment: Mapping[str, str]) -> None:
    """Fail synth, not the deploy, when a policy makes the environment too large."""
    size = 0
    for key, value in environment.items():
        unresolved = Token.is_unresolved(value)
        size += len(key) + (ENVIRONMENT_TOKEN_ESTIMATE_BYTES if unresolved else len(value))
    if size > LAMBDA_ENVIRONMENT_MAX_BYTES:
        raise ConfigError(
            f"the {name} function's environment would take about {size} bytes, more than "
            f"Lambda's {LAMBDA_ENVIRONMENT_MAX_BYTES}: shorten the policy (its description)"
        )


def import_secret(scope: Construct, construct_id: str, arn: str) -> secretsmanager.ISecret:
    """A secret named by the policy file, by its complete ARN or a partial one (without the
    six random characters): the grant must match either form."""
    suffix = arn.rsplit("-", 1)[-1]
    complete = "-" in arn and len(suffix) == _COMPLETE_SECRET_ARN_SUFFIX_LENGTH
    if complete:
        return secretsmanager.Secret.from_secret_complete_arn(scope, construct_id, arn)
    return secretsmanager.Secret.from_secret_partial_arn(scope, construct_id, arn)

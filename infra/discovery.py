"""Discovery: per policy with `[policies.discovery]`, a scheduled function that reads the
system of record and upserts obligations into the ledger (sweeper.discovery).

Scheduling, discovery and execution are separate functions with separate schedules and budgets.
The function gets exactly what its source needs: the ledger's application secret; for `sql`,
a read of the source's own read-only secret and egress on the source's port; for `s3`,
`s3:ListBucket` on the one bucket, conditioned on the configured prefix. One run at a time per
policy: the cursor's compare-and-set makes an overlap safe, a reserved concurrency of one makes
it rare.
"""

from __future__ import annotations

import math

from aws_cdk import Stack
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from constructs import Construct

from infra.function import import_secret
from infra.ledger_function import LedgerAccess, LedgerFunction
from infra.network import Network
from sweeper.config import Policy, S3Discovery, SqlDiscovery
from sweeper.errors import ConfigError
from sweeper.limits import LAMBDA_MAX_TIMEOUT_SECONDS

DISCOVERY_MEMORY_MB = 512
#: The run stops starting pages at its budget; the timeout leaves room to commit the page in hand.
DISCOVERY_TIMEOUT_MARGIN_SECONDS = 30
#: One discovery run per policy at a time.
DISCOVERY_RESERVED_CONCURRENCY = 1


class Discovery(Construct):
    """The discovery function of one policy, its grants and its schedule."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        policy: Policy,
        ledger: LedgerAccess,
    ) -> None:
        super().__init__(scope, construct_id)
        config = policy.discovery
        if config is None:
            raise ConfigError(f"policy {policy.name} has no discovery to deploy")
        self.policy = policy
        self.function = LedgerFunction(
            self,
            "Function",
            policy=policy,
            ledger=ledger,
            aws_apis="Secrets Manager",
            code_name="discover",
            description=f"{policy.name} discovery: finds obligations in the system of record",
            timeout_seconds=discovery_timeout_seconds(config.budget_seconds),
            memory_mb=DISCOVERY_MEMORY_MB,
            reserved_concurrency=DISCOVERY_RESERVED_CONCURRENCY,
        )
        if isinstance(config, SqlDiscovery):
            self._grant_sql(config)
        else:
            self._grant_s3(config, ledger.network)
        self.schedule = self.function.run_on_schedule(config.schedule, "run discovery")

    def _grant_sql(self, config: SqlDiscovery) -> None:
        """The source's own read-only secret (never the ledger's), and its port."""
        if config.secret_arn is None:
            raise ConfigError(
                f"policy {self.policy.name}: discovery.secret_arn must name the source "
                "database's read-only secret to deploy an sql discovery"
            )
        import_secret(self, "SourceSecret", config.secret_arn).grant_read(self.function.role)
        # The system of record's address is not known here (another VPC, peered or shared):
        # its port only, to the VPC's routable space.
        self.function.security_group.add_egress_rule(
            ec2.Peer.any_ipv4(), ec2.Port.tcp(config.port), "system-of-record PostgreSQL"
        )

    def _grant_s3(self, config: S3Discovery, network: Network) -> None:
        """ListBucket on the one bucket, for keys under the prefix only; HTTPS to S3."""
        bucket_arn = Stack.of(self).format_arn(
            service="s3", region="", account="", resource=config.bucket
        )
        statement = iam.PolicyStatement(actions=["s3:ListBucket"], resources=[bucket_arn])
        if config.prefix:
            statement.add_condition("StringLike", {"s3:prefix": [f"{config.prefix}*"]})
        self.function.role.add_to_policy(statement)
        if config.metadata_params:
            # HeadObject reads a due object's metadata (its params): the objects under the
            # prefix only, and only when the policy names metadata params.
            self.function.role.add_to_policy(
                iam.PolicyStatement(
                    actions=["s3:GetObject"], resources=[f"{bucket_arn}/{config.prefix}*"]
                )
            )
        # Through S3's gateway endpoint (its prefix list), not the NAT.
        self.function.allow_https_to(network.s3_peer, "S3 ListObjectsV2 (gateway endpoint)")


def discovery_timeout_seconds(budget_seconds: float) -> int:
    """The run's budget plus room to commit the page in hand, within Lambda's limit."""
    wanted = math.ceil(budget_seconds) + DISCOVERY_TIMEOUT_MARGIN_SECONDS
    return min(wanted, LAMBDA_MAX_TIMEOUT_SECONDS)

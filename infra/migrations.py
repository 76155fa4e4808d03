"""Migrations: a custom resource that applies the ledger migrations on deploy.

The same `sweeper.ledger.migrate.migrate` that `sweeper migrate` runs, from a function in the
VPC that connects to the cluster directly (never through RDS Proxy). The resource's properties
carry a digest of the migration files and the login secrets' ARNs, so CloudFormation calls it
again exactly when one changes; a failing migration fails the deploy, which rolls back.
"""

from __future__ import annotations

import hashlib

from aws_cdk import CustomResource
from aws_cdk import aws_logs as logs
from aws_cdk import custom_resources as cr
from constructs import Construct

from infra.database import Database
from infra.function import SweeperFunction
from infra.nag import acknowledge
from infra.network import Network
from infra.packaging import MIGRATIONS_DIR, Packaging
from infra.scheduling import invoke_qualifiers_finding

MIGRATE_TIMEOUT_SECONDS = 300
MIGRATE_MEMORY_MB = 512
PROVIDER_LOG_RETENTION = logs.RetentionDays.THREE_MONTHS
RESOURCE_TYPE = "Custom::SweeperMigrations"

PROVIDER_INVOKE_REASON = (
    "The provider framework function may invoke the migrations function and its versions "
    "(<arn>:*) only; CDK generates this statement and the wildcard is limited to qualifiers."
)
PROVIDER_MANAGED_POLICY_REASON = (
    "The provider framework function (aws-cdk-lib, outside the VPC, no data access) logs with "
    "the AWSLambdaBasicExecutionRole managed policy CDK attaches to its generated role."
)


def migrations_digest() -> str:
    """A digest of every migration file, name and content, in order."""
    digest = hashlib.sha256()
    for path in sorted(MIGRATIONS_DIR.glob("*.sql")):
        digest.update(path.name.encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


def migration_properties(database: Database) -> dict[str, str]:
    """What makes CloudFormation call the migrations again when it changes: the migration files,
    and the login secrets (a new one needs its user made with its password)."""
    properties = {"MigrationsDigest": migrations_digest()}
    if database.app_secret is not None:
        properties["AppSecretArn"] = database.app_secret.secret_arn
    if database.reader_secret is not None:
        properties["ReaderSecretArn"] = database.reader_secret.secret_arn
    return properties


class Migrations(Construct):
    """The migrations function, its provider, and the custom resource that triggers it."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        network: Network,
        database: Database,
        packaging: Packaging,
    ) -> None:
        super().__init__(scope, construct_id)
        self.function = SweeperFunction(
            self,
            "Function",
            code_name="migrate",
            description="ledger migrations (CloudFormation custom resource)",
            packaging=packaging,
            network=network,
            environment=database.direct_environment(),
            timeout_seconds=MIGRATE_TIMEOUT_SECONDS,
            memory_mb=MIGRATE_MEMORY_MB,
        )
        database.grant_direct_access(self.function)
        self.function.allow_https_to(network.aws_api_peer, "Secrets Manager")

        provider = cr.Provider(
            self,
            "Provider",
            on_event_handler=self.function.function,
            log_group=logs.LogGroup(self, "ProviderLogs", retention=PROVIDER_LOG_RETENTION),
        )
        self.resource = CustomResource(
            self,
            "Apply",
            service_token=provider.service_token,
            resource_type=RESOURCE_TYPE,
            properties=migration_properties(database),
        )
        # Run only once the database, its security group rules, the secret (and its rotation
        # schedule) and the endpoints the function needs all exist.
        self.resource.node.add_dependency(database, network.endpoints, self.function)

        framework = provider.node.find_child("framework-onEvent")
        acknowledge(
            framework, invoke_qualifiers_finding(self.function.function), PROVIDER_INVOKE_REASON
        )
        acknowledge(
            framework,
            "AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/"
            "AWSLambdaBasicExecutionRole]",
            PROVIDER_MANAGED_POLICY_REASON,
        )

"""Deletion protection on the ledger's cluster, switched on last, so that a first create can
roll back.

CloudFormation cannot delete a cluster whose deletion protection is on. Created with the
protection, a first deploy that fails anywhere (a Lambda concurrency quota, a migration) rolls
back into ROLLBACK_FAILED and leaves a cluster whose fixed identifier blocks the next deploy.
So the cluster resource never sets `DeletionProtection` (RDS's default is off, and an update
that does not name the property leaves it alone), and this custom resource calls
`rds:ModifyDBCluster` with the `deletion_protection` option, on create and on update, after
every other resource of the stack exists: when it runs, nothing is left that could fail the
create. On delete it does nothing: lifting the protection stays a deliberate deploy with
`-c deletion_protection=false` (docs/deploy.md, "Destroy").
"""

from __future__ import annotations

from aws_cdk import Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_rds as rds
from aws_cdk import custom_resources as cr
from constructs import Construct, IConstruct

from infra.nag import acknowledge
from infra.network import PREFIX_LIST_LOOKUP_MANAGED_POLICY_REASON, SDK_CALL_FUNCTION_ID

#: What the call returns to CloudFormation: the one field, well below its 4 KB response limit.
DELETION_PROTECTION_FIELD = "DBCluster.DeletionProtection"


class DeletionProtection(Construct):
    """Sets the cluster's deletion protection to `enabled`, as the last step of a deploy."""

    def __init__(
        self, scope: Construct, construct_id: str, *, cluster: rds.DatabaseCluster, enabled: bool
    ) -> None:
        super().__init__(scope, construct_id)
        call = cr.AwsSdkCall(
            service="RDS",
            action="modifyDBCluster",
            parameters={
                "DBClusterIdentifier": cluster.cluster_identifier,
                "DeletionProtection": enabled,
                "ApplyImmediately": True,
            },
            # The cluster's identifier: a replaced cluster is a new physical id, so the call
            # runs again for it.
            physical_resource_id=cr.PhysicalResourceId.of(cluster.cluster_identifier),
            output_paths=[DELETION_PROTECTION_FIELD],
        )
        self.resource = cr.AwsCustomResource(
            self,
            "Switch",
            on_create=call,
            on_update=call,
            policy=cr.AwsCustomResourcePolicy.from_statements(
                [
                    iam.PolicyStatement(
                        actions=["rds:ModifyDBCluster"], resources=[cluster.cluster_arn]
                    )
                ]
            ),
            install_latest_aws_sdk=False,
        )
        sdk_function = Stack.of(self).node.try_find_child(SDK_CALL_FUNCTION_ID)
        if sdk_function is not None:
            acknowledge(
                sdk_function,
                "AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/"
                "AWSLambdaBasicExecutionRole]",
                PREFIX_LIST_LOOKUP_MANAGED_POLICY_REASON,
            )

    def after(self, constructs: list[IConstruct]) -> None:
        """Run only once every resource under `constructs` exists (this one excluded)."""
        self.resource.node.add_dependency(*[c for c in constructs if c is not self])

"""Who acted through the operator API: the guard against direct invocation, and the trail.

The operator functions record the caller the function URL's IAM authorizer put in the event
(`requestContext.authorizer.iam.userArn`). That field is part of the payload: a principal that
may call `lambda:InvokeFunction` directly (an administrator, a CI role, `lambda:*`) can send a
hand-built event naming anyone, and Lambda gives the function nothing a direct invoker cannot
write. Nor can a Lambda resource policy deny. So the stack ships the two things that close and
watch the door instead:

- `direct_invoke_guard`: a Deny of `lambda:InvokeFunction` on the operator functions unless
  `lambda:InvokedViaFunctionUrl` is true, for an administrator to apply as a service control
  policy or in every principal's permissions boundary (output `OperatorDirectInvokeGuard`);
- `OperatorTrail`: CloudTrail data events for exactly those functions, which record the real
  invoker of every invocation, forged or not (docs/runbook.md, "Who acted").
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from aws_cdk import Duration, RemovalPolicy, Stack
from aws_cdk import aws_cloudtrail as cloudtrail
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_s3 as s3
from constructs import Construct

from infra.nag import acknowledge

#: How long the trail's log files are kept: an operator's change is looked into within a year.
OPERATOR_TRAIL_RETENTION_DAYS = 365
#: The only qualifier the operator functions have (no version is published, no alias made).
LATEST_QUALIFIER = "$LATEST"

ACCESS_LOG_REASON = (
    "The bucket receives only CloudTrail's own log files, written by the CloudTrail service and "
    "validated by its digest files; S3 server access logs would need a bucket of their own that "
    "again lacks access logs, and read access is granted to no principal by this stack."
)


def direct_invoke_guard(functions: Sequence[lambda_.IFunction]) -> dict[str, Any]:
    """The policy document that denies invoking `functions` other than through their URL.

    `BoolIfExists` so that a request without the key at all is denied as well as one where it
    is false; the resources name each function and its qualified forms (`:$LATEST`)."""
    arns = [function.function_arn for function in functions]
    return {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Sid": "SweeperOperatorApiOnlyThroughItsUrl",
                "Effect": "Deny",
                "Action": "lambda:InvokeFunction",
                "Resource": [form for arn in arns for form in (arn, f"{arn}:*")],
                "Condition": {"BoolIfExists": {"lambda:InvokedViaFunctionUrl": "false"}},
            }
        ],
    }


class OperatorTrail(Construct):
    """A single-region trail of the operator functions' Invoke data events, nothing else."""

    def __init__(
        self, scope: Construct, construct_id: str, *, functions: Sequence[lambda_.IFunction]
    ) -> None:
        super().__init__(scope, construct_id)
        self.bucket = s3.Bucket(
            self,
            "Bucket",
            encryption=s3.BucketEncryption.S3_MANAGED,
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            object_ownership=s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
            enforce_ssl=True,
            versioned=True,
            lifecycle_rules=[
                s3.LifecycleRule(
                    expiration=Duration.days(OPERATOR_TRAIL_RETENTION_DAYS),
                    noncurrent_version_expiration=Duration.days(1),
                )
            ],
            # The record of who acted outlives the stack it records.
            removal_policy=RemovalPolicy.RETAIN,
        )
        acknowledge(self.bucket, "AwsSolutions-S1", ACCESS_LOG_REASON)
        self.trail = cloudtrail.Trail(
            self,
            "Trail",
            trail_name=f"{Stack.of(self).stack_name}-operator-api",
            bucket=self.bucket,
            enable_file_validation=True,
            is_multi_region_trail=False,
            include_global_service_events=False,
        )
        arns = [function.function_arn for function in functions]
        cfn_trail = self.trail.node.default_child
        assert isinstance(cfn_trail, cloudtrail.CfnTrail)
        # Advanced selectors: data events of these functions only, and no management events
        # (a trail without selectors would log every management event of the region, again).
        # The L2 trail renders an empty EventSelectors list; PutEventSelectors takes one kind.
        cfn_trail.add_property_deletion_override("EventSelectors")
        cfn_trail.advanced_event_selectors = [
            cloudtrail.CfnTrail.AdvancedEventSelectorProperty(
                name="sweeper operator API invocations",
                field_selectors=[
                    _equals("eventCategory", ["Data"]),
                    _equals("resources.type", ["AWS::Lambda::Function"]),
                    _equals(
                        "resources.ARN",
                        [form for arn in arns for form in (arn, f"{arn}:{LATEST_QUALIFIER}")],
                    ),
                ],
            )
        ]


def _equals(field: str, values: list[str]) -> cloudtrail.CfnTrail.AdvancedFieldSelectorProperty:
    return cloudtrail.CfnTrail.AdvancedFieldSelectorProperty(field=field, equal_to=values)

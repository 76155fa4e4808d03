"""The alarm board: the topic every alarm notifies, the dashboards, and how an alarm is named.

An alarm is built from an `AlarmSpec` by `AlarmBoard.add_alarm`, which names it after its id (and
its policy) and wires the topic on ALARM and on OK; the watchers beside this module only say
which alarms and which dashboard widgets a part of the stack gets.
"""

from __future__ import annotations

from dataclasses import dataclass

from aws_cdk import Duration, RemovalPolicy, Stack
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as cloudwatch_actions
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as subscriptions
from constructs import Construct

from infra.naming import deployment_name
from sweeper.config import Policy

ALARM_PERIOD_SECONDS = 300
KEY_DELETION_WINDOW_DAYS = 7
DASHBOARD_WIDGET_WIDTH = 8
DASHBOARD_WIDGET_HEIGHT = 6
DASHBOARD_HOURS = 3

GT = cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD
GE = cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD


@dataclass(frozen=True)
class AlarmSpec:
    """One alarm: breaching when `metric` passes `threshold` for `periods` periods."""

    name: str
    metric: cloudwatch.IMetric
    threshold: float
    meaning: str
    operator: cloudwatch.ComparisonOperator = GT
    periods: int = 1
    #: A period without data: not breaching, unless its absence is the incident (DiscoveryLag).
    missing: cloudwatch.TreatMissingData = cloudwatch.TreatMissingData.NOT_BREACHING


class PolicyHome(Construct):
    """Where one policy's alarms are built (in the policy's nested stack), with the policy's own
    dashboard, `<stack>-sweeper-<policy>`: CloudWatch draws at most 500 widgets a dashboard,
    about twenty policies' worth, so each has its own, which also draws the ledger's row (the
    stack has no dashboard of its own: each is billed $3 a month)."""

    def __init__(self, scope: Construct, construct_id: str, *, policy: Policy) -> None:
        super().__init__(scope, construct_id)
        self.dashboard = cloudwatch.Dashboard(
            self,
            f"Dashboard-{policy.name}",  # a logical ID apart from the stack's dashboard's
            dashboard_name=policy_dashboard_name(deployment_name(self), policy.name),
            default_interval=Duration.hours(DASHBOARD_HOURS),
        )


def policy_dashboard_name(stack_name: str, policy_name: str) -> str:
    """The name of one policy's dashboard."""
    return f"{stack_name}-sweeper-{policy_name}"


class AlarmBoard(Construct):
    """The alarm topic (with its key), the alarms added so far, and the ledger's dashboard rows
    (each policy's dashboard draws them)."""

    def __init__(self, scope: Construct, construct_id: str, *, alarm_email: str | None) -> None:
        super().__init__(scope, construct_id)
        # CloudWatch alarms can publish to an encrypted topic only with a customer managed key
        # whose policy lets CloudWatch use it (the AWS managed SNS key does not).
        key = kms.Key(
            self,
            "TopicKey",
            description="sweeper alarm topic",
            enable_key_rotation=True,
            # Only the topic uses it: when the stack goes, the key is scheduled for deletion.
            removal_policy=RemovalPolicy.DESTROY,
            pending_window=Duration.days(KEY_DELETION_WINDOW_DAYS),
        )
        key.grant(
            iam.ServicePrincipal("cloudwatch.amazonaws.com"), "kms:Decrypt", "kms:GenerateDataKey*"
        )
        self.topic = sns.Topic(
            self, "AlarmTopic", display_name="sweeper alarms", master_key=key, enforce_ssl=True
        )
        if alarm_email:
            self.topic.add_subscription(subscriptions.EmailSubscription(alarm_email))
        self.alarms: list[cloudwatch.Alarm] = []
        #: The rows every policy's dashboard draws of what the policies share (the ledger).
        self.shared_rows: list[list[cloudwatch.IWidget]] = []

    def add_alarm(
        self, scope: Construct, spec: AlarmSpec, policy: Policy | None
    ) -> cloudwatch.Alarm:
        """One alarm named after its id (and policy), notifying the topic on ALARM and OK."""
        stack = Stack.of(self).stack_name
        name = f"{stack}-{policy.name}-{spec.name}" if policy else f"{stack}-{spec.name}"
        subject = f"sweeper {policy.name}" if policy else "sweeper"
        alarm = cloudwatch.Alarm(
            scope,
            spec.name,
            alarm_name=name,
            alarm_description=f"{subject}: {spec.meaning} (runbook: {spec.name})",
            metric=spec.metric,
            threshold=spec.threshold,
            comparison_operator=spec.operator,
            evaluation_periods=spec.periods,
            datapoints_to_alarm=spec.periods,
            treat_missing_data=spec.missing,
        )
        action = cloudwatch_actions.SnsAction(self.topic)
        alarm.add_alarm_action(action)
        alarm.add_ok_action(action)
        self.alarms.append(alarm)
        return alarm

    def draw_shared_rows(self, home: PolicyHome) -> None:
        """The rows of what the policies share, on one policy's dashboard."""
        for row in self.shared_rows:
            home.dashboard.add_widgets(*row)

    def add_alarms(
        self, scope: Construct, specs: list[AlarmSpec], policy: Policy | None
    ) -> list[cloudwatch.Alarm]:
        """The alarms of `specs`, in their order (the dashboard lists them so)."""
        return [self.add_alarm(scope, spec, policy) for spec in specs]

"""Observability: per-policy alarms on what an operator must act on, one topic, one dashboard.

Every alarm notifies the topic on ALARM and on OK. Thresholds come from the policy's `alarms`
section, or are derived from the policy (the backlog threshold is what the quota drains within
the queue-age threshold). Application metrics are emitted by Powertools Metrics in namespace
`Sweeper` with dimensions `service` and `policy`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from aws_cdk import Duration, RemovalPolicy, Stack
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as cloudwatch_actions
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as subscriptions
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from infra.function import SERVICE_NAME
from infra.intake import Intake
from infra.pipeline import Pipeline
from infra.redrive import Redrive
from sweeper.observability import METRICS_NAMESPACE, Metric

ALARM_PERIOD_SECONDS = 300
#: The backlog alarm waits this many periods: a large page published at once is not an incident.
BACKLOG_EVALUATION_PERIODS = 3
KEY_DELETION_WINDOW_DAYS = 7
DASHBOARD_WIDGET_WIDTH = 8
DASHBOARD_WIDGET_HEIGHT = 6

_GT = cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD
_GE = cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD


@dataclass(frozen=True)
class AlarmSpec:
    """One alarm: breaching when `metric` passes `threshold` for `periods` periods."""

    name: str
    metric: cloudwatch.IMetric
    threshold: float
    meaning: str
    operator: cloudwatch.ComparisonOperator = _GT
    periods: int = 1


class Observability(Construct):
    """The alarm topic, the alarms of every pipeline, and the dashboard."""

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
        self.dashboard = cloudwatch.Dashboard(
            self,
            "Dashboard",
            dashboard_name=f"{Stack.of(self).stack_name}-sweeper",
            default_interval=Duration.hours(3),
        )

    def watch(self, pipeline: Pipeline, redrive: Redrive) -> None:
        """Alarms and a dashboard row for one policy's pipeline and its redrive."""
        policy = pipeline.policy
        thresholds = policy.alarms
        scope = Construct(self, f"Policy-{policy.name}")
        period = Duration.seconds(ALARM_PERIOD_SECONDS)

        queue_age = pipeline.queue.metric_approximate_age_of_oldest_message(
            period=period, statistic="Maximum"
        )
        queue_visible = _visible(pipeline.queue)
        dlq_visible = _visible(pipeline.dead_letter_queue)
        schedule_dlq_visible = _visible(pipeline.producer_schedule.dead_letter_queue)
        redrive_dlq_visible = _visible(redrive.schedule.dead_letter_queue)
        consumer = pipeline.consumer.function
        producer = pipeline.producer.function
        oldest_eligible = self._app_metric(policy.name, Metric.OLDEST_ELIGIBLE_AGE, "Maximum")
        terminal = self._app_metric(policy.name, Metric.TERMINAL_FAILURES, "Sum")
        auth_open = self._app_metric(policy.name, Metric.AUTH_CIRCUIT_OPEN, "Maximum")
        mismatched = self._app_metric(policy.name, Metric.MISMATCHED, "Sum")
        backlog = backlog_threshold(policy.quota.rate_per_second, thresholds.queue_age_seconds)

        specs = [
            AlarmSpec(
                "QueueAge",
                queue_age,
                thresholds.queue_age_seconds,
                "the oldest message waits longer than the threshold: consumers fall behind",
            ),
            AlarmSpec(
                "QueueBacklog",
                queue_visible,
                backlog,
                "more messages wait than the quota drains within the queue-age threshold",
                periods=BACKLOG_EVALUATION_PERIODS,
            ),
            AlarmSpec(
                "DeadLetters",
                dlq_visible,
                0,
                "messages reached the work queue's DLQ (docs/deploy.md, runbook)",
            ),
            AlarmSpec(
                "ConsumerThrottles",
                consumer.metric_throttles(period=period),
                0,
                "consumer invocations were throttled: maximum concurrency above reserved?",
            ),
            AlarmSpec(
                "ConsumerErrors",
                consumer.metric_errors(period=period),
                0,
                "consumer invocations failed as a whole (not a single job)",
            ),
            AlarmSpec(
                "ProducerErrors", producer.metric_errors(period=period), 0, "a producer run failed"
            ),
            AlarmSpec(
                "ProducerScheduleDeadLetters",
                schedule_dlq_visible,
                0,
                "a scheduled producer run was not delivered or failed all its retries",
            ),
            AlarmSpec(
                "OldestEligibleAge",
                oldest_eligible,
                thresholds.oldest_eligible_age_seconds,
                "a due job has waited longer than the threshold to be published",
            ),
            AlarmSpec(
                "TerminalFailures",
                terminal,
                thresholds.terminal_failures,
                "jobs failed terminally (permanent outcome or attempts exhausted)",
                operator=_GE,
            ),
            AlarmSpec(
                "AuthCircuitOpen",
                auth_open,
                1,
                "the API rejects the credential: consumers stopped calling it",
                operator=_GE,
            ),
            AlarmSpec(
                "MismatchedMessages",
                mismatched,
                1,
                "a queue message named another target than its key's ledger row (never called)",
                operator=_GE,
            ),
            AlarmSpec(
                "RedriveErrors",
                redrive.function.function.metric_errors(period=period),
                0,
                "a redrive run failed",
            ),
            AlarmSpec(
                "RedriveScheduleDeadLetters",
                redrive_dlq_visible,
                0,
                "a scheduled redrive run was not delivered or failed all its retries",
            ),
        ]
        action = cloudwatch_actions.SnsAction(self.topic)
        alarms: list[cloudwatch.Alarm] = []
        for spec in specs:
            alarm = cloudwatch.Alarm(
                scope,
                spec.name,
                alarm_name=f"{Stack.of(self).stack_name}-{policy.name}-{spec.name}",
                alarm_description=f"sweeper {policy.name}: {spec.meaning}",
                metric=spec.metric,
                threshold=spec.threshold,
                comparison_operator=spec.operator,
                evaluation_periods=spec.periods,
                datapoints_to_alarm=spec.periods,
                treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
            )
            alarm.add_alarm_action(action)
            alarm.add_ok_action(action)
            alarms.append(alarm)
        self.alarms.extend(alarms)

        self.dashboard.add_widgets(
            cloudwatch.TextWidget(markdown=f"## {policy.name}", width=24, height=1)
        )
        self.dashboard.add_widgets(
            self._graph("Work queue: age of oldest (s)", [queue_age]),
            self._graph("Work queue: visible", [queue_visible]),
            self._graph("Dead letters", [dlq_visible, schedule_dlq_visible, redrive_dlq_visible]),
        )
        self.dashboard.add_widgets(
            self._graph(
                "Consumer",
                [
                    consumer.metric_invocations(period=period),
                    consumer.metric_errors(period=period),
                    consumer.metric_throttles(period=period),
                ],
            ),
            self._graph(
                "Consumer duration p99 (ms)",
                [consumer.metric_duration(period=period, statistic="p99")],
            ),
            self._graph("Oldest eligible age (s)", [oldest_eligible]),
        )
        self.dashboard.add_widgets(
            self._graph("Terminal failures", [terminal]),
            self._graph("Auth circuit open", [auth_open]),
            cloudwatch.AlarmStatusWidget(
                title=f"{policy.name} alarms",
                alarms=list(alarms),
                width=DASHBOARD_WIDGET_WIDTH,
                height=DASHBOARD_WIDGET_HEIGHT,
            ),
        )

    def watch_intake(self, intake: Intake) -> None:
        """Alarms and a dashboard row for one policy's intake (queue, DLQ, function, webhook)."""
        policy = intake.policy
        scope = Construct(self, f"Intake-{policy.name}")
        period = Duration.seconds(ALARM_PERIOD_SECONDS)
        age = intake.queue.metric_approximate_age_of_oldest_message(
            period=period, statistic="Maximum"
        )
        dead = _visible(intake.dead_letter_queue)
        errors = intake.function.function.metric_errors(period=period)
        rejected = self._app_metric(policy.name, Metric.INTAKE_REJECTED, "Sum")
        specs = [
            AlarmSpec(
                "IntakeDeadLetters",
                dead,
                0,
                "hints reached the intake DLQ: their upsert failed every delivery (runbook)",
            ),
            AlarmSpec(
                "IntakeAge",
                age,
                policy.intake.age_alarm_seconds,
                "the oldest hint waits longer than the threshold: the intake falls behind",
            ),
            AlarmSpec("IntakeErrors", errors, 0, "intake invocations failed as a whole"),
        ]
        if intake.webhook is not None:
            specs.append(
                AlarmSpec(
                    "WebhookErrors",
                    intake.webhook.function.metric_errors(period=period),
                    0,
                    "webhook invocations failed (senders saw 5xx from Lambda itself)",
                )
            )
        alarms = self._alarms(scope, policy.name, specs)
        widgets: list[cloudwatch.IWidget] = [
            self._graph("Intake queue: age of oldest (s)", [age]),
            self._graph("Intake DLQ: visible", [dead]),
            self._graph("Intake: rejected messages", [rejected]),
        ]
        self.dashboard.add_widgets(*widgets)
        self.dashboard.add_widgets(
            cloudwatch.AlarmStatusWidget(
                title=f"{policy.name} intake alarms",
                alarms=alarms,
                width=DASHBOARD_WIDGET_WIDTH,
                height=DASHBOARD_WIDGET_HEIGHT,
            )
        )

    def _alarms(
        self, scope: Construct, policy_name: str, specs: list[AlarmSpec]
    ) -> list[cloudwatch.Alarm]:
        action = cloudwatch_actions.SnsAction(self.topic)
        alarms: list[cloudwatch.Alarm] = []
        for spec in specs:
            alarm = cloudwatch.Alarm(
                scope,
                spec.name,
                alarm_name=f"{Stack.of(self).stack_name}-{policy_name}-{spec.name}",
                alarm_description=f"sweeper {policy_name}: {spec.meaning}",
                metric=spec.metric,
                threshold=spec.threshold,
                comparison_operator=spec.operator,
                evaluation_periods=spec.periods,
                datapoints_to_alarm=spec.periods,
                treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
            )
            alarm.add_alarm_action(action)
            alarm.add_ok_action(action)
            alarms.append(alarm)
        self.alarms.extend(alarms)
        return alarms

    @staticmethod
    def _app_metric(policy_name: str, name: str, statistic: str) -> cloudwatch.Metric:
        return cloudwatch.Metric(
            namespace=METRICS_NAMESPACE,
            metric_name=name,
            dimensions_map={"service": SERVICE_NAME, "policy": policy_name},
            statistic=statistic,
            period=Duration.seconds(ALARM_PERIOD_SECONDS),
        )

    @staticmethod
    def _graph(title: str, metrics: list[cloudwatch.IMetric]) -> cloudwatch.GraphWidget:
        return cloudwatch.GraphWidget(
            title=title, left=metrics, width=DASHBOARD_WIDGET_WIDTH, height=DASHBOARD_WIDGET_HEIGHT
        )


def _visible(queue: sqs.IQueue) -> cloudwatch.Metric:
    return queue.metric_approximate_number_of_messages_visible(
        period=Duration.seconds(ALARM_PERIOD_SECONDS), statistic="Maximum"
    )


def backlog_threshold(rate_per_second: float, queue_age_seconds: int) -> int:
    """The backlog the quota drains within the queue-age threshold: beyond it, age will follow."""
    return max(1, math.ceil(rate_per_second * queue_age_seconds))

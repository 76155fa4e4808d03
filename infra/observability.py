"""Observability: alarms on what an operator must act on, one topic, one dashboard.

Every alarm notifies the topic on ALARM and on OK. Thresholds come from the policy's `alarms`
section, or are derived from the policy (the backlog threshold is what the quota drains within
the queue-age threshold). Application metrics are emitted by Powertools Metrics in namespace
`Sweeper` with dimensions `service` and `policy`.

Names: an alarm has a stable id in PascalCase (`QueueAge`); it is named `<stack>-<policy>-<id>`
when it watches one policy and `<stack>-<id>` when it watches the stack (the ledger, its secrets).
docs/runbook.md has one section per id, headed by the id (tests/infra/test_runbook.py holds the
two to each other). Add alarms through `Observability.add_alarm` so they follow the convention.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from aws_cdk import Duration, Names, RemovalPolicy, Stack
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as cloudwatch_actions
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_secretsmanager as secretsmanager
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as subscriptions
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from infra.database import Database
from infra.discovery import Discovery
from infra.function import SERVICE_NAME
from infra.intake import Intake
from infra.pipeline import Pipeline
from infra.redrive import Redrive
from infra.retention import Retention
from sweeper.config import Policy
from sweeper.models import OutcomeClass
from sweeper.observability import METRICS_NAMESPACE, Metric
from sweeper.scheduling import single_scope

ALARM_PERIOD_SECONDS = 300
#: The backlog alarm waits this many periods: a large page published at once is not an incident.
BACKLOG_EVALUATION_PERIODS = 3
KEY_DELETION_WINDOW_DAYS = 7
DASHBOARD_WIDGET_WIDTH = 8
DASHBOARD_WIDGET_HEIGHT = 6
#: Completions stalled while messages wait and consumers run: this many periods running (a gate
#: closed by a Retry-After of a few minutes is not yet an incident).
COMPLETION_STALL_PERIODS = 3
#: Outcome-class rates are judged over this many periods running, and only from this many calls
#: a period (below it, one 503 would be a 100 % rate).
RATE_EVALUATION_PERIODS = 2
MIN_CALLS_FOR_RATE = 20
#: The limiter is saturated when its scope's slots are this used, this many periods running.
LIMITER_SATURATION_PERCENT = 90
LIMITER_SATURATION_PERIODS = 3
#: The ledger sits at its maximum capacity this many periods running.
DATABASE_AT_MAX_PERIODS = 3
#: Lambda's limit on a function name (the hosted rotation's name is its construct id, cut to it).
LAMBDA_FUNCTION_NAME_MAX = 64

#: The prune runs about daily: its "falls behind" alarm looks at whole days, two in a row (one
#: incomplete run, e.g. the first after a long pause, is a catch-up, not an incident).
PRUNE_ALARM_PERIOD_SECONDS = 86_400
PRUNE_BEHIND_EVALUATION_PERIODS = 2

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
    #: A period without data: not breaching, unless its absence is the incident (DiscoveryLag).
    missing: cloudwatch.TreatMissingData = cloudwatch.TreatMissingData.NOT_BREACHING


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
        claims = self._app_metric(policy.name, Metric.DISCOVERED, "Sum")
        published = self._app_metric(policy.name, Metric.PUBLISHED, "Sum")
        succeeded = self._app_metric(policy.name, Metric.SUCCEEDED, "Sum")
        retries = self._app_metric(policy.name, Metric.RETRIES, "Sum")
        reclaimed = self._app_metric(policy.name, Metric.RECLAIMED, "Sum")
        publish_failures = self._app_metric(policy.name, Metric.PUBLISH_FAILURES, "Sum")
        released = self._app_metric(policy.name, Metric.RELEASED, "Sum")
        attempts = {
            outcome.value: self._app_metric(
                policy.name, Metric.ATTEMPTS_PREFIX + outcome.value, "Sum"
            )
            for outcome in OutcomeClass
        }
        transient_rate = _outcome_rate(attempts, OutcomeClass.TRANSIENT, period)
        unknown_rate = _outcome_rate(attempts, OutcomeClass.UNKNOWN, period)
        slots_used = self._app_metric(policy.name, Metric.LIMITER_SLOTS_USED, "Sum")
        scope_name = single_scope(policy)
        utilization = cloudwatch.MathExpression(
            expression=f"100 * FILL(used, 0) / {slots_per_period(policy)}",
            using_metrics={"used": slots_used},
            label=(
                f"Slots used (% of scope {scope_name})"
                if scope_name is not None
                else "Slots used, all scopes (% of one scope's)"
            ),
            period=period,
        )
        limiter_waits = self._app_metric(policy.name, Metric.LIMITER_WAITS, "Sum")
        gate_deferrals = self._app_metric(policy.name, Metric.GATE_DEFERRALS, "Sum")
        throttle_events = self._app_metric(policy.name, Metric.THROTTLE_EVENTS, "Sum")

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
            AlarmSpec(
                "ClaimsStalled",
                cloudwatch.MathExpression(
                    # A run that found due work (it reports the oldest age only then) and
                    # claimed none of it. An idle or paused policy reports no age: quiet.
                    expression="IF(FILL(age, -1) >= 0 AND FILL(claims, 0) == 0, 1, 0)",
                    using_metrics={"age": oldest_eligible, "claims": claims},
                    label="Runs with due work and no claim",
                    period=period,
                ),
                1,
                "a producer run found due work and claimed none (in-flight cap or budget)",
                operator=_GE,
            ),
            AlarmSpec(
                "CompletionsStalled",
                cloudwatch.MathExpression(
                    # Messages wait and consumers run, yet no job settles. An idle policy has
                    # no messages; a paused one runs no consumer: both quiet.
                    expression=(
                        "IF(FILL(visible, 0) > 0 AND FILL(invocations, 0) > 0 AND "
                        "FILL(succeeded, 0) + FILL(terminal, 0) == 0, 1, 0)"
                    ),
                    using_metrics={
                        "visible": queue_visible,
                        "invocations": consumer.metric_invocations(period=period),
                        "succeeded": succeeded,
                        "terminal": terminal,
                    },
                    label="Consumers run, messages wait, nothing settles",
                    period=period,
                ),
                1,
                "consumers run and messages wait, but no job settled for 15 minutes",
                operator=_GE,
                periods=COMPLETION_STALL_PERIODS,
            ),
            AlarmSpec(
                "LeaseExpiries",
                reclaimed,
                1,
                "leases expired unsettled and the producer reclaimed them (lost or slow work)",
                operator=_GE,
            ),
            AlarmSpec(
                "TransientRate",
                transient_rate,
                thresholds.transient_rate_percent,
                "too many vendor calls end transient (5xx, refused)",
                operator=_GE,
                periods=RATE_EVALUATION_PERIODS,
            ),
            AlarmSpec(
                "UnknownRate",
                unknown_rate,
                thresholds.unknown_rate_percent,
                "too many vendor calls end unknown (sent, no answer: timeouts)",
                operator=_GE,
                periods=RATE_EVALUATION_PERIODS,
            ),
            AlarmSpec(
                "PublishFailures",
                publish_failures,
                1,
                "the producer could not publish claimed rows (they were released, not lost)",
                operator=_GE,
            ),
        ]
        if scope_name is not None:
            # Per-scope utilization is this policy's when all its jobs share one scope; with a
            # scope per tenant or object it has no CloudWatch figure (docs/decisions.md).
            specs.append(
                AlarmSpec(
                    "LimiterSaturated",
                    utilization,
                    LIMITER_SATURATION_PERCENT,
                    f"the limiter scope {scope_name} used nearly all its slots for 15 minutes",
                    operator=_GE,
                    periods=LIMITER_SATURATION_PERIODS,
                )
            )
        alarms = [self.add_alarm(scope, spec, policy) for spec in specs]

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
            self._graph(
                "Claims and completions (per 5 min)", [claims, published, succeeded, terminal]
            ),
            self._graph("Lease expiries (reclaimed)", [reclaimed]),
            self._graph("Publish failures (released again)", [publish_failures, released]),
        )
        self.dashboard.add_widgets(
            self._graph("Attempts by outcome class", list(attempts.values())),
            cloudwatch.GraphWidget(
                title="Transient and unknown rate (%), retries",
                left=[transient_rate, unknown_rate],
                right=[retries],
                width=DASHBOARD_WIDGET_WIDTH,
                height=DASHBOARD_WIDGET_HEIGHT,
            ),
            cloudwatch.GraphWidget(
                title="Limiter utilization (%), slots, waits and gate",
                left=[utilization],
                right=[slots_used, limiter_waits, gate_deferrals, throttle_events],
                width=DASHBOARD_WIDGET_WIDTH,
                height=DASHBOARD_WIDGET_HEIGHT,
            ),
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

    def watch_retention(self, retention: Retention) -> None:
        """Alarms and a dashboard row for one policy's scheduled prune."""
        policy = retention.policy
        scope = Construct(self, f"Retention-{policy.name}")
        period = Duration.seconds(ALARM_PERIOD_SECONDS)
        incomplete = cloudwatch.Metric(
            namespace=METRICS_NAMESPACE,
            metric_name=Metric.PRUNE_INCOMPLETE,
            dimensions_map={"service": SERVICE_NAME, "policy": policy.name},
            statistic="Sum",
            period=Duration.seconds(PRUNE_ALARM_PERIOD_SECONDS),
        )
        deleted = [
            self._app_metric(policy.name, name, "Sum")
            for name in (
                Metric.PRUNED_JOBS,
                Metric.PRUNED_JOB_EVENTS,
                Metric.PRUNED_RUNS,
                Metric.PRUNED_OPERATOR_ACTIONS,
            )
        ]
        errors = retention.function.function.metric_errors(period=period)
        schedule_dlq_visible = _visible(retention.schedule.dead_letter_queue)
        specs = [
            AlarmSpec(
                "PruneBehind",
                incomplete,
                1,
                "the scheduled prune ran out of budget with old rows left, two days running: "
                "retention falls behind",
                operator=_GE,
                periods=PRUNE_BEHIND_EVALUATION_PERIODS,
            ),
            AlarmSpec("PruneErrors", errors, 0, "a scheduled prune run failed"),
            AlarmSpec(
                "PruneScheduleDeadLetters",
                schedule_dlq_visible,
                0,
                "a scheduled prune run was not delivered or failed all its retries",
            ),
        ]
        alarms = [self.add_alarm(scope, spec, policy) for spec in specs]
        self.dashboard.add_widgets(
            self._graph(f"{policy.name} prune: rows deleted", list(deleted)),
            self._graph(f"{policy.name} prune: incomplete runs, errors", [incomplete, errors]),
            cloudwatch.AlarmStatusWidget(
                title=f"{policy.name} prune alarms",
                alarms=list(alarms),
                width=DASHBOARD_WIDGET_WIDTH,
                height=DASHBOARD_WIDGET_HEIGHT,
            ),
        )

    def watch_database(self, database: Database) -> None:
        """Alarms and a dashboard row for the ledger a new cluster holds, and its secrets."""
        cluster = database.cluster
        if cluster is None or database.max_capacity_acu is None:
            return  # an imported cluster: its owner watches its capacity and its rotation
        scope = Construct(self, "Ledger")
        period = Duration.seconds(ALARM_PERIOD_SECONDS)
        capacity = cluster.metric_serverless_database_capacity(period=period, statistic="Maximum")
        rotation_errors = {
            f"rotation{index}": cloudwatch.Metric(
                namespace="AWS/Lambda",
                metric_name="Errors",
                dimensions_map={"FunctionName": rotation_function_name(rotation)},
                statistic="Sum",
                period=period,
                label=rotation.node.id,
            )
            for index, rotation in enumerate(database.rotations)
        }
        rotation_failures = cloudwatch.MathExpression(
            expression=" + ".join(f"FILL({name}, 0)" for name in rotation_errors),
            using_metrics=dict(rotation_errors),
            label="Rotation function errors",
            period=period,
        )
        specs = [
            AlarmSpec(
                "DatabaseCapacityAtMax",
                capacity,
                database.max_capacity_acu,
                "the ledger ran at its maximum capacity (ACU) for 15 minutes",
                operator=_GE,
                periods=DATABASE_AT_MAX_PERIODS,
            ),
            AlarmSpec(
                "SecretRotationErrors",
                rotation_failures,
                1,
                "a database secret's rotation function failed",
                operator=_GE,
            ),
        ]
        alarms = [self.add_alarm(scope, spec, None) for spec in specs]
        self.dashboard.add_widgets(cloudwatch.TextWidget(markdown="## Ledger", width=24, height=1))
        self.dashboard.add_widgets(
            cloudwatch.GraphWidget(
                title="Ledger capacity (ACU)",
                left=[capacity],
                left_annotations=[
                    cloudwatch.HorizontalAnnotation(
                        value=database.max_capacity_acu, label="maximum"
                    )
                ],
                width=DASHBOARD_WIDGET_WIDTH,
                height=DASHBOARD_WIDGET_HEIGHT,
            ),
            self._graph("Secret rotation errors", list(rotation_errors.values())),
            cloudwatch.AlarmStatusWidget(
                title="Ledger alarms",
                alarms=list(alarms),
                width=DASHBOARD_WIDGET_WIDTH,
                height=DASHBOARD_WIDGET_HEIGHT,
            ),
        )

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

    def watch_discovery(self, discovery: Discovery) -> None:
        """Alarms and a dashboard row for one policy's discovery (docs/runbook.md)."""
        policy = discovery.policy
        assert policy.discovery is not None  # a Discovery exists only for such a policy
        scope = Construct(self, f"Discovery-{policy.name}")
        period = Duration.seconds(ALARM_PERIOD_SECONDS)
        errors = discovery.function.function.metric_errors(period=period)
        schedule_dlq = _visible(discovery.schedule.dead_letter_queue)
        lag_period, lag_periods = lag_alarm_window(policy.discovery.lag_alarm_seconds)
        lag = cloudwatch.Metric(
            namespace=METRICS_NAMESPACE,
            metric_name=Metric.DISCOVERY_LAG,
            dimensions_map={"service": SERVICE_NAME, "policy": policy.name},
            statistic="Maximum",
            period=Duration.seconds(lag_period),
        )
        specs = [
            AlarmSpec("DiscoveryErrors", errors, 0, "a discovery run failed"),
            AlarmSpec(
                "DiscoveryScheduleDeadLetters",
                schedule_dlq,
                0,
                "a scheduled discovery run was not delivered or failed all its retries",
            ),
            # Each run reports the seconds since its policy's last complete pass. No report for
            # the whole window (discovery stopped running) breaches too.
            AlarmSpec(
                "DiscoveryLag",
                lag,
                policy.discovery.lag_alarm_seconds,
                "no complete discovery pass within the lag threshold",
                periods=lag_periods,
                missing=cloudwatch.TreatMissingData.BREACHING,
            ),
        ]
        alarms = [self.add_alarm(scope, spec, policy) for spec in specs]
        self.dashboard.add_widgets(
            self._graph(
                f"{policy.name} discovery: rows",
                [
                    self._app_metric(policy.name, Metric.DISCOVERY_SCANNED, "Sum"),
                    self._app_metric(policy.name, Metric.DISCOVERY_INSERTED, "Sum"),
                    self._app_metric(policy.name, Metric.DISCOVERY_REJECTED, "Sum"),
                ],
            ),
            self._graph(f"{policy.name} discovery lag (s)", [lag]),
            cloudwatch.AlarmStatusWidget(
                title=f"{policy.name} discovery alarms",
                alarms=alarms,
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
        alarms = [self.add_alarm(scope, spec, policy) for spec in specs]
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


def _outcome_rate(
    attempts: dict[str, cloudwatch.Metric], outcome: OutcomeClass, period: Duration
) -> cloudwatch.MathExpression:
    """The share (%) of a period's calls that ended in `outcome`; 0 below MIN_CALLS_FOR_RATE."""
    total = " + ".join(f"FILL({name}, 0)" for name in attempts)
    return cloudwatch.MathExpression(
        expression=(
            f"IF(({total}) >= {MIN_CALLS_FOR_RATE}, 100 * FILL({outcome.value}, 0) / ({total}), 0)"
        ),
        using_metrics=dict(attempts),
        label=f"{outcome.value} (% of calls)",
        period=period,
    )


def slots_per_period(policy: Policy) -> float:
    """The slots one limiter scope offers in an alarm period, at the rate sweeper aims for."""
    return round(policy.quota.rate_per_second * ALARM_PERIOD_SECONDS, 6)


def rotation_function_name(rotation: secretsmanager.SecretRotation) -> str:
    """The hosted rotation function's name: CDK passes the construct's unique id, cut to 64."""
    return Names.unique_id(rotation)[-LAMBDA_FUNCTION_NAME_MAX:]


#: CloudWatch evaluates an alarm over at most a day of periods; the lag window is cut into this
#: many at most.
LAG_ALARM_MAX_PERIODS = 24


def lag_alarm_window(lag_seconds: int) -> tuple[int, int]:
    """(period, periods) of the lag alarm: together about `lag_seconds`, at most a day's worth
    of periods, each a whole number of minutes and at least the alarm period."""
    period = max(ALARM_PERIOD_SECONDS, math.ceil(lag_seconds / LAG_ALARM_MAX_PERIODS / 60) * 60)
    return period, max(1, math.ceil(lag_seconds / period))


def backlog_threshold(rate_per_second: float, queue_age_seconds: int) -> int:
    """The backlog the quota drains within the queue-age threshold: beyond it, age will follow."""
    return max(1, math.ceil(rate_per_second * queue_age_seconds))

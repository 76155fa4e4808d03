"""Small pure helpers the watchers share: metrics, graphs, the figures thresholds derive from."""

from __future__ import annotations

import math

from aws_cdk import Duration, Names
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_secretsmanager as secretsmanager
from aws_cdk import aws_sqs as sqs

from infra.function import SERVICE_NAME
from infra.observability.base import (
    ALARM_PERIOD_SECONDS,
    DASHBOARD_WIDGET_HEIGHT,
    DASHBOARD_WIDGET_WIDTH,
)
from sweeper.config import Policy
from sweeper.models import OutcomeClass
from sweeper.observability import METRICS_NAMESPACE

#: Outcome-class rates are judged only from this many calls a period (below it, one 503 would be
#: a 100 % rate).
MIN_CALLS_FOR_RATE = 20
#: Lambda's limit on a function name (the hosted rotation's name is its construct id, cut to it).
LAMBDA_FUNCTION_NAME_MAX = 64
#: CloudWatch evaluates an alarm over at most a day of periods; the lag window is cut into this
#: many at most.
LAG_ALARM_MAX_PERIODS = 24


def app_metric(
    policy_name: str, name: str, statistic: str, *, period_seconds: int = ALARM_PERIOD_SECONDS
) -> cloudwatch.Metric:
    """One of sweeper's own metrics (Powertools, namespace `Sweeper`) for one policy."""
    return cloudwatch.Metric(
        namespace=METRICS_NAMESPACE,
        metric_name=name,
        dimensions_map={"service": SERVICE_NAME, "policy": policy_name},
        statistic=statistic,
        period=Duration.seconds(period_seconds),
    )


def graph(title: str, metrics: list[cloudwatch.IMetric]) -> cloudwatch.GraphWidget:
    """A dashboard graph of the standard size."""
    return cloudwatch.GraphWidget(
        title=title, left=metrics, width=DASHBOARD_WIDGET_WIDTH, height=DASHBOARD_WIDGET_HEIGHT
    )


def alarm_status(title: str, alarms: list[cloudwatch.Alarm]) -> cloudwatch.AlarmStatusWidget:
    """A dashboard widget of the standard size showing the state of `alarms`."""
    return cloudwatch.AlarmStatusWidget(
        title=title, alarms=alarms, width=DASHBOARD_WIDGET_WIDTH, height=DASHBOARD_WIDGET_HEIGHT
    )


def visible(queue: sqs.IQueue) -> cloudwatch.Metric:
    """The most messages visible on `queue` in an alarm period."""
    return queue.metric_approximate_number_of_messages_visible(
        period=Duration.seconds(ALARM_PERIOD_SECONDS), statistic="Maximum"
    )


def outcome_rate(
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


def lag_alarm_window(lag_seconds: int) -> tuple[int, int]:
    """(period, periods) of the lag alarm: together about `lag_seconds`, at most a day's worth
    of periods, each a whole number of minutes and at least the alarm period."""
    period = max(ALARM_PERIOD_SECONDS, math.ceil(lag_seconds / LAG_ALARM_MAX_PERIODS / 60) * 60)
    return period, max(1, math.ceil(lag_seconds / period))


def backlog_threshold(rate_per_second: float, queue_age_seconds: int) -> int:
    """The backlog the quota drains within the queue-age threshold: beyond it, age will follow."""
    return max(1, math.ceil(rate_per_second * queue_age_seconds))

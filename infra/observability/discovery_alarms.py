"""The alarms and the dashboard row of one policy's discovery (docs/runbook.md)."""

from __future__ import annotations

from aws_cdk import Duration
from aws_cdk import aws_cloudwatch as cloudwatch
from constructs import Construct

from infra.discovery import Discovery
from infra.observability.base import ALARM_PERIOD_SECONDS, AlarmBoard, AlarmSpec, PolicyHome
from infra.observability.helpers import (
    alarm_status,
    app_metric,
    graph,
    lag_alarm_window,
    visible,
)
from sweeper.observability import Metric


def watch_discovery(board: AlarmBoard, discovery: Discovery, home: PolicyHome) -> None:
    """Alarms (under `Discovery-<policy>`) and a dashboard row for one policy's discovery."""
    policy = discovery.policy
    assert policy.discovery is not None  # a Discovery exists only for such a policy
    scope = Construct(home, f"Discovery-{policy.name}")
    period = Duration.seconds(ALARM_PERIOD_SECONDS)
    lag_period, lag_periods = lag_alarm_window(policy.discovery.lag_alarm_seconds)
    lag = app_metric(policy.name, Metric.DISCOVERY_LAG, "Maximum", period_seconds=lag_period)
    specs = [
        AlarmSpec(
            "DiscoveryErrors",
            discovery.function.function.metric_errors(period=period),
            0,
            "a discovery run failed",
        ),
        AlarmSpec(
            "DiscoveryScheduleDeadLetters",
            visible(discovery.schedule.dead_letter_queue),
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
    alarms = board.add_alarms(scope, specs, policy)
    home.dashboard.add_widgets(
        graph(
            f"{policy.name} discovery: rows",
            [
                app_metric(policy.name, Metric.DISCOVERY_SCANNED, "Sum"),
                app_metric(policy.name, Metric.DISCOVERY_INSERTED, "Sum"),
                app_metric(policy.name, Metric.DISCOVERY_REJECTED, "Sum"),
            ],
        ),
        graph(f"{policy.name} discovery lag (s)", [lag]),
        alarm_status(f"{policy.name} discovery alarms", alarms),
    )

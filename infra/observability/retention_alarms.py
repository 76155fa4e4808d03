"""The alarms and the dashboard row of one policy's scheduled prune."""

from __future__ import annotations

from aws_cdk import Duration
from constructs import Construct

from infra.observability.base import ALARM_PERIOD_SECONDS, GE, AlarmBoard, AlarmSpec, PolicyHome
from infra.observability.helpers import alarm_status, app_metric, graph, visible
from infra.retention import Retention
from sweeper.observability import Metric

#: The prune runs about daily: its "falls behind" alarm looks at whole days, two in a row (one
#: incomplete run, e.g. the first after a long pause, is a catch-up, not an incident).
PRUNE_ALARM_PERIOD_SECONDS = 86_400
PRUNE_BEHIND_EVALUATION_PERIODS = 2


def watch_retention(board: AlarmBoard, retention: Retention, home: PolicyHome) -> None:
    """Alarms (under `Retention-<policy>`) and a dashboard row for one policy's prune."""
    policy = retention.policy
    scope = Construct(home, f"Retention-{policy.name}")
    period = Duration.seconds(ALARM_PERIOD_SECONDS)
    incomplete = app_metric(
        policy.name, Metric.PRUNE_INCOMPLETE, "Sum", period_seconds=PRUNE_ALARM_PERIOD_SECONDS
    )
    deleted = [
        app_metric(policy.name, name, "Sum")
        for name in (
            Metric.PRUNED_JOBS,
            Metric.PRUNED_JOB_EVENTS,
            Metric.PRUNED_RUNS,
            Metric.PRUNED_OPERATOR_ACTIONS,
        )
    ]
    errors = retention.function.function.metric_errors(period=period)
    specs = [
        AlarmSpec(
            "PruneBehind",
            incomplete,
            1,
            "the scheduled prune ran out of budget with old rows left, two days running: "
            "retention falls behind",
            operator=GE,
            periods=PRUNE_BEHIND_EVALUATION_PERIODS,
        ),
        AlarmSpec("PruneErrors", errors, 0, "a scheduled prune run failed"),
        AlarmSpec(
            "PruneScheduleDeadLetters",
            visible(retention.schedule.dead_letter_queue),
            0,
            "a scheduled prune run was not delivered or failed all its retries",
        ),
    ]
    alarms = board.add_alarms(scope, specs, policy)
    home.dashboard.add_widgets(
        graph(f"{policy.name} prune: rows deleted", list(deleted)),
        graph(f"{policy.name} prune: incomplete runs, errors", [incomplete, errors]),
        alarm_status(f"{policy.name} prune alarms", alarms),
    )

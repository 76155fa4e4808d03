"""The alarms and the dashboard row of the ledger a new cluster holds, and of its secrets."""

from __future__ import annotations

from aws_cdk import Duration
from aws_cdk import aws_cloudwatch as cloudwatch
from constructs import Construct

from infra.database import Database
from infra.observability.base import (
    ALARM_PERIOD_SECONDS,
    DASHBOARD_WIDGET_HEIGHT,
    DASHBOARD_WIDGET_WIDTH,
    GE,
    AlarmBoard,
    AlarmSpec,
)
from infra.observability.helpers import alarm_status, graph, rotation_function_name

#: The ledger sits at its maximum capacity this many periods running.
DATABASE_AT_MAX_PERIODS = 3


def watch_database(board: AlarmBoard, database: Database) -> None:
    """Alarms (under `Ledger`) and a dashboard row; none for an imported cluster."""
    cluster = database.cluster
    if cluster is None or database.max_capacity_acu is None:
        return  # an imported cluster: its owner watches its capacity and its rotation
    scope = Construct(board, "Ledger")
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
            operator=GE,
            periods=DATABASE_AT_MAX_PERIODS,
        ),
        AlarmSpec(
            "SecretRotationErrors",
            rotation_failures,
            1,
            "a database secret's rotation function failed",
            operator=GE,
        ),
    ]
    alarms = board.add_alarms(scope, specs, None)
    board.shared_rows.append([cloudwatch.TextWidget(markdown="## Ledger", width=24, height=1)])
    board.shared_rows.append(
        [
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
            graph("Secret rotation errors", list(rotation_errors.values())),
            alarm_status("Ledger alarms", alarms),
        ]
    )

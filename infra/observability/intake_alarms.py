"""The alarms and the dashboard rows of one policy's intake (queue, DLQ, function, webhook)."""

from __future__ import annotations

from aws_cdk import Duration
from constructs import Construct

from infra.intake import Intake
from infra.observability.base import ALARM_PERIOD_SECONDS, AlarmBoard, AlarmSpec, PolicyHome
from infra.observability.helpers import alarm_status, app_metric, graph, visible
from sweeper.observability import Metric


def watch_intake(board: AlarmBoard, intake: Intake, home: PolicyHome) -> None:
    """Alarms (under `Intake-<policy>`) and dashboard rows for one policy's intake."""
    policy = intake.policy
    scope = Construct(home, f"Intake-{policy.name}")
    period = Duration.seconds(ALARM_PERIOD_SECONDS)
    age = intake.queue.metric_approximate_age_of_oldest_message(period=period, statistic="Maximum")
    dead = visible(intake.dead_letter_queue)
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
        AlarmSpec(
            "IntakeErrors",
            intake.function.function.metric_errors(period=period),
            0,
            "intake invocations failed as a whole",
        ),
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
    alarms = board.add_alarms(scope, specs, policy)
    home.dashboard.add_widgets(
        graph("Intake queue: age of oldest (s)", [age]),
        graph("Intake DLQ: visible", [dead]),
        graph(
            "Intake: rejected messages", [app_metric(policy.name, Metric.INTAKE_REJECTED, "Sum")]
        ),
    )
    home.dashboard.add_widgets(alarm_status(f"{policy.name} intake alarms", alarms))

"""Alarms: what an operator must act on, each notifying the topic; a dashboard."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from infra.observability import backlog_threshold
from tests.infra.conftest import Synth

ALARMS = (
    "QueueAge",
    "QueueBacklog",
    "DeadLetters",
    "ConsumerThrottles",
    "ConsumerErrors",
    "ProducerErrors",
    "ProducerScheduleDeadLetters",
    "OldestEligibleAge",
    "TerminalFailures",
    "AuthCircuitOpen",
    "MismatchedMessages",
    "RedriveErrors",
    "RedriveScheduleDeadLetters",
)
#: Per policy with its webhook on (infra/intake.py): under Observability/Intake-<policy>.
INTAKE_ALARMS = ("IntakeDeadLetters", "IntakeAge", "IntakeErrors", "WebhookErrors")


def _alarm(synth: Synth, policy: str, name: str) -> dict[str, Any]:
    props: dict[str, Any] = synth.resource(
        f"^ObservabilityPolicy{policy.replace('-', '')}{name}[0-9A-F]{{8}}$",
        "AWS::CloudWatch::Alarm",
    )["Properties"]
    return props


def test_every_policy_has_every_alarm_and_each_notifies_on_alarm_and_ok(proxied: Synth) -> None:
    topic = proxied.logical_id("Observability/AlarmTopic/Resource")
    for policy in proxied.config.policies:
        for name in ALARMS:
            alarm = _alarm(proxied, policy.name, name)
            assert alarm["AlarmActions"] == [{"Ref": topic}]
            assert alarm["OKActions"] == [{"Ref": topic}]
            assert alarm["AlarmName"] == f"Sweeper-{policy.name}-{name}"
        for name in INTAKE_ALARMS:
            intake: dict[str, Any] = proxied.resource(
                f"^ObservabilityIntake{policy.name.replace('-', '')}{name}[0-9A-F]{{8}}$",
                "AWS::CloudWatch::Alarm",
            )["Properties"]
            assert intake["AlarmActions"] == [{"Ref": topic}]
            assert intake["OKActions"] == [{"Ref": topic}]
            assert intake["AlarmName"] == f"Sweeper-{policy.name}-{name}"
    proxied.template.resource_count_is(
        "AWS::CloudWatch::Alarm",
        (len(ALARMS) + len(INTAKE_ALARMS)) * len(proxied.config.policies),
    )


def test_queue_alarms_use_the_policy_thresholds(proxied: Synth) -> None:
    for policy in proxied.config.policies:
        age = _alarm(proxied, policy.name, "QueueAge")
        assert age["MetricName"] == "ApproximateAgeOfOldestMessage"
        assert age["Threshold"] == policy.alarms.queue_age_seconds
        backlog = _alarm(proxied, policy.name, "QueueBacklog")
        assert backlog["MetricName"] == "ApproximateNumberOfMessagesVisible"
        expected = backlog_threshold(policy.quota.rate_per_second, policy.alarms.queue_age_seconds)
        assert backlog["Threshold"] == expected


def test_any_dead_letter_or_throttle_alarms(default: Synth) -> None:
    for name, metric in (
        ("DeadLetters", "ApproximateNumberOfMessagesVisible"),
        ("ProducerScheduleDeadLetters", "ApproximateNumberOfMessagesVisible"),
        ("ConsumerThrottles", "Throttles"),
        ("ConsumerErrors", "Errors"),
        ("ProducerErrors", "Errors"),
    ):
        alarm = _alarm(default, "exports", name)
        assert alarm["MetricName"] == metric
        assert alarm["Threshold"] == 0
        assert alarm["ComparisonOperator"] == "GreaterThanThreshold"


def test_application_metrics_are_read_from_the_sweeper_namespace(proxied: Synth) -> None:
    for policy in proxied.config.policies:
        for name, metric, threshold in (
            (
                "OldestEligibleAge",
                "OldestEligibleAgeSeconds",
                policy.alarms.oldest_eligible_age_seconds,
            ),
            ("TerminalFailures", "TerminalFailures", policy.alarms.terminal_failures),
            ("AuthCircuitOpen", "AuthCircuitOpen", 1),
            ("MismatchedMessages", "MismatchedMessages", 1),
        ):
            alarm = _alarm(proxied, policy.name, name)
            assert alarm["Namespace"] == "Sweeper"
            assert alarm["MetricName"] == metric
            assert alarm["Threshold"] == threshold
            assert sorted(alarm["Dimensions"], key=lambda d: d["Name"]) == [
                {"Name": "policy", "Value": policy.name},
                {"Name": "service", "Value": "sweeper"},
            ]


def test_alarm_topic_mails_the_operator_when_asked(proxied: Synth, default: Synth) -> None:
    proxied.template.has_resource_properties(
        "AWS::SNS::Subscription", {"Protocol": "email", "Endpoint": "ops@example.com"}
    )
    default.template.resource_count_is("AWS::SNS::Subscription", 0)


def test_dashboard_shows_every_policy(proxied: Synth) -> None:
    (dashboard,) = proxied.resources("AWS::CloudWatch::Dashboard").values()
    body = str(dashboard["Properties"]["DashboardBody"])
    for policy in proxied.config.policies:
        assert f"## {policy.name}" in body


@given(
    rate=st.floats(min_value=0.001, max_value=10_000, allow_nan=False),
    age=st.integers(min_value=1, max_value=86_400),
)
def test_backlog_threshold_is_what_the_quota_drains_within_the_age_threshold(
    rate: float, age: int
) -> None:
    threshold = backlog_threshold(rate, age)
    assert threshold >= 1
    assert threshold >= rate * age  # below it, the age alarm would not follow
    assert threshold == 1 or threshold < rate * age + 1  # the smallest such whole number

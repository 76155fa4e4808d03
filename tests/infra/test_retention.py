"""Per policy: the scheduled prune, its least-privilege role in the VPC, and its alarms."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from infra.function import VPC_ACCESS_ACTIONS
from infra.observability import PRUNE_ALARM_PERIOD_SECONDS, PRUNE_BEHIND_EVALUATION_PERIODS
from infra.queues import DEAD_LETTER_RETENTION_DAYS
from infra.retention import PRUNE_RESERVED_CONCURRENCY, prune_timeout_seconds
from sweeper.config import MIN_SETTLED_JOB_RETENTION_DAYS, Policy
from tests.infra.conftest import Synth

PRUNE_ALARMS = ("PruneBehind", "PruneErrors", "PruneScheduleDeadLetters")


def _prefix(policy_name: str) -> str:
    return f"Retention{policy_name.replace('-', '')}"


def _prune_function(synth: Synth, policy_name: str) -> dict[str, Any]:
    return synth.function(f"^{_prefix(policy_name)}Function[0-9A-F]{{8}}$")


def _role_statements(synth: Synth, role_id: str) -> list[dict[str, Any]]:
    statements: list[dict[str, Any]] = []
    for policy in synth.resources("AWS::IAM::Policy").values():
        if {"Ref": role_id} in policy["Properties"]["Roles"]:
            statements += policy["Properties"]["PolicyDocument"]["Statement"]
    return statements


def _actions(statement: dict[str, Any]) -> set[str]:
    action = statement["Action"]
    return set(action if isinstance(action, list) else [action])


def test_each_policy_has_a_prune_in_the_vpc_sized_by_its_retention(proxied: Synth) -> None:
    for policy in proxied.config.policies:
        props = _prune_function(proxied, policy.name)["Properties"]
        assert props["Handler"] == "app.handler"
        assert props["Timeout"] == prune_timeout_seconds(policy)
        assert props["Timeout"] > policy.retention.budget_seconds
        assert props["ReservedConcurrentExecutions"] == PRUNE_RESERVED_CONCURRENCY
        assert props["VpcConfig"]["SubnetIds"]
        variables = props["Environment"]["Variables"]
        assert Policy.model_validate_json(variables["SWEEPER_POLICY"]).retention == (
            policy.retention
        )
        assert "SWEEPER_DATABASE_SECRET_ARN" in variables
        # it deletes ledger rows and nothing else: no queue, no table
        assert not {"SWEEPER_QUEUE_URL", "SWEEPER_DLQ_URL", "SWEEPER_LIMITER_TABLE"} & set(
            variables
        )


def test_the_prune_runs_on_the_policy_retention_schedule_with_a_dead_letter_queue(
    proxied: Synth,
) -> None:
    schedules = {p.name: p.retention.schedule for p in proxied.config.policies}
    assert schedules == {"exports": "rate(1 day)", "stale-sessions": "cron(30 3 * * ? *)"}
    for policy in proxied.config.policies:
        props = proxied.resource(
            f"^{_prefix(policy.name)}Schedule[0-9A-F]{{8}}$", "AWS::Scheduler::Schedule"
        )["Properties"]
        assert props["ScheduleExpression"] == policy.retention.schedule
        assert props["ScheduleExpressionTimezone"] == policy.timezone
        function_id = proxied.logical_id(f"Retention-{policy.name}/Function/Function/Resource")
        assert props["Target"]["Arn"] == {"Fn::GetAtt": [function_id, "Arn"]}
        dlq_id = proxied.logical_id(f"Retention-{policy.name}/Schedule/DeadLetterQueue/Resource")
        assert props["Target"]["DeadLetterConfig"] == {"Arn": {"Fn::GetAtt": [dlq_id, "Arn"]}}


def test_the_prune_role_reads_only_the_ledger_credential(every_variant: Synth) -> None:
    for policy in every_variant.config.policies:
        role_id = _prune_function(every_variant, policy.name)["Properties"]["Role"]["Fn::GetAtt"][0]
        statements = _role_statements(every_variant, role_id)
        granted = set().union(*(_actions(s) for s in statements))
        services = {action.split(":")[0] for action in granted}
        assert services == {"ec2", "logs", "secretsmanager", "sqs", "xray"}
        # SQS only to report a failed run to its own schedule's dead-letter queue
        dlq_id = every_variant.logical_id(
            f"Retention-{policy.name}/Schedule/DeadLetterQueue/Resource"
        )
        for statement in statements:
            if any(a.startswith("sqs:") for a in _actions(statement)):
                assert _actions(statement) <= {
                    "sqs:SendMessage",
                    "sqs:GetQueueAttributes",
                    "sqs:GetQueueUrl",
                }
                assert statement["Resource"] == {"Fn::GetAtt": [dlq_id, "Arn"]}
        assert {a for a in granted if a.startswith("ec2:")} == set(VPC_ACCESS_ACTIONS)
        assert {a for a in granted if a.startswith("secretsmanager:")} == {
            "secretsmanager:GetSecretValue",
            "secretsmanager:DescribeSecret",
        }
        for statement in statements:
            if _actions(statement) & {"secretsmanager:GetSecretValue"}:
                assert statement["Resource"] != "*"


def test_the_prune_reaches_the_database_port_and_https_only(proxied: Synth) -> None:
    for policy in proxied.config.policies:
        group_id = proxied.logical_id(f"Retention-{policy.name}/Function/SecurityGroup/Resource")
        egress = [
            rule
            for rule in proxied.resources("AWS::EC2::SecurityGroupEgress").values()
            if rule["Properties"]["GroupId"] == {"Fn::GetAtt": [group_id, "GroupId"]}
        ]
        inline = proxied.template_json["Resources"][group_id]["Properties"].get(
            "SecurityGroupEgress", []
        )
        ports = sorted(
            {r["Properties"]["FromPort"] for r in egress} | {r["FromPort"] for r in inline}
        )
        assert ports == [443, 5432]


def test_every_policy_has_the_prune_alarms_notifying_the_topic(proxied: Synth) -> None:
    topic = proxied.logical_id("Observability/AlarmTopic/Resource")
    for policy in proxied.config.policies:
        for name in PRUNE_ALARMS:
            alarm = proxied.resource(
                f"^ObservabilityRetention{policy.name.replace('-', '')}{name}[0-9A-F]{{8}}$",
                "AWS::CloudWatch::Alarm",
            )["Properties"]
            assert alarm["AlarmName"] == f"Sweeper-{policy.name}-{name}"
            assert alarm["AlarmActions"] == [{"Ref": topic}]
            assert alarm["OKActions"] == [{"Ref": topic}]


def test_the_prune_behind_alarm_reads_its_own_metric_over_whole_days(proxied: Synth) -> None:
    for policy in proxied.config.policies:
        alarm = proxied.resource(
            f"^ObservabilityRetention{policy.name.replace('-', '')}PruneBehind[0-9A-F]{{8}}$",
            "AWS::CloudWatch::Alarm",
        )["Properties"]
        assert (alarm["Namespace"], alarm["MetricName"]) == ("Sweeper", "PruneIncomplete")
        assert {d["Name"]: d["Value"] for d in alarm["Dimensions"]} == {
            "service": "sweeper",
            "policy": policy.name,
        }
        assert alarm["Period"] == PRUNE_ALARM_PERIOD_SECONDS
        assert alarm["EvaluationPeriods"] == PRUNE_BEHIND_EVALUATION_PERIODS
        assert alarm["DatapointsToAlarm"] == PRUNE_BEHIND_EVALUATION_PERIODS
        # CloudWatch's limit for periods of an hour or more: seven days in all
        assert alarm["Period"] * alarm["EvaluationPeriods"] <= 7 * 86_400
        assert (alarm["Statistic"], alarm["Threshold"]) == ("Sum", 1)
        assert alarm["ComparisonOperator"] == "GreaterThanOrEqualToThreshold"


def test_a_policy_with_retention_disabled_gets_no_prune(
    synth_variant: Callable[[dict[str, Any]], Synth], tmp_path_factory: pytest.TempPathFactory
) -> None:
    config: Path = tmp_path_factory.mktemp("retention") / "sweeper.toml"
    config.write_text(
        '[[policies]]\nname = "exports"\n\n[policies.retention]\nenabled = false\n',
        encoding="utf-8",
    )
    synth = synth_variant({"config": str(config)})
    assert not [fid for fid in synth.python_functions() if fid.startswith("Retention")]
    assert not [aid for aid in synth.resources("AWS::CloudWatch::Alarm") if "Retention" in aid]


def test_settled_jobs_are_kept_at_least_as_long_as_a_dead_letter() -> None:
    # a dead letter redriven on its last day still finds its job in the ledger
    assert MIN_SETTLED_JOB_RETENTION_DAYS >= DEAD_LETTER_RETENTION_DAYS

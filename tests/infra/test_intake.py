"""Per policy: intake queue + DLQ, intake function, EventBridge rules, webhook and its secret."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.infra.conftest import Synth
from tests.infra.policy_eval import as_list, decision, iam_request, service_request
from tests.infra.test_security import _function_statements

FIXTURES = Path(__file__).parent / "fixtures"


@pytest.fixture(scope="module")
def events(synth_variant: Callable[[dict[str, Any]], Synth]) -> Synth:
    return synth_variant({"config": str(FIXTURES / "intake_events.toml")})


def _of_type(synth: Synth, kind: str) -> dict[str, dict[str, Any]]:
    return {k: v for k, v in synth.template_json["Resources"].items() if v["Type"] == kind}


def _path(resource: dict[str, Any]) -> str:
    return str(resource.get("Metadata", {}).get("aws:cdk:path", ""))


def test_the_intake_queue_has_a_dlq_and_feeds_the_intake_function_with_partial_responses(
    default: Synth,
) -> None:
    queues = {
        _path(v): v for v in _of_type(default, "AWS::SQS::Queue").values() if "Intake-" in _path(v)
    }
    queue = next(v for p, v in queues.items() if p.endswith("/Queue/Resource"))
    assert queue["Properties"]["RedrivePolicy"]["maxReceiveCount"] == 5
    assert queue["Properties"]["SqsManagedSseEnabled"] is True
    mappings = [
        m
        for m in _of_type(default, "AWS::Lambda::EventSourceMapping").values()
        if "Intake-" in _path(m)
    ]
    assert len(mappings) == 1
    assert mappings[0]["Properties"]["FunctionResponseTypes"] == ["ReportBatchItemFailures"]


def test_the_intake_function_may_shorten_the_visibility_of_its_own_queue_messages(
    default: Synth,
) -> None:
    # A message that met an unreachable ledger goes back to the intake queue in seconds: the
    # function knows its queue's URL and may change its messages' visibility (and only there).
    function = "^IntakeexportsFunction[0-9A-F]{8}$"
    queue_id = default.logical_id("Intake-exports/Queue/Resource")
    assert default.environment(function)["SWEEPER_INTAKE_QUEUE_URL"] == {"Ref": queue_id}
    granting = [
        s
        for s in _function_statements(default, function)
        if "sqs:ChangeMessageVisibility" in as_list(s["Action"])
    ]
    assert granting
    assert all(queue_id in json.dumps(s["Resource"]) for s in granting)
    assert all("DeadLetter" not in json.dumps(s["Resource"]) for s in granting)


def test_the_webhook_is_a_public_function_url_bounded_by_reserved_concurrency(
    default: Synth,
) -> None:
    (url,) = [
        u
        for u in _of_type(default, "AWS::Lambda::Url").values()
        if "OperatorApi" not in json.dumps(u)  # the operator API's, IAM only
    ]
    assert url["Properties"]["AuthType"] == "NONE"
    webhook = default.function("IntakeexportsWebhookFunction")
    assert webhook["Properties"]["ReservedConcurrentExecutions"] == 5
    assert "WebhookUrl" in "".join(default.template_json["Outputs"])


def test_the_webhook_has_no_way_to_the_database(default: Synth) -> None:
    env = default.environment("IntakeexportsWebhookFunction")
    assert env["SWEEPER_NEEDS_DATABASE"] == "false"
    assert not [k for k in env if k.startswith("SWEEPER_DATABASE")]
    policies = json.dumps(
        [p for p in _of_type(default, "AWS::IAM::Policy").values() if "/Webhook/" in _path(p)]
    )
    assert '"rds:' not in policies
    assert '"rds-db:' not in policies
    assert "DatabaseSecret" not in policies
    assert "ReplayTable" in policies
    assert "WebhookSecret" in policies
    assert "dynamodb:Scan" not in policies
    assert "dynamodb:Query" not in policies


def test_intake_alarms_watch_its_dlq_and_age(default: Synth) -> None:
    names = json.dumps(
        [a["Properties"]["AlarmName"] for a in _of_type(default, "AWS::CloudWatch::Alarm").values()]
    )
    for alarm in ("IntakeDeadLetters", "IntakeAge", "IntakeErrors", "WebhookErrors"):
        assert f"exports-{alarm}" in names


def test_each_configured_pattern_is_a_rule_targeting_the_intake_queue(events: Synth) -> None:
    rules = _of_type(events, "AWS::Events::Rule")
    patterns = sorted(
        json.dumps(r["Properties"]["EventPattern"], sort_keys=True) for r in rules.values()
    )
    assert patterns == [
        json.dumps(
            {"detail-type": ["ExportExpired"], "source": ["com.example.exports"]}, sort_keys=True
        ),
        json.dumps({"source": ["com.example.retention"]}, sort_keys=True),
    ]
    for rule in rules.values():
        (target,) = rule["Properties"]["Targets"]
        assert "IntakeexportsQueue" in json.dumps(target["Arn"])


def test_a_policy_without_webhook_gets_no_url_secret_or_replay_table(events: Synth) -> None:
    paths = [_path(v) for v in events.template_json["Resources"].values()]
    assert any("Intake-uploads/Queue" in p for p in paths)
    assert not any(
        "Intake-uploads/Webhook" in p or "Intake-uploads/ReplayTable" in p for p in paths
    )
    webhook_urls = [
        u
        for u in _of_type(events, "AWS::Lambda::Url").values()
        if "OperatorApi" not in json.dumps(u)
    ]
    assert len(webhook_urls) == 1


def test_cdk_nag_is_clean_with_event_rules(events: Synth) -> None:
    assert events.validation_error is None, events.validation_error
    nag = [p for p in events.report["pluginReports"] if p["pluginName"] == "AwsSolutions"]
    assert [v for p in nag for v in p.get("violations", [])] == []


# --- Who may send to the intake queue -------------------------------------------------------

SEND = "sqs:SendMessage"


def _iam_request(principal_arn: Any) -> dict[str, Any]:
    return iam_request(SEND, principal_arn)


def _service_request(service: str, source_arn: Any) -> dict[str, Any]:
    return service_request(SEND, service, source_arn)


def _intake_queue_statements(synth: Synth) -> tuple[list[dict[str, Any]], str]:
    queue = synth.logical_id("Intake-exports/Queue/Resource")
    (policy,) = [
        p
        for p in _of_type(synth, "AWS::SQS::QueuePolicy").values()
        if {"Ref": queue} in p["Properties"]["Queues"]
    ]
    return policy["Properties"]["PolicyDocument"]["Statement"], queue


def _role_arn(synth: Synth, path_suffix: str) -> dict[str, Any]:
    return {"Fn::GetAtt": [synth.logical_id(path_suffix), "Arn"]}


def test_only_the_webhook_the_sender_role_and_the_policys_rules_may_send_to_the_intake_queue(
    events: Synth,
) -> None:
    statements, _ = _intake_queue_statements(events)
    webhook = _role_arn(events, "Intake-exports/Webhook/Role/Resource")
    sender = _role_arn(events, "IntakeSender/Role/Resource")
    rules = [
        {"Fn::GetAtt": [events.logical_id(f"Intake-exports/Rule{i}/Resource"), "Arn"]}
        for i in (0, 1)
    ]
    other_rule = "arn:aws:events:eu-west-1:111122223333:rule/someone-elses-rule"

    # The senders pass, and EventBridge delivering for either of the policy's rules is allowed.
    assert decision(statements, _iam_request(webhook)) == "allow"
    assert decision(statements, _iam_request(sender)) == "allow"
    for rule in rules:
        assert decision(statements, _service_request("events.amazonaws.com", rule)) == "allow"
    # Anyone else of the account, however broad their identity policy, is denied ...
    intake_function = _role_arn(events, "Intake-exports/Function/Role/Resource")
    assert decision(statements, _iam_request(intake_function)) == "deny"
    assert decision(statements, _iam_request("arn:aws:iam::111122223333:role/Admin")) == "deny"
    # ... and so is EventBridge for any other rule, or another service, or no source at all.
    assert decision(statements, _service_request("events.amazonaws.com", other_rule)) == "deny"
    topic = "arn:aws:sns:eu-west-1:111122223333:some-topic"
    assert decision(statements, _service_request("sns.amazonaws.com", topic)) == "deny"
    assert decision(statements, _service_request("events.amazonaws.com", None)) == "deny"


def test_without_rules_or_webhook_no_service_and_only_the_sender_role_may_send(
    events: Synth,
) -> None:
    # The uploads policy has no webhook and no event patterns.
    queue = events.logical_id("Intake-uploads/Queue/Resource")
    (policy,) = [
        p
        for p in _of_type(events, "AWS::SQS::QueuePolicy").values()
        if {"Ref": queue} in p["Properties"]["Queues"]
    ]
    statements = policy["Properties"]["PolicyDocument"]["Statement"]
    sender = _role_arn(events, "IntakeSender/Role/Resource")
    webhook = _role_arn(events, "Intake-exports/Webhook/Role/Resource")
    rule = {"Fn::GetAtt": [events.logical_id("Intake-exports/Rule0/Resource"), "Arn"]}
    assert decision(statements, _iam_request(sender)) == "allow"
    assert decision(statements, _iam_request(webhook)) == "deny"
    assert decision(statements, _service_request("events.amazonaws.com", rule)) == "deny"


def test_the_sender_role_may_send_to_the_intake_queues_and_read_the_stack_only(
    events: Synth,
) -> None:
    role = events.logical_id("IntakeSender/Role/Resource")
    trust = events.template_json["Resources"][role]["Properties"]["AssumeRolePolicyDocument"]
    assert "root" in json.dumps(trust["Statement"][0]["Principal"])  # this account, not "*"
    granted = [
        s
        for p in _of_type(events, "AWS::IAM::Policy").values()
        if {"Ref": role} in p["Properties"]["Roles"]
        for s in p["Properties"]["PolicyDocument"]["Statement"]
    ]
    actions = {a for s in granted for a in as_list(s["Action"])}
    assert SEND in actions
    assert "cloudformation:DescribeStacks" in actions
    assert not [a for a in actions if a.endswith("*")]
    assert all(s["Resource"] != "*" for s in granted)
    assert "IntakeSenderRoleArn" in events.template_json["Outputs"]

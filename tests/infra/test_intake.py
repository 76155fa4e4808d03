"""Per policy: intake queue + DLQ, intake function, EventBridge rules, webhook and its secret."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.infra.conftest import Synth

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


def test_the_webhook_is_a_public_function_url_bounded_by_reserved_concurrency(
    default: Synth,
) -> None:
    (url,) = _of_type(default, "AWS::Lambda::Url").values()
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
    assert len(_of_type(events, "AWS::Lambda::Url")) == 1


def test_cdk_nag_is_clean_with_event_rules(events: Synth) -> None:
    assert events.validation_error is None, events.validation_error
    nag = [p for p in events.report["pluginReports"] if p["pluginName"] == "AwsSolutions"]
    assert [v for p in nag for v in p.get("violations", [])] == []

"""The EventBridge door: intake rules listen on the stack's own bus, whose policy names who may
put events there; everyone else, in this account too, meets an explicit Deny."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from aws_cdk import App

from infra.options import DeploymentOptions
from sweeper.errors import ConfigError
from tests.infra.conftest import Synth
from tests.infra.policy_eval import decision, iam_request, service_request

FIXTURES = Path(__file__).parent / "fixtures"
PUT = "events:PutEvents"
LISTED = ("arn:aws:iam::111122223333:role/exports-app", "arn:aws:iam::444455556666:role/partner")
ADMIN = "arn:aws:iam::111122223333:role/Admin"


@pytest.fixture(scope="module")
def events(synth_variant: Callable[[dict[str, Any]], Synth]) -> Synth:
    return synth_variant({"config": str(FIXTURES / "intake_events.toml")})


@pytest.fixture(scope="module")
def listed(synth_variant: Callable[[dict[str, Any]], Synth]) -> Synth:
    return synth_variant(
        {"config": str(FIXTURES / "intake_events.toml"), "intake_event_senders": ",".join(LISTED)}
    )


def _bus_id(synth: Synth) -> str:
    (bus,) = synth.resources("AWS::Events::EventBus")
    return bus


def _bus_statements(synth: Synth) -> list[dict[str, Any]]:
    bus = _bus_id(synth)
    return [
        policy["Properties"]["Statement"]
        for policy in synth.resources("AWS::Events::EventBusPolicy").values()
        if policy["Properties"]["EventBusName"] == {"Ref": bus}
    ]


def _sender_role(synth: Synth) -> dict[str, Any]:
    return {"Fn::GetAtt": [synth.logical_id("IntakeSender/Role/Resource"), "Arn"]}


def test_the_intake_rules_listen_on_the_stacks_own_bus_not_the_default_bus(events: Synth) -> None:
    bus = _bus_id(events)
    assert events.template_json["Resources"][bus]["Properties"]["Name"] == "Sweeper-intake"
    rules = events.resources("AWS::Events::Rule")
    assert len(rules) == 2
    for rule in rules.values():
        assert rule["Properties"]["EventBusName"] == {"Ref": bus}


def test_an_output_names_the_intake_bus(events: Synth) -> None:
    outputs = events.template_json["Outputs"]
    assert outputs["IntakeEventBusName"]["Value"] == {"Ref": _bus_id(events)}
    assert outputs["IntakeEventBusArn"]["Value"] == {"Fn::GetAtt": [_bus_id(events), "Arn"]}


def test_by_default_only_the_intake_sender_role_may_put_events_on_the_bus(events: Synth) -> None:
    statements = _bus_statements(events)
    assert decision(statements, iam_request(PUT, _sender_role(events))) == "allow"
    # An identity policy's events:PutEvents is enough on a bus without a Deny: here it is not.
    webhook = {"Fn::GetAtt": [events.logical_id("Intake-exports/Webhook/Role/Resource"), "Arn"]}
    for principal in (ADMIN, webhook, LISTED[0]):
        assert decision(statements, iam_request(PUT, principal)) == "deny", principal
    # AWS services put their events on the default bus only; none may put here.
    rule = "arn:aws:events:eu-west-1:111122223333:rule/forwarder"
    assert decision(statements, service_request(PUT, "events.amazonaws.com", rule)) == "deny"


def test_the_listed_principals_may_put_events_and_no_one_else(listed: Synth) -> None:
    statements = _bus_statements(listed)
    for principal in (*LISTED, _sender_role(listed)):
        assert decision(statements, iam_request(PUT, principal)) == "allow", principal
    assert decision(statements, iam_request(PUT, ADMIN)) == "deny"
    assert decision(statements, iam_request(PUT, "arn:aws:iam::444455556666:role/other")) == "deny"


def test_the_sender_role_may_put_events_on_the_intake_bus_only(events: Synth) -> None:
    role = events.logical_id("IntakeSender/Role/Resource")
    granted = [
        s
        for p in events.resources("AWS::IAM::Policy").values()
        if {"Ref": role} in p["Properties"]["Roles"]
        for s in p["Properties"]["PolicyDocument"]["Statement"]
        if s["Action"] == PUT
    ]
    assert [s["Resource"] for s in granted] == [{"Fn::GetAtt": [_bus_id(events), "Arn"]}]


def test_without_event_patterns_there_is_no_bus(default: Synth) -> None:
    assert default.resources("AWS::Events::EventBus") == {}
    assert "IntakeEventBusName" not in default.template_json["Outputs"]


@pytest.mark.parametrize(
    "value",
    [
        "arn:aws:iam::111122223333:root",
        "111122223333",
        "arn:aws:sts::111122223333:assumed-role/r/session",
        "*",
    ],
)
def test_a_sender_that_is_not_a_role_or_user_arn_fails_synth_naming_the_key(value: str) -> None:
    app = App(context={"intake_event_senders": value})
    with pytest.raises(ConfigError, match="intake_event_senders"):
        DeploymentOptions.from_context(app.node)


def test_role_and_user_arns_are_accepted_as_senders() -> None:
    app = App(context={"intake_event_senders": f"{LISTED[0]}, arn:aws:iam::111122223333:user/a"})
    options = DeploymentOptions.from_context(app.node)
    assert options.intake_event_senders == [LISTED[0], "arn:aws:iam::111122223333:user/a"]

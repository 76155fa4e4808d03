"""What the CDK app derives from a policy's action kind: its grants and its network path, and
nothing more (sweeper.actions.base; infra/pipeline.py turns them into statements and rules).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from aws_cdk import App, Environment, Stack
from aws_cdk import aws_ec2 as ec2
from aws_cdk.assertions import Template

from infra.network import VPC_CIDR, Network
from infra.options import DeploymentOptions
from sweeper_tools.deploy.base import AwsService
from tests.infra.conftest import FIXTURES, Synth

CLIENT_SECRET = "arn:aws:secretsmanager:eu-west-1:111122223333:secret:sweeper/payments_oauth"
TOKEN_SECRET = "arn:aws:secretsmanager:eu-west-1:111122223333:secret:sweeper/sessions-api-AbCdEf"
ANYWHERE = "0.0.0.0/0"


@pytest.fixture(scope="session")
def oauth2(synth_variant: Callable[[dict[str, Any]], Synth]) -> Synth:
    """One http policy with OAuth2 client credentials (tests/infra/fixtures)."""
    return synth_variant({"config": str(FIXTURES / "oauth2_payments.toml")})


def _statements(synth: Synth, function_logical_id: str) -> list[dict[str, Any]]:
    function = synth.python_functions()[function_logical_id]
    role = function["Properties"]["Role"]["Fn::GetAtt"][0]
    statements: list[dict[str, Any]] = []
    for policy in synth.resources("AWS::IAM::Policy").values():
        if {"Ref": role} in policy["Properties"]["Roles"]:
            statements += policy["Properties"]["PolicyDocument"]["Statement"]
    return statements


def _naming(statements: list[dict[str, Any]], arn: str) -> list[dict[str, Any]]:
    return [s for s in statements if arn in json.dumps(s["Resource"])]


def _consumer(synth: Synth, policy: str) -> str:
    prefix = f"Pipeline{policy.replace('-', '')}Consumer"
    (logical_id,) = [
        lid for lid in synth.python_functions() if lid.startswith(prefix) and "Consumer" in lid
    ]
    return logical_id


def test_the_oauth2_consumer_may_only_get_its_client_secret(oauth2: Synth) -> None:
    consumer = _consumer(oauth2, "payments")
    for logical_id in oauth2.python_functions():
        naming = _naming(_statements(oauth2, logical_id), CLIENT_SECRET)
        if logical_id != consumer:
            assert naming == [], logical_id
            continue
        # GetSecretValue, on the partial ARN with its random suffix matched, and nothing else
        assert [(s["Action"], s["Resource"]) for s in naming] == [
            ("secretsmanager:GetSecretValue", f"{CLIENT_SECRET}-??????")
        ]


def test_a_bearer_consumer_may_only_get_its_token(proxied: Synth) -> None:
    consumer = _consumer(proxied, "stale-sessions")
    naming = _naming(_statements(proxied, consumer), TOKEN_SECRET)
    assert [(s["Action"], s["Resource"]) for s in naming] == [
        ("secretsmanager:GetSecretValue", TOKEN_SECRET)
    ]


def test_an_http_consumer_without_a_secret_reads_no_vendor_secret(proxied: Synth) -> None:
    statements = _statements(proxied, _consumer(proxied, "exports"))
    assert _naming(statements, TOKEN_SECRET) == []
    assert _naming(statements, "secret:sweeper/") == []


def test_the_oauth2_consumer_reaches_the_vendor_and_the_token_endpoint_ports(
    oauth2: Synth,
) -> None:
    group = oauth2.logical_id("Pipeline-payments/Consumer/SecurityGroup/Resource")
    inline = oauth2.template_json["Resources"][group]["Properties"]["SecurityGroupEgress"]
    assert sorted((rule["CidrIp"], rule["FromPort"]) for rule in inline) == [
        (ANYWHERE, 443),
        (ANYWHERE, 9443),
    ]


def test_the_secrets_manager_endpoint_the_http_kind_needs_exists(oauth2: Synth) -> None:
    services = [
        json.dumps(endpoint["Properties"]["ServiceName"])
        for endpoint in oauth2.resources("AWS::EC2::VPCEndpoint").values()
    ]
    assert any("secretsmanager" in service for service in services)
    # The http kind calls no Lambda function: no endpoint for it
    assert not any(service.endswith('.lambda"') or ".lambda" in service for service in services)


@pytest.mark.parametrize(
    ("service", "endpoint_type", "peer"),
    [
        (AwsService.LAMBDA, "Interface", "vpc range"),
        (AwsService.SECRETS_MANAGER, "Interface", "vpc range"),
        (AwsService.S3, "Gateway", "prefix list"),
    ],
)
def test_an_aws_service_a_kind_calls_has_its_endpoint_and_peer(
    service: AwsService, endpoint_type: str, peer: str
) -> None:
    # Given a network, and a kind that says it calls this service
    stack = Stack(App(), "Kinds", env=Environment(account="111122223333", region="eu-west-1"))
    network = Network(stack, "Network", options=DeploymentOptions())
    # When the CDK app asks where functions reach it
    found = network.peer_for(service)
    # Then an endpoint of the service's kind exists, and the peer is where it answers
    template = Template.from_stack(stack).to_json()
    endpoints = [
        r["Properties"]
        for r in template["Resources"].values()
        if r["Type"] == "AWS::EC2::VPCEndpoint"
        and json.dumps(r["Properties"]["ServiceName"]).rstrip('"]}').endswith(f".{service}")
    ]
    assert [e["VpcEndpointType"] for e in endpoints] == [endpoint_type]
    if peer == "vpc range":
        assert found.unique_id == ec2.Peer.ipv4(VPC_CIDR).unique_id
    else:
        assert "PrefixList" in json.dumps(stack.resolve(found.to_egress_rule_config()))


HELPDESK_SECRETS = "arn:aws:secretsmanager:eu-west-1:111122223333:secret:sweeper/helpdesk/"


@pytest.fixture(scope="session")
def helpdesk(synth_variant: Callable[[dict[str, Any]], Synth]) -> Synth:
    """docs/examples/helpdesk.toml: a secret per tenant (`sweeper/helpdesk/{tenant_id}`)."""
    return synth_variant({"config": "docs/examples/helpdesk.toml"})


def test_a_secret_per_tenant_is_granted_on_its_path_only(helpdesk: Synth) -> None:
    # Given the help desk's secret template, one secret per account under sweeper/helpdesk/
    assert helpdesk.validation_error is None, helpdesk.validation_error
    consumer = _consumer(helpdesk, "helpdesk")
    for logical_id in helpdesk.python_functions():
        statements = _statements(helpdesk, logical_id)
        reads = [
            s
            for s in statements
            if "secretsmanager:GetSecretValue" in json.dumps(s["Action"])
            and (":secret:" in json.dumps(s["Resource"]) or "*" in s["Resource"])
        ]
        if logical_id != consumer:
            assert _naming(statements, HELPDESK_SECRETS) == [], logical_id
            continue
        # Then the consumer may read that path's secrets, and no other vendor secret (its
        # ledger login is a reference of its own)
        assert [(s["Action"], s["Resource"]) for s in reads] == [
            ("secretsmanager:GetSecretValue", f"{HELPDESK_SECRETS}*")
        ]

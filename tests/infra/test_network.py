"""Network: private subnets behind one NAT gateway, endpoints for the AWS APIs the functions use."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from aws_cdk.assertions import Match

from infra.network import VPC_CIDR
from tests.infra.conftest import IMPORTED_CONTEXT, Synth


def _endpoint_types(synth: Synth) -> list[str]:
    return sorted(
        str(e["Properties"].get("VpcEndpointType", "Gateway"))
        for e in synth.resources("AWS::EC2::VPCEndpoint").values()
    )


def _gateway_services(synth: Synth) -> list[str]:
    """The gateway endpoints' services (`com.amazonaws.<region>.<service>`, which CDK writes
    as a join with the region)."""
    names = [
        e["Properties"]["ServiceName"]
        for e in synth.resources("AWS::EC2::VPCEndpoint").values()
        if e["Properties"].get("VpcEndpointType") == "Gateway"
    ]
    services = (str(n if isinstance(n, str) else n["Fn::Join"][1][-1]) for n in names)
    return sorted(s.rsplit(".", 1)[-1] for s in services)


def test_new_vpc_routes_private_subnets_through_one_nat_gateway(default: Synth) -> None:
    default.template.resource_count_is("AWS::EC2::VPC", 1)
    default.template.resource_count_is("AWS::EC2::NatGateway", 1)
    default.template.has_resource_properties(
        "AWS::EC2::Route",
        {"DestinationCidrBlock": "0.0.0.0/0", "NatGatewayId": Match.any_value()},
    )


def test_dynamodb_and_s3_are_reached_through_gateway_endpoints(default: Synth) -> None:
    assert _gateway_services(default) == ["dynamodb", "s3"]


def test_sqs_and_secrets_manager_have_private_interface_endpoints(default: Synth) -> None:
    endpoints = default.resources("AWS::EC2::VPCEndpoint").values()
    interface = {
        json.dumps(e["Properties"]["ServiceName"]): e["Properties"]
        for e in endpoints
        if e["Properties"].get("VpcEndpointType") == "Interface"
    }
    services = " ".join(interface)
    assert "sqs" in services
    assert "secretsmanager" in services
    assert all(props["PrivateDnsEnabled"] is True for props in interface.values())


def test_interface_endpoints_admit_https_from_the_vpc_only(default: Synth) -> None:
    groups = [
        group
        for logical_id, group in default.resources("AWS::EC2::SecurityGroup").items()
        if "Endpoint" in logical_id
    ]
    assert len(groups) == 2
    for group in groups:
        assert group["Properties"]["SecurityGroupIngress"] == [
            {
                "CidrIp": VPC_CIDR,
                "Description": "HTTPS from inside the VPC",
                "FromPort": 443,
                "IpProtocol": "tcp",
                "ToPort": 443,
            }
        ]


def test_vpc_flow_logs_capture_all_traffic(default: Synth) -> None:
    default.template.has_resource_properties(
        "AWS::EC2::FlowLog", {"TrafficType": "ALL", "ResourceType": "VPC"}
    )


def test_functions_run_in_the_private_subnets_with_their_own_security_group(
    default: Synth,
) -> None:
    private_subnets = {
        logical_id
        for logical_id in default.resources("AWS::EC2::Subnet")
        if "functions" in logical_id
    }
    for function in default.python_functions().values():
        vpc_config = function["Properties"]["VpcConfig"]
        assert {ref["Ref"] for ref in vpc_config["SubnetIds"]} == private_subnets
        assert len(vpc_config["SecurityGroupIds"]) == 1


def test_imported_vpc_creates_no_network_and_uses_the_given_subnets(imported: Synth) -> None:
    imported.template.resource_count_is("AWS::EC2::VPC", 0)
    imported.template.resource_count_is("AWS::EC2::NatGateway", 0)
    imported.template.resource_count_is("AWS::EC2::VPCEndpoint", 0)
    given = IMPORTED_CONTEXT["vpc_private_subnet_ids"].split(",")
    for function in imported.python_functions().values():
        assert function["Properties"]["VpcConfig"]["SubnetIds"] == given


def test_lean_network_has_no_interface_endpoint_and_keeps_the_gateways(lean: Synth) -> None:
    assert _endpoint_types(lean) == ["Gateway", "Gateway"]
    assert _gateway_services(lean) == ["dynamodb", "s3"]
    lean.template.resource_count_is("AWS::EC2::NatGateway", 1)
    lean.template.has_resource_properties(
        "AWS::EC2::Route",
        {"DestinationCidrBlock": "0.0.0.0/0", "NatGatewayId": Match.any_value()},
    )


def test_lean_network_leaves_no_endpoint_security_group_behind(lean: Synth) -> None:
    """No endpoint's group, and no rule anywhere naming a group the template lacks."""
    groups = lean.resources("AWS::EC2::SecurityGroup")
    assert [logical_id for logical_id in groups if "Endpoint" in logical_id] == []
    rules = [
        rule
        for group in groups.values()
        for key in ("SecurityGroupIngress", "SecurityGroupEgress")
        for rule in group["Properties"].get(key, [])
    ]
    rules += [
        rule["Properties"]
        for kind in ("AWS::EC2::SecurityGroupIngress", "AWS::EC2::SecurityGroupEgress")
        for rule in lean.resources(kind).values()
    ]
    named = {
        value["Fn::GetAtt"][0]
        for rule in rules
        for key in ("GroupId", "SourceSecurityGroupId", "DestinationSecurityGroupId")
        if isinstance(value := rule.get(key), dict) and "Fn::GetAtt" in value
    }
    assert named <= set(lean.template_json["Resources"])


def test_the_default_network_is_the_one_without_the_option(
    default: Synth, synth_variant: Callable[[dict[str, Any]], Synth]
) -> None:
    """`-c network=default` synthesizes what no option does."""
    explicit = synth_variant({"config": "sweeper.toml", "network": "default"})
    assert explicit.root_json == default.root_json


def test_lean_changes_nothing_in_an_imported_vpc(
    imported: Synth, synth_variant: Callable[[dict[str, Any]], Synth]
) -> None:
    """An imported VPC brings its own NAT and endpoints; sweeper creates none in either
    profile, so the profile has nothing to leave out."""
    lean_imported = synth_variant({"config": "sweeper.toml", **IMPORTED_CONTEXT, "network": "lean"})
    assert lean_imported.root_json == imported.root_json
    assert lean_imported.nested_json == imported.nested_json


def test_lean_migrations_wait_for_the_route_through_the_nat(lean: Synth) -> None:
    """They read the ledger's secret during the deploy: in the lean profile, the way to
    Secrets Manager is the function subnets' default route, which must exist first."""
    routes = {
        logical_id
        for logical_id, route in lean.resources("AWS::EC2::Route").items()
        if "NatGatewayId" in route["Properties"] and "functions" in logical_id
    }
    apply = lean.template_json["Resources"][lean.logical_id("Migrations/Apply/Default")]
    assert routes
    assert routes <= set(apply["DependsOn"])

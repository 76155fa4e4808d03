"""Network: private subnets behind one NAT gateway, endpoints for the AWS APIs the functions use."""

from __future__ import annotations

import json

from aws_cdk.assertions import Match

from infra.network import VPC_CIDR
from tests.infra.conftest import IMPORTED_CONTEXT, Synth


def test_new_vpc_routes_private_subnets_through_one_nat_gateway(default: Synth) -> None:
    default.template.resource_count_is("AWS::EC2::VPC", 1)
    default.template.resource_count_is("AWS::EC2::NatGateway", 1)
    default.template.has_resource_properties(
        "AWS::EC2::Route",
        {"DestinationCidrBlock": "0.0.0.0/0", "NatGatewayId": Match.any_value()},
    )


def test_dynamodb_and_s3_are_reached_through_gateway_endpoints(default: Synth) -> None:
    endpoints = default.resources("AWS::EC2::VPCEndpoint").values()
    gateway = [e for e in endpoints if e["Properties"].get("VpcEndpointType") == "Gateway"]
    names = [e["Properties"]["ServiceName"] for e in gateway]
    # `com.amazonaws.<region>.<service>`, which CDK writes as a join with the region
    services = sorted(str(n if isinstance(n, str) else n["Fn::Join"][1][-1]) for n in names)
    assert [s.rsplit(".", 1)[-1] for s in services] == ["dynamodb", "s3"]


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

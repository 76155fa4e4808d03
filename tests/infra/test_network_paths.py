"""Every function can reach every AWS service its role is granted, from inside the VPC.

The services are derived from the synthesized template, not listed by hand: each action prefix in
a function's IAM policies (`dynamodb:`, `sqs:`, `secretsmanager:` ...) names a service the
function's code calls. For each one there must be a network path from the function's security
group, in one of three shapes:

- an interface endpoint for the service, with private DNS, in reach of the function's egress on
  443, whose own security group admits the function on 443;
- a gateway endpoint for the service on the function subnets' route tables, plus egress on 443
  to the service's prefix list (or to anywhere);
- a NAT gateway on the function subnets' route tables, plus egress on 443 to anywhere.

An imported VPC brings its own routes, which the template cannot show: there, egress on 443 to
anywhere is the path (docs/deploy.md asks for NAT or the endpoints).
"""

from __future__ import annotations

import ipaddress
import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from tests.infra.conftest import Synth

HTTPS_PORT = 443
ANYWHERE = "0.0.0.0/0"

#: Granted action prefixes whose calls never leave through the function's network interface.
NO_NETWORK_PATH_NEEDED = {
    # The VPC access actions: the Lambda service uses them, with the execution role, to create
    # and delete the function's network interfaces; the function's code never calls EC2.
    "ec2": "used by the Lambda service to place the function in the VPC",
    # Lambda ships the function's stdout/stderr (logs and EMF metrics) to CloudWatch Logs from
    # the service side, outside the VPC.
    "logs": "written by the Lambda runtime, not by the function's code",
    # Active tracing: segments go to the X-Ray daemon Lambda runs on a link-local address, and
    # the daemon sends them from the service side.
    "xray": "sent by Lambda's X-Ray daemon, not through the function's interface",
}


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def _ref(value: Any) -> str | None:
    """The logical ID a `Ref` or `Fn::GetAtt` points to."""
    if isinstance(value, dict):
        if "Ref" in value:
            return str(value["Ref"])
        if "Fn::GetAtt" in value:
            return str(value["Fn::GetAtt"][0])
    return None


def _endpoint_service(endpoint: dict[str, Any]) -> str:
    """`com.amazonaws.<region>.sqs` → `sqs` (CDK writes it as a join with the region)."""
    name = endpoint["Properties"]["ServiceName"]
    text = name if isinstance(name, str) else name["Fn::Join"][1][-1]
    return str(text).rsplit(".", 1)[-1]


@dataclass(frozen=True)
class Rule:
    """One security group rule in either direction, as far as a path on 443 cares."""

    cidr: str | None
    prefix_list: Any
    group: str | None

    @classmethod
    def of(cls, props: dict[str, Any], direction: str) -> Rule | None:
        """The rule, if it covers TCP 443; `direction` is `Destination` or `Source`."""
        protocol = str(props.get("IpProtocol"))
        all_traffic = protocol == "-1"
        tcp_443 = protocol in ("tcp", "6") and (
            props.get("FromPort", 0) <= HTTPS_PORT <= props.get("ToPort", 65_535)
        )
        if not (all_traffic or tcp_443):
            return None
        return cls(
            cidr=props.get("CidrIp"),
            prefix_list=props.get(f"{direction}PrefixListId"),
            group=_ref(props.get(f"{direction}SecurityGroupId")),
        )

    def covers_cidr(self, cidr: str) -> bool:
        if self.cidr is None:
            return False
        return ipaddress.ip_network(cidr).subnet_of(ipaddress.ip_network(self.cidr))  # type: ignore[arg-type]


class Network:
    """The parts of a synthesized template that decide where a function's packets can go."""

    def __init__(self, synth: Synth) -> None:
        self.synth = synth
        self.resources: dict[str, dict[str, Any]] = synth.template_json["Resources"]

    def _rules(
        self, group_id: str, inline_key: str, resource_type: str, direction: str
    ) -> list[Rule]:
        props = self.resources[group_id]["Properties"]
        raw = list(props.get(inline_key, []))
        raw += [
            rule["Properties"]
            for rule in self.synth.resources(resource_type).values()
            if _ref(rule["Properties"]["GroupId"]) == group_id
        ]
        return [rule for rule in (Rule.of(r, direction) for r in raw) if rule is not None]

    def egress(self, group_id: str) -> list[Rule]:
        return self._rules(
            group_id, "SecurityGroupEgress", "AWS::EC2::SecurityGroupEgress", "Destination"
        )

    def ingress(self, group_id: str) -> list[Rule]:
        return self._rules(
            group_id, "SecurityGroupIngress", "AWS::EC2::SecurityGroupIngress", "Source"
        )

    def subnet_cidrs(self, subnet_ids: list[Any]) -> list[str]:
        return [self.resources[str(_ref(s))]["Properties"]["CidrBlock"] for s in subnet_ids]

    def route_tables(self, subnet_ids: list[Any]) -> set[str]:
        subnets = {_ref(s) for s in subnet_ids}
        return {
            str(_ref(a["Properties"]["RouteTableId"]))
            for a in self.synth.resources("AWS::EC2::SubnetRouteTableAssociation").values()
            if _ref(a["Properties"]["SubnetId"]) in subnets
        }

    def endpoints(self, kind: str, service: str) -> Iterator[dict[str, Any]]:
        for endpoint in self.synth.resources("AWS::EC2::VPCEndpoint").values():
            props = endpoint["Properties"]
            if props.get("VpcEndpointType") == kind and _endpoint_service(endpoint) == service:
                yield props

    def names_prefix_list_of(self, prefix_list: Any, service: str) -> bool:
        """Whether a rule's prefix list is the one AWS manages for `service` in this region.

        Its id is read at deploy time by a lookup resource; the lookup must ask for the name
        `com.amazonaws.<region>.<service>`.
        """
        lookup = _ref(prefix_list)
        if lookup is None or lookup not in self.resources:
            return False
        rendered = json.dumps(self.resources[lookup]["Properties"])
        return "prefix-list-name" in rendered and f".{service}" in rendered

    def reaches(self, function: dict[str, Any], service: str) -> list[str]:
        """The paths (described) from a function to a service; empty when there is none."""
        vpc = function["Properties"]["VpcConfig"]
        (group_ref,) = vpc["SecurityGroupIds"]
        group = str(_ref(group_ref))
        egress = self.egress(group)
        anywhere = any(rule.cidr == ANYWHERE for rule in egress)
        if not self.synth.resources("AWS::EC2::VPC"):
            return ["imported VPC: egress on 443 to anywhere"] if anywhere else []

        paths: list[str] = []
        for endpoint in self.endpoints("Interface", service):
            endpoint_groups = {str(_ref(g)) for g in endpoint["SecurityGroupIds"]}
            endpoint_cidrs = self.subnet_cidrs(endpoint["SubnetIds"])
            function_cidrs = self.subnet_cidrs(vpc["SubnetIds"])
            out = any(
                rule.group in endpoint_groups
                or all(rule.covers_cidr(cidr) for cidr in endpoint_cidrs)
                for rule in egress
            )
            admitted = any(
                rule.group == group or all(rule.covers_cidr(cidr) for cidr in function_cidrs)
                for endpoint_group in endpoint_groups
                for rule in self.ingress(endpoint_group)
            )
            if out and admitted and endpoint.get("PrivateDnsEnabled") is True:
                paths.append("interface endpoint")

        tables = self.route_tables(vpc["SubnetIds"])
        for endpoint in self.endpoints("Gateway", service):
            on_route = tables <= {str(_ref(t)) for t in endpoint["RouteTableIds"]}
            to_list = anywhere or any(
                self.names_prefix_list_of(rule.prefix_list, service) for rule in egress
            )
            if on_route and to_list:
                paths.append("gateway endpoint")

        nat_tables = {
            str(_ref(route["Properties"]["RouteTableId"]))
            for route in self.synth.resources("AWS::EC2::Route").values()
            if route["Properties"].get("DestinationCidrBlock") == ANYWHERE
            and "NatGatewayId" in route["Properties"]
        }
        if tables and tables <= nat_tables and anywhere:
            paths.append("NAT")
        return paths


def granted_services(synth: Synth, function: dict[str, Any]) -> set[str]:
    """The service prefixes of every action the function's role is allowed."""
    role = str(_ref(function["Properties"]["Role"]))
    statements: list[dict[str, Any]] = []
    for policy in synth.resources("AWS::IAM::Policy").values():
        if {"Ref": role} in policy["Properties"]["Roles"]:
            statements += policy["Properties"]["PolicyDocument"]["Statement"]
    for inline in synth.template_json["Resources"][role]["Properties"].get("Policies", []):
        statements += inline["PolicyDocument"]["Statement"]
    return {
        str(action).split(":", 1)[0]
        for statement in statements
        if statement["Effect"] == "Allow"
        for action in _as_list(statement["Action"])
    }


def test_every_function_has_a_network_path_to_each_service_it_is_granted(
    every_variant: Synth,
) -> None:
    network = Network(every_variant)
    missing: list[str] = []
    checked = 0
    for logical_id, function in every_variant.python_functions().items():
        services = granted_services(every_variant, function) - set(NO_NETWORK_PATH_NEEDED)
        assert services, f"{logical_id} is granted no AWS service at all"
        for service in sorted(services):
            checked += 1
            if not network.reaches(function, service):
                missing.append(f"{logical_id} -> {service}")
    assert checked > 0
    assert missing == [], f"no network path for: {missing}"


@pytest.mark.parametrize("function", ["Producer", "Consumer", "Redrive", "Migrations"])
def test_each_function_kind_is_checked_for_its_services(default: Synth, function: str) -> None:
    """The derivation sees the services each kind of function really uses."""
    expected = {
        "Producer": {"sqs", "secretsmanager", "dynamodb"},  # dynamodb: the closed gates
        "Consumer": {"sqs", "secretsmanager", "dynamodb"},
        "Redrive": {"sqs", "secretsmanager", "dynamodb"},
        "Migrations": {"secretsmanager"},
    }[function]
    (found,) = [f for lid, f in default.python_functions().items() if function in lid]
    assert granted_services(default, found) - set(NO_NETWORK_PATH_NEEDED) == expected


def test_the_redrive_reaches_dynamodb_through_the_gateway_endpoint_only(default: Synth) -> None:
    """Not through NAT: its egress names DynamoDB's prefix list, not the internet."""
    (redrive,) = [f for lid, f in default.python_functions().items() if "Redrive" in lid]
    assert Network(default).reaches(redrive, "dynamodb") == ["gateway endpoint"]


def test_s3_discovery_reaches_s3_through_the_gateway_endpoint_only(proxied: Synth) -> None:
    """Not through NAT: its egress names S3's prefix list, on the function subnets' routes."""
    (discovery,) = [
        f
        for lid, f in proxied.python_functions().items()
        if "Discovery" in lid and "s3" in granted_services(proxied, f)
    ]
    assert Network(proxied).reaches(discovery, "s3") == ["gateway endpoint"]


@pytest.mark.parametrize("service", ["sqs", "secretsmanager"])
def test_lean_functions_reach_sqs_and_secrets_manager_through_the_nat(
    lean: Synth, service: str
) -> None:
    """No interface endpoint to take: every function granted the service has the NAT."""
    network = Network(lean)
    found = [
        network.reaches(function, service)
        for function in lean.python_functions().values()
        if service in granted_services(lean, function)
    ]
    assert found
    assert all(paths == ["NAT"] for paths in found), found


def test_lean_keeps_dynamodb_on_the_gateway_endpoint(lean: Synth) -> None:
    """Egress on 443 to anywhere opens the NAT too, but the endpoint's prefix-list route on
    the same table is the more specific one: DynamoDB traffic still takes the endpoint."""
    (redrive,) = [f for lid, f in lean.python_functions().items() if "Redrive" in lid]
    assert "gateway endpoint" in Network(lean).reaches(redrive, "dynamodb")

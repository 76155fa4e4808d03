"""Network: a new VPC with private subnets behind a NAT gateway, or an imported one.

Consumers call an internet API, so functions live in private subnets with a route through NAT.
AWS APIs the functions use stay off the internet path: gateway endpoints for DynamoDB and S3
(free; S3 for discovery's listings) and interface endpoints for SQS and Secrets Manager. The
lean profile (`-c network=lean`) keeps the gateway endpoints and creates no interface endpoint:
SQS, Secrets Manager (and Lambda, for an action that invokes one) are reached through the NAT.
The database sits in isolated subnets.
"""

from __future__ import annotations

from aws_cdk import RemovalPolicy, Stack
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_logs as logs
from aws_cdk import custom_resources as cr
from constructs import Construct, DependencyGroup

from infra.nag import acknowledge
from infra.options import DeploymentOptions
from sweeper_tools.deploy.base import AwsService

VPC_CIDR = "10.40.0.0/16"
MAX_AVAILABILITY_ZONES = 2
#: One NAT gateway: consumers lose the internet path if its zone fails, which the queue absorbs
#: (messages wait, the age alarm fires). Two would double the largest fixed cost.
NAT_GATEWAY_COUNT = 1
PUBLIC_SUBNET_CIDR_MASK = 24
FUNCTION_SUBNET_CIDR_MASK = 22
DATABASE_SUBNET_CIDR_MASK = 24
FLOW_LOG_RETENTION = logs.RetentionDays.THREE_MONTHS
#: Where the AWS-managed prefix list of a gateway endpoint service is named (docs/decisions.md).
PREFIX_LIST_NAME = "com.amazonaws.{region}.{service}"
#: Name of the lookup resource's function, which CDK shares per stack (a singleton).
SDK_CALL_FUNCTION_ID = "AWS679f53fac002430cb0da5b7982bd2287"

PREFIX_LIST_LOOKUP_WILDCARD_REASON = (
    "ec2:DescribePrefixLists supports no resource-level permissions; the lookup function is "
    "CDK's AwsCustomResource, which runs once per deploy and only reads the prefix list's id."
)
PREFIX_LIST_LOOKUP_MANAGED_POLICY_REASON = (
    "CDK's AwsCustomResource function (outside the VPC, no data access) logs with the "
    "AWSLambdaBasicExecutionRole managed policy CDK attaches to its generated role."
)


class Network(Construct):
    """The VPC, where functions and the database go, and the endpoints functions rely on."""

    def __init__(self, scope: Construct, construct_id: str, *, options: DeploymentOptions) -> None:
        super().__init__(scope, construct_id)
        #: What must exist before a function can reach AWS APIs from the VPC (deploy-time users,
        #: such as the migrations custom resource, depend on it).
        self.endpoints = DependencyGroup()
        self._imported = options.imports_vpc
        #: Whether AWS APIs without a gateway endpoint are reached through the NAT.
        self._through_nat = options.imports_vpc or options.lean_network
        self.secrets_manager_endpoint: ec2.IInterfaceVpcEndpoint | None = None
        self._dynamodb_prefix_list: ec2.IPeer | None = None
        self._s3_prefix_list: ec2.IPeer | None = None
        self._lambda_endpoint: ec2.InterfaceVpcEndpoint | None = None
        if options.imports_vpc:
            # The options model guarantees all four together.
            assert options.vpc_id is not None
            assert options.vpc_cidr is not None
            self.vpc: ec2.IVpc = ec2.Vpc.from_vpc_attributes(
                self,
                "Vpc",
                vpc_id=options.vpc_id,
                vpc_cidr_block=options.vpc_cidr,
                availability_zones=list(options.vpc_availability_zones or []),
                private_subnet_ids=list(options.vpc_private_subnet_ids or []),
            )
            acknowledge(
                self.vpc,
                "Annotation::@aws-cdk/aws-ec2:noSubnetRouteTableId",
                "sweeper adds no route or gateway endpoint to an imported VPC, so it never reads "
                "the route tables of the subnets it was given.",
            )
            # An imported VPC brings its own NAT and endpoints (docs/deploy.md lists them).
            self.function_subnets = ec2.SubnetSelection(subnets=self.vpc.private_subnets)
            self.database_subnets = self.function_subnets
            return

        flow_logs = logs.LogGroup(
            self,
            "FlowLogs",
            retention=FLOW_LOG_RETENTION,
            removal_policy=RemovalPolicy.DESTROY,
        )
        vpc = ec2.Vpc(
            self,
            "Vpc",
            ip_addresses=ec2.IpAddresses.cidr(VPC_CIDR),
            max_azs=MAX_AVAILABILITY_ZONES,
            nat_gateways=NAT_GATEWAY_COUNT,
            subnet_configuration=[
                ec2.SubnetConfiguration(
                    name="public",
                    subnet_type=ec2.SubnetType.PUBLIC,
                    cidr_mask=PUBLIC_SUBNET_CIDR_MASK,
                ),
                ec2.SubnetConfiguration(
                    name="functions",
                    subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS,
                    cidr_mask=FUNCTION_SUBNET_CIDR_MASK,
                ),
                ec2.SubnetConfiguration(
                    name="database",
                    subnet_type=ec2.SubnetType.PRIVATE_ISOLATED,
                    cidr_mask=DATABASE_SUBNET_CIDR_MASK,
                ),
            ],
            restrict_default_security_group=True,
            flow_logs={
                "all": ec2.FlowLogOptions(
                    destination=ec2.FlowLogDestination.to_cloud_watch_logs(flow_logs),
                    traffic_type=ec2.FlowLogTrafficType.ALL,
                )
            },
        )
        self.vpc = vpc
        self.function_subnets = ec2.SubnetSelection(subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS)
        self.database_subnets = ec2.SubnetSelection(subnet_type=ec2.SubnetType.PRIVATE_ISOLATED)

        dynamodb = vpc.add_gateway_endpoint(
            "DynamoDbEndpoint",
            service=ec2.GatewayVpcEndpointAwsService.DYNAMODB,
            subnets=[self.function_subnets],
        )
        # Discovery lists S3 buckets: through this endpoint rather than the NAT (no data
        # processing charge, and the listing never leaves AWS's network).
        s3 = vpc.add_gateway_endpoint(
            "S3Endpoint",
            service=ec2.GatewayVpcEndpointAwsService.S3,
            subnets=[self.function_subnets],
        )
        self._dynamodb_prefix_list = self._managed_prefix_list("DynamoDbPrefixList", "dynamodb")
        self.endpoints.add(dynamodb, s3)
        if options.lean_network:
            # The way to SQS and Secrets Manager is the NAT's default route.
            egress = vpc.select_subnets(subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS)
            self.endpoints.add(egress.internet_connectivity_established)
            return
        sqs = self._interface_endpoint(vpc, "SqsEndpoint", ec2.InterfaceVpcEndpointAwsService.SQS)
        secrets = self._interface_endpoint(
            vpc, "SecretsManagerEndpoint", ec2.InterfaceVpcEndpointAwsService.SECRETS_MANAGER
        )
        self.secrets_manager_endpoint = secrets
        self.endpoints.add(sqs, secrets)

    def _managed_prefix_list(self, construct_id: str, service: str) -> ec2.IPeer:
        """The AWS-managed prefix list of a gateway endpoint service, looked up at deploy time.

        CloudFormation exposes no prefix list id on a gateway endpoint, and its id differs by
        region; a synth-time lookup would need credentials. The id is read once per deploy by
        CDK's AwsCustomResource (DescribePrefixLists), so `make synth` stays offline.
        """
        name = PREFIX_LIST_NAME.format(region=Stack.of(self).region, service=service)
        call = cr.AwsSdkCall(
            service="EC2",
            action="describePrefixLists",
            parameters={"Filters": [{"Name": "prefix-list-name", "Values": [name]}]},
            physical_resource_id=cr.PhysicalResourceId.from_response("PrefixLists.0.PrefixListId"),
            output_paths=["PrefixLists.0.PrefixListId"],
        )
        lookup = cr.AwsCustomResource(
            self,
            construct_id,
            on_create=call,
            on_update=call,
            policy=cr.AwsCustomResourcePolicy.from_sdk_calls(
                resources=cr.AwsCustomResourcePolicy.ANY_RESOURCE
            ),
            install_latest_aws_sdk=False,
        )
        acknowledge(lookup, "AwsSolutions-IAM5[Resource::*]", PREFIX_LIST_LOOKUP_WILDCARD_REASON)
        sdk_function = Stack.of(self).node.try_find_child(SDK_CALL_FUNCTION_ID)
        if sdk_function is not None:
            acknowledge(
                sdk_function,
                "AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/"
                "AWSLambdaBasicExecutionRole]",
                PREFIX_LIST_LOOKUP_MANAGED_POLICY_REASON,
            )
        return ec2.Peer.prefix_list(lookup.get_response_field("PrefixLists.0.PrefixListId"))

    def _interface_endpoint(
        self, vpc: ec2.Vpc, construct_id: str, service: ec2.InterfaceVpcEndpointAwsService
    ) -> ec2.InterfaceVpcEndpoint:
        """An endpoint that admits HTTPS from the VPC's own range, and nothing else."""
        endpoint = vpc.add_interface_endpoint(
            construct_id,
            service=service,
            subnets=self.function_subnets,
            private_dns_enabled=True,
            open=False,
        )
        endpoint.connections.allow_default_port_from(
            ec2.Peer.ipv4(VPC_CIDR), "HTTPS from inside the VPC"
        )
        return endpoint

    def peer_for(self, service: AwsService) -> ec2.IPeer:
        """Where functions reach an AWS API an action kind calls (sweeper.actions.base): the
        gateway endpoint's prefix list, or the interface endpoints' range, creating an
        interface endpoint the network does not always have on first use (none in the lean
        profile or an imported VPC: there, the NAT)."""
        if service is AwsService.S3:
            return self.s3_peer
        if service is AwsService.LAMBDA and not self._through_nat and self._lambda_endpoint is None:
            assert isinstance(self.vpc, ec2.Vpc)
            self._lambda_endpoint = self._interface_endpoint(
                self.vpc, "LambdaEndpoint", ec2.InterfaceVpcEndpointAwsService.LAMBDA_
            )
            self.endpoints.add(self._lambda_endpoint)
        return self.aws_api_peer

    @property
    def aws_api_peer(self) -> ec2.IPeer:
        """Where functions reach AWS APIs over HTTPS.

        In the new VPC: its own range, where the interface endpoints answer. In the lean profile,
        and in an imported VPC that may have no endpoints, the way to AWS APIs is the NAT:
        anywhere on 443.
        """
        if self._through_nat:
            return ec2.Peer.any_ipv4()
        return ec2.Peer.ipv4(VPC_CIDR)

    @property
    def dynamodb_peer(self) -> ec2.IPeer:
        """Where functions reach DynamoDB over HTTPS.

        In the new VPC: the gateway endpoint, whose traffic goes to DynamoDB's public addresses,
        i.e. the AWS-managed prefix list (never the VPC's own range). In an imported VPC: the
        gateway endpoint or NAT it brings, so anywhere on 443.
        """
        if self._dynamodb_prefix_list is None:
            return ec2.Peer.any_ipv4()
        return self._dynamodb_prefix_list

    @property
    def s3_peer(self) -> ec2.IPeer:
        """Where functions reach S3 over HTTPS: as `dynamodb_peer`, through S3's gateway endpoint.

        The prefix list is looked up on first use only, so a stack without S3 discovery carries
        no lookup for it.
        """
        if self._imported:
            return ec2.Peer.any_ipv4()
        if self._s3_prefix_list is None:
            self._s3_prefix_list = self._managed_prefix_list("S3PrefixList", "s3")
        return self._s3_prefix_list

"""How many CloudFormation resources a deployment of a policy file takes, before any synth.

Each policy is a nested stack of its own (infra/policy_stack.py); the root stack holds what the
policies share and one resource per policy. `sweeper plan` prints these figures against
CloudFormation's limits; `make synth` counts the synthesized templates (infra/stack_size.py),
and tests/infra/test_many_policies.py holds the estimate to those counts. The figures are per
part of a policy, as the constructs build them (a function is its log group, role, role
policy, security group and its rules); they change when a construct does, and the test says so.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from sweeper.config import Policy, S3Discovery, SweeperConfig
from sweeper_tools.deploy import deploy_for
from sweeper_tools.planning.scope import single_scope

#: CloudFormation's limits on one template.
CFN_MAX_RESOURCES = 500
CFN_MAX_OUTPUTS = 200

#: Queues, producer and consumer with their schedule and grants (an AWS-service action adds
#: a rule per service endpoint instead of one to the internet: ACTION_EXTRA_PER_SERVICE).
PIPELINE_RESOURCES = 26
ACTION_EXTRA_PER_SERVICE = 1
ACTION_CODE_LAYER_RESOURCES = 1
REDRIVE_RESOURCES = 14
#: The intake queue, DLQ and function (with HTTPS to DynamoDB: its policy's wake item); the
#: webhook (function, URL, secret, replay table); a rule per event pattern.
INTAKE_RESOURCES = 13
WEBHOOK_RESOURCES = 11
#: Discovery's function, schedule and grants (with HTTPS to DynamoDB: its wake item).
DISCOVERY_RESOURCES = {"s3": 15, "sql": 14}
RETENTION_RESOURCES = 13
#: Alarms: the pipeline's, one more for a single limiter scope; the intake's, one more for a
#: webhook; discovery's and retention's.
PIPELINE_ALARMS = 20
INTAKE_ALARMS = 3
WEBHOOK_ALARMS = 1
DISCOVERY_ALARMS = 3
RETENTION_ALARMS = 3
#: The policy's own dashboard.
DASHBOARD_RESOURCES = 1

#: The root stack with a new VPC and cluster and no policy; each policy's nested stack; the
#: intake bus (when a policy has event patterns); a prefix-list lookup for S3 (when a policy
#: reaches S3); and the operator roles' policies overflowing into managed policies (CDK splits
#: them at IAM's size limit), about one for every two policies past the third.
ROOT_BASE_RESOURCES = 122
ROOT_RESOURCES_PER_POLICY = 1
INTAKE_BUS_RESOURCES = 3
S3_LOOKUP_RESOURCES = 1
POLICIES_BEFORE_OVERFLOW = 3
OVERFLOW_POLICIES_PER_POLICY = 0.5
#: The root's outputs: shared ones, each policy's (queues, functions; webhook; discovery).
ROOT_BASE_OUTPUTS = 14
INTAKE_BUS_OUTPUTS = 2
OUTPUTS_PER_POLICY = 6
WEBHOOK_OUTPUTS = 2
DISCOVERY_OUTPUTS = 1


def policy_stack_id(policy_name: str) -> str:
    """The policy's nested stack's construct id: its logical ID in the root derives from this
    alone. The CDK app names the stack with it (infra/policy_stack.py), this estimate too."""
    return f"Policy-{policy_name}"


@dataclass(frozen=True)
class StackEstimate:
    """One stack's estimated resources and outputs."""

    name: str
    resources: int
    #: The root's outputs (tools read them); a policy stack's only feed the root.
    outputs: int | None = None

    @property
    def over(self) -> bool:
        return self.resources > CFN_MAX_RESOURCES or (self.outputs or 0) > CFN_MAX_OUTPUTS

    def line(self) -> str:
        outputs = "" if self.outputs is None else f", ~{self.outputs} of {CFN_MAX_OUTPUTS} outputs"
        mark = " (over CloudFormation's limit)" if self.over else ""
        resources = f"~{self.resources} of {CFN_MAX_RESOURCES} resources"
        return f"stack {self.name}: {resources}{outputs}{mark}"

    def as_dict(self) -> dict[str, object]:
        return {"stack": self.name, "resources": self.resources, "outputs": self.outputs}


def policy_stack_resources(policy: Policy) -> int:
    """The resources of the policy's nested stack."""
    path = deploy_for(policy.action).network_path()
    pipeline = PIPELINE_RESOURCES
    if not path.internet_ports:
        pipeline += ACTION_EXTRA_PER_SERVICE * len(path.aws_services)
    if policy.action.kind == "python":
        pipeline += ACTION_CODE_LAYER_RESOURCES
    alarms = PIPELINE_ALARMS + (1 if single_scope(policy) is not None else 0)
    intake = INTAKE_RESOURCES + len(policy.intake.event_patterns) + INTAKE_ALARMS
    if policy.intake.webhook:
        intake += WEBHOOK_RESOURCES + WEBHOOK_ALARMS
    total = pipeline + REDRIVE_RESOURCES + alarms + intake + DASHBOARD_RESOURCES
    if policy.discovery is not None:
        total += DISCOVERY_RESOURCES[policy.discovery.kind] + DISCOVERY_ALARMS
    if policy.retention.enabled:
        total += RETENTION_RESOURCES + RETENTION_ALARMS
    return total


def _reaches_s3(policy: Policy) -> bool:
    return isinstance(policy.discovery, S3Discovery) or (
        "s3" in deploy_for(policy.action).network_path().aws_services
    )


def root_stack(config: SweeperConfig, name: str) -> StackEstimate:
    """The root stack (a new VPC and cluster; an imported one holds fewer)."""
    count = len(config.policies)
    has_bus = any(policy.intake.event_patterns for policy in config.policies)
    overflow = math.ceil(max(0, count - POLICIES_BEFORE_OVERFLOW) * OVERFLOW_POLICIES_PER_POLICY)
    resources = (
        ROOT_BASE_RESOURCES
        + ROOT_RESOURCES_PER_POLICY * count
        + (INTAKE_BUS_RESOURCES if has_bus else 0)
        + (S3_LOOKUP_RESOURCES if any(_reaches_s3(p) for p in config.policies) else 0)
        + overflow
    )
    outputs = ROOT_BASE_OUTPUTS + (INTAKE_BUS_OUTPUTS if has_bus else 0)
    for policy in config.policies:
        outputs += OUTPUTS_PER_POLICY
        outputs += WEBHOOK_OUTPUTS if policy.intake.webhook else 0
        outputs += DISCOVERY_OUTPUTS if policy.discovery is not None else 0
    return StackEstimate(name, resources, outputs)


def estimate(config: SweeperConfig, root_name: str = "Sweeper") -> list[StackEstimate]:
    """The root stack's estimate, then each policy's nested stack's (`Policy-<name>`)."""
    return [root_stack(config, root_name)] + [
        StackEstimate(policy_stack_id(policy.name), policy_stack_resources(policy))
        for policy in config.policies
    ]

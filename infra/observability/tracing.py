"""X-Ray sampling for one policy's consumer: a rule of its own, not X-Ray's account default.

The consumer runs once per batch, so its traces grow with the jobs (the producer, redrive,
discovery and prune run a few times an hour: X-Ray's reservoir of one a second records each of
their runs either way). The rule samples as X-Ray's default does, the first invocation each
second and then `trace_sample_rate` of the others (0.05 unless the policy says otherwise); a
policy that asks for every trace sets 1.0. It is matched by service name, which for a function
is its name; the rule's own name is printed in docs/runbook.md's commands to change it for an
incident (`aws xray update-sampling-rule`).
"""

from __future__ import annotations

import hashlib

from aws_cdk import aws_xray as xray
from constructs import Construct

from infra.naming import deployment_name
from infra.pipeline import Pipeline

#: Before X-Ray's default rule (10000), after any an operator adds for an incident (lower wins).
SAMPLING_RULE_PRIORITY = 1000
#: Invocations recorded each second before the fixed rate applies (X-Ray's default, 1).
SAMPLING_RESERVOIR_PER_SECOND = 1
#: X-Ray's limit on a rule's name.
SAMPLING_RULE_NAME_MAX_CHARS = 32
_HASH_CHARS = 8


def sampling_rule_name(stack_name: str, policy_name: str) -> str:
    """`<stack>-<policy>`, or, past X-Ray's 32 characters, its start and a hash of the whole."""
    name = f"{stack_name}-{policy_name}"
    if len(name) <= SAMPLING_RULE_NAME_MAX_CHARS:
        return name
    digest = hashlib.sha256(name.encode()).hexdigest()[:_HASH_CHARS]
    return f"{name[: SAMPLING_RULE_NAME_MAX_CHARS - _HASH_CHARS - 1]}-{digest}"


def sample_traces(home: Construct, pipeline: Pipeline) -> xray.CfnSamplingRule:
    """The sampling rule for `pipeline`'s consumer, built under `home` (the policy's stack)."""
    policy = pipeline.policy
    return xray.CfnSamplingRule(
        home,
        f"TraceSampling-{policy.name}",  # a logical ID apart from other policies' rules
        sampling_rule=xray.CfnSamplingRule.SamplingRuleProperty(
            rule_name=sampling_rule_name(deployment_name(home), policy.name),
            priority=SAMPLING_RULE_PRIORITY,
            reservoir_size=SAMPLING_RESERVOIR_PER_SECOND,
            fixed_rate=policy.trace_sample_rate,
            service_name=pipeline.consumer.function.function_name,
            service_type="AWS::Lambda::Function",
            host="*",
            http_method="*",
            url_path="*",
            resource_arn="*",
            version=1,
        ),
    )

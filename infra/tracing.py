"""The consumer's X-Ray mode: one of Lambda's two, as its policy says (`consumer.tracing`).

Lambda takes no X-Ray sampling rule ("You can't configure the X-Ray sampling rate for your
functions", the Lambda developer guide, services-xray), so the mode is the one switch there is:
- Active: Lambda follows the sampling decision of the trace header it is given, for the
  consumer its messages' (`AWSTraceHeader`, the producer run's, sampled: a run is one of a few an
  hour, inside the one a second Lambda records), so every invocation is traced; Lambda's own
  rate, 1 a second and 5% of the rest, applies only where no decision comes with the messages.
- PassThrough (Lambda's default): Lambda forwards the header and sends no trace, even when the
  header says sampled.
Every function is built Active (infra/function.py), so every role may write to X-Ray: an
operator can turn a passthrough consumer Active at once, without a deploy (docs/runbook.md).
The other functions run a few times an hour and stay Active.
"""

from __future__ import annotations

from aws_cdk import aws_lambda as lambda_

from sweeper.config import Policy

#: `consumer.tracing` as Lambda's TracingConfig mode.
TRACING_MODES = {"active": "Active", "passthrough": "PassThrough"}


def trace_consumer(function: lambda_.Function, policy: Policy) -> None:
    """Set `function` (the policy's consumer) to the X-Ray mode its policy names."""
    resource = function.node.default_child
    assert isinstance(resource, lambda_.CfnFunction)  # a Function's default child
    resource.tracing_config = lambda_.CfnFunction.TracingConfigProperty(
        mode=TRACING_MODES[policy.consumer.tracing]
    )

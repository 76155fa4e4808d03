"""Names sweeper gives its resources, the same from the root stack and from a policy's stack."""

from __future__ import annotations

from aws_cdk import Stack
from constructs import Construct


def deployment_name(scope: Construct) -> str:
    """The root stack's name, also from inside a nested stack (whose own name is a token
    CloudFormation makes up): the prefix of every name sweeper gives a resource."""
    stack = Stack.of(scope)
    while stack.nested_stack_parent is not None:
        stack = stack.nested_stack_parent
    return stack.stack_name

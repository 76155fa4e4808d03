"""A resource policy that admits listed senders only: an Allow for them, and a Deny for every
other principal its conditions match, however broad that principal's identity policy.

Within one account an Allow in either the identity policy or the resource's policy is enough,
so only an explicit Deny keeps the others out. The work queues (infra/queues.py) and the intake
bus (infra/intake_bus.py) are written with these two statements.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from aws_cdk import aws_iam as iam


def senders_allowed(arns: Sequence[str], action: str, resource: str) -> iam.PolicyStatement:
    """Allow `action` on `resource` to these principals (needed for a sender of another
    account; for one of this account, one Allow of two)."""
    return iam.PolicyStatement(
        sid="SendersAllowed",
        principals=[iam.ArnPrincipal(arn) for arn in arns],
        actions=[action],
        resources=[resource],
    )


def denied_to_every_other(
    sid: str, action: str, resource: str, conditions: Mapping[str, Mapping[str, object]]
) -> iam.PolicyStatement:
    """Deny `action` on `resource` to any principal `conditions` match."""
    return iam.PolicyStatement(
        sid=sid,
        effect=iam.Effect.DENY,
        principals=[iam.AnyPrincipal()],
        actions=[action],
        resources=[resource],
        conditions={key: dict(value) for key, value in conditions.items()},
    )

"""cdk-nag acknowledgments: each one specific (one rule, one finding) and with its reason."""

from __future__ import annotations

from aws_cdk import Acknowledgment, Validations
from constructs import IConstruct


def acknowledge(scope: IConstruct, rule: str, reason: str) -> None:
    """Accept one cdk-nag finding on `scope` (and what it contains), saying why.

    `rule` names a single finding, e.g. `AwsSolutions-IAM5[Resource::*]`: cdk-nag v3 has no
    prefix matching, so an acknowledgment never silences more than it names.
    """
    if len(reason.split()) < 8:
        raise ValueError(f"the reason for acknowledging {rule} must explain itself")
    Validations.of(scope).acknowledge(Acknowledgment(id=rule, reason=reason))

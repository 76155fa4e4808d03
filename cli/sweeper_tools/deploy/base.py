"""What an action kind provides to the operator tools: the deploy-time half of its provider.

A kind's runtime half (its config model, its `Action`, its outcome mapping) ships in the Lambda
layer (`sweeper.actions`). What only a deploy asks of it lives here, one module per kind keyed
by `action.kind` (`sweeper_tools.deploy.deploy_for`): the IAM grants and network path the CDK
app turns into statements, endpoints and security-group rules (`Grant`, `NetworkPath`: plain
data), what synth warns of or refuses, the code it ships as a layer of its own, what
`sweeper doctor` checks before a deploy, what `sweeper smoke` asks before its canary, and where
a rehearsal's calls go. The caller asks `deploy_for(action)` and never which kind it got.
"""

from __future__ import annotations

import enum
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from sweeper.actions.base import ActionContext, ActionKind
from sweeper.actions.secret_template import is_secret_template, parse_secret_template
from sweeper.models import ActionCall


class AwsService(enum.StrEnum):
    """An AWS API a kind's implementation calls from the consumer, reached through a VPC
    endpoint of the CDK app's network (gateway or interface, the app knows which)."""

    SECRETS_MANAGER = "secretsmanager"
    S3 = "s3"
    LAMBDA = "lambda"


@dataclass(frozen=True, slots=True)
class Grant:
    """One IAM statement the consumer's role needs: these actions on these resources (ARNs)."""

    actions: tuple[str, ...]
    resources: tuple[str, ...]
    #: IAM conditions as (operator, key, values), e.g. ("StringLike", "s3:prefix", ("a/*",)).
    conditions: tuple[tuple[str, str, tuple[str, ...]], ...] = ()
    #: Why a resource with a wildcard is as narrow as it can be (the CDK app states it to
    #: cdk-nag for exactly those resources); required when a resource holds one.
    wildcard_reason: str = ""

    def condition_block(self) -> dict[str, dict[str, list[str]]]:
        """The conditions as an IAM policy's Condition block."""
        block: dict[str, dict[str, list[str]]] = {}
        for operator, key, values in self.conditions:
            block.setdefault(operator, {})[key] = list(values)
        return block


@dataclass(frozen=True, slots=True)
class NetworkPath:
    """Where the consumer must reach for a kind: AWS APIs through endpoints, and hosts outside
    AWS (a vendor) on these TCP ports, through NAT."""

    aws_services: frozenset[AwsService] = frozenset()
    internet_ports: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class Preflight:
    """One thing `sweeper doctor` checked for a kind before a deploy: `ok` is None when it could
    not tell (a warning), False when the deploy would work but every call would fail."""

    name: str
    ok: bool | None
    detail: str
    fix: str | None = None


def unreadable(name: str, reason: str, fix: str | None = None) -> list[Preflight]:
    """A preflight that could not tell (a warning): what was in the way, and how to check."""
    return [Preflight(name, None, f"could not be read: {reason}", fix)]


@dataclass(frozen=True, slots=True)
class KindCheck:
    """One finding of `sweeper doctor` about a kind's config (e.g. its secret is readable, its
    token endpoint answers): `ok`, `warn` (could not be verified from here) or `fail`, and the
    one-line fix. Never carries a secret."""

    name: str
    status: Literal["ok", "warn", "fail"]
    detail: str
    fix: str = ""


#: A Secrets Manager ARN ends with six random characters after the name's last hyphen.
_COMPLETE_SECRET_ARN_SUFFIX_LENGTH = 6


def secret_read(*arns: str) -> Grant:
    """GetSecretValue on these secrets, named by complete or partial ARN (a partial one, without
    the six random characters, is matched by `-??????`), and nothing else."""
    resources: list[str] = []
    reason = ""
    for arn in arns:
        if is_secret_template(arn):
            # a secret per tenant: every secret under the template's fixed path, no more
            resources.append(f"{parse_secret_template(arn).before}*")
            reason = "a secret per tenant: the secrets under the template's own fixed path"
            continue
        suffix = arn.rsplit("-", 1)[-1]
        complete = "-" in arn and len(suffix) == _COMPLETE_SECRET_ARN_SUFFIX_LENGTH
        resources.append(arn if complete else f"{arn}-??????")
    return Grant(
        actions=("secretsmanager:GetSecretValue",),
        resources=tuple(resources),
        wildcard_reason=reason,
    )


class DeployKind[C: ActionKind](ABC):
    """The deploy-time contract of one action kind, over its validated config."""

    def __init__(self, config: C) -> None:
        self.config = config

    @abstractmethod
    def grants(self) -> tuple[Grant, ...]:
        """The IAM statements the consumer needs to carry out this kind, and nothing more."""

    @abstractmethod
    def network_path(self) -> NetworkPath:
        """Where the consumer must be able to reach."""

    def describe(self) -> str:
        """One line naming what the action does (`sweeper plan`, `smoke`): never a secret."""
        return f"{self.config.kind}: {self.target}"

    @property
    def target(self) -> str:
        """What the consumer calls, in words for `smoke` and `doctor` ("the vendor")."""
        return "the vendor"

    def doctor_checks(self, context: ActionContext, timeout_seconds: float) -> list[KindCheck]:
        """What `sweeper doctor` verifies of this config from the operator's account, without
        any effect (reading its secrets, asking for a token); none by default."""
        return []

    def call_problem(self, job: ActionCall) -> str | None:
        """Why `job` could not be sent (a template field it lacks), as a short code; None when
        it could. Sends nothing (`sweeper smoke` asks this of its canary before releasing)."""
        return None

    def synth_warnings(self) -> list[str]:
        """What the CDK app should say at synth about this config (e.g. a plain-HTTP vendor)."""
        return []

    def layer_dir(self, policy_dir: Path) -> Path | None:
        """A directory of the team's own code that the CDK app ships as a layer of its own
        (and the local stack puts on the consumer's path); relative paths in the policy are
        resolved against `policy_dir`, the policy file's directory. None: no such code."""
        return None

    def synth_errors(self, policy_dir: Path) -> list[str]:
        """What makes `make synth` fail for this config, one line each (e.g. code that cannot
        be imported)."""
        return []

    def preflight(self, client: Callable[[str], Any], policy_dir: Path) -> list[Preflight]:
        """`sweeper doctor`'s checks of what this kind calls (`client(service)` builds a boto3
        client of the target account): read-only."""
        return []

    def rehearsal_problem(self) -> str | None:
        """Why a rehearsal against `--api-url` could not send every call of this config there
        or to the local stack's own stand-ins (the local stack then refuses to start it); None
        when it can. A kind that does not say is refused: a new kind is not trusted to stay
        local."""
        return f"the {self.config.kind} kind does not say where its calls go in a rehearsal"

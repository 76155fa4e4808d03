"""The `lambda` kind's deploy-time half (see sweeper_tools.deploy.base): its grant
(`lambda:InvokeFunction` on that function, its versions and aliases, nothing else), its network
path (the Lambda interface endpoint) and `sweeper doctor`'s check that the function exists."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from sweeper.actions.lambda_invoke import LambdaActionConfig
from sweeper_tools.deploy.base import (
    AwsService,
    DeployKind,
    Grant,
    NetworkPath,
    Preflight,
    unreadable,
)


class LambdaDeploy(DeployKind[LambdaActionConfig]):
    """The `lambda` kind to the CDK app, `doctor` and the local stack."""

    @property
    def target(self) -> str:
        return f"function {self.config.function_name}"

    def grants(self) -> tuple[Grant, ...]:
        """InvokeFunction on the function and its versions and aliases; nothing else."""
        arn = self.config.function_arn
        return (
            Grant(
                actions=("lambda:InvokeFunction",),
                resources=(arn, f"{arn}:*"),
                wildcard_reason=(
                    "InvokeFunction on the team's own function and its versions and aliases "
                    "only (ARN:qualifier), the qualifier being the team's to move"
                ),
            ),
        )

    def network_path(self) -> NetworkPath:
        """The Lambda API through the VPC's interface endpoint; nothing through NAT."""
        return NetworkPath(aws_services=frozenset({AwsService.LAMBDA}))

    def rehearsal_problem(self) -> str | None:
        """None: its Lambda client follows the local stack's AWS endpoint (the emulator, where
        the team's function does not run: each call fails there, none reaches AWS)."""
        return None

    def preflight(self, client: Callable[[str], Any], policy_dir: Path) -> list[Preflight]:
        """The function exists (GetFunctionConfiguration), at the qualifier when set."""
        config = self.config
        name = f"function {config.function_name}"
        request: dict[str, Any] = {"FunctionName": config.function_arn}
        if config.qualifier:
            request["Qualifier"] = config.qualifier
        try:
            client("lambda").get_function_configuration(**request)
        except ClientError as exc:
            code = str(exc.response.get("Error", {}).get("Code", "unknown"))
            if code == "ResourceNotFoundException":
                return [
                    Preflight(
                        name,
                        False,
                        "does not exist" + (f" at {config.qualifier}" if config.qualifier else ""),
                        "deploy it first, or correct action.function_arn / qualifier",
                    )
                ]
            return unreadable(
                name,
                code,
                "let the deploying identity call GetFunctionConfiguration, or check by hand",
            )
        except BotoCoreError as exc:
            return unreadable(name, type(exc).__name__)
        return [Preflight(name, True, "exists")]

"""The `s3_delete` kind's deploy-time half (see sweeper_tools.deploy.base): its grants
(`s3:DeleteObject` on the key template's fixed prefix; `s3:ListBucket` on the bucket for keys
under that prefix only), its network path (S3's gateway endpoint) and `sweeper doctor`'s check
that the bucket is there."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from sweeper.actions.s3_delete import S3DeleteActionConfig
from sweeper_tools.deploy.base import (
    AwsService,
    DeployKind,
    Grant,
    NetworkPath,
    Preflight,
    unreadable,
)


class S3DeleteDeploy(DeployKind[S3DeleteActionConfig]):
    """The `s3_delete` kind to the CDK app, `doctor` and the local stack."""

    @property
    def target(self) -> str:
        return f"bucket {self.config.bucket}"

    def grants(self) -> tuple[Grant, ...]:
        """DeleteObject under the prefix; ListBucket (for the existence check) for keys
        under the prefix only. Nothing to read an object's content, nothing else."""
        bucket_arn = f"arn:aws:s3:::{self.config.bucket}"
        prefix = self.config.prefix
        return (
            Grant(
                actions=("s3:DeleteObject",),
                resources=(f"{bucket_arn}/{prefix}*",),
                wildcard_reason=(
                    "DeleteObject only below the key template's fixed prefix: the keys under it "
                    "are the obligations, found at run time, never known when deploying"
                ),
            ),
            Grant(
                actions=("s3:ListBucket",),
                resources=(bucket_arn,),
                conditions=(("StringLike", "s3:prefix", (f"{prefix}*",)),),
            ),
        )

    def network_path(self) -> NetworkPath:
        """S3 through the VPC's gateway endpoint; nothing through NAT."""
        return NetworkPath(aws_services=frozenset({AwsService.S3}))

    def rehearsal_problem(self) -> str | None:
        """None: its S3 client follows the local stack's AWS endpoint (the emulator's S3)."""
        return None

    def preflight(self, client: Callable[[str], Any], policy_dir: Path) -> list[Preflight]:
        """The bucket exists and this identity reaches it (HeadBucket)."""
        name = f"bucket {self.config.bucket}"
        try:
            client("s3").head_bucket(Bucket=self.config.bucket)
        except ClientError as exc:
            error = exc.response.get("Error", {})
            status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
            code = str(error.get("Code") or status)
            if code in {"404", "NoSuchBucket", "NotFound"}:
                return [
                    Preflight(name, False, "does not exist", "create it, or correct action.bucket")
                ]
            return unreadable(
                name, code, "let the deploying identity call HeadBucket on it, or check it by hand"
            )
        except BotoCoreError as exc:
            return unreadable(name, type(exc).__name__)
        return [Preflight(name, True, "reachable")]

"""Where the operator's commands reach: the local stack's file, or a deployed stack on AWS.

`sweeper local up` writes `.sweeper/local.json` (a `LocalFile`); when it is present every command
uses its database URL, AWS endpoint, queues and tables. Otherwise the commands use AWS (`--region`,
`--profile`), the deployed stack's outputs (`--stack`) for queues, functions and tables, and
`--database-url` for the ledger. The commands run the same code either way.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import boto3
from botocore.config import Config as BotoConfig
from botocore.exceptions import BotoCoreError, ClientError
from pydantic import BaseModel, ConfigDict, ValidationError

from sweeper.errors import OperatorError
from sweeper.ledger.wake import DynamoWakeStore

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_lambda import LambdaClient
    from mypy_boto3_sqs import SQSClient

DEFAULT_LOCAL_FILE = ".sweeper/local.json"
DEFAULT_STACK = "Sweeper"
#: The local stack names each policy's consumer like this (the deployed one is in the outputs).
LOCAL_CONSUMER_FUNCTION = "sweeper-{policy}-consumer"


class PolicyEndpoints(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    queue_url: str | None = None
    dlq_url: str | None = None
    consumer_function: str | None = None
    producer_function: str | None = None
    intake_queue_url: str | None = None
    intake_dlq_url: str | None = None


class LocalFile(BaseModel):
    """What `sweeper local up` writes: where each part of the local stack listens."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    pid: int
    database_url: str
    aws_endpoint_url: str
    #: Services served elsewhere than `aws_endpoint_url` (the local stack's SQS and DynamoDB
    #: stand-in): botocore service name -> endpoint.
    service_endpoint_urls: dict[str, str] = {}
    region: str
    vendor_url: str | None
    limiter_table: str
    idempotency_table: str
    log_file: str | None
    config: str
    policies: dict[str, PolicyEndpoints]
    #: When the producers' schedules were anchored, and the tick that overrides them (if any).
    started_at: datetime | None = None
    tick_seconds: float | None = None
    #: The webhook on loopback (`POST {webhook_url}/v1/hints/{policy}`) and the secret that
    #: signs its requests (the local emulator's, made at start; never a deployed one).
    webhook_url: str | None = None
    webhook_secret: str | None = None
    #: Where a local stand-in of the operator API listens, by the stack output names
    #: (`OperatorApiUrl`, `OperatorApiReadOnlyUrl`); None when none runs.
    operator_api: dict[str, str] | None = None

    def write(self, path: Path) -> None:
        """Write atomically: a reader sees the old file or the whole new one."""
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_suffix(".partial")
        partial.write_text(self.model_dump_json(indent=2), encoding="utf-8")
        partial.replace(path)


def read_local_file(path: Path) -> LocalFile | None:
    """The local stack's file, or None when there is none."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    try:
        return LocalFile.model_validate(json.loads(text))
    except (ValueError, ValidationError) as exc:
        raise OperatorError(
            f"{path} is not a local stack file; remove it or run `sweeper local up`"
        ) from exc


def pascal_case(name: str) -> str:
    """`data-exports` -> `DataExports`, as the CDK app names each policy's outputs."""
    return "".join(part.capitalize() for part in name.split("-"))


@dataclass
class Endpoints:
    """The resolved target of a command."""

    mode: str  # "local" or "aws"
    session: boto3.Session
    database_url: str | None
    endpoint_url: str | None = None
    #: Per-service endpoints that override `endpoint_url` (the local file's).
    service_endpoint_urls: dict[str, str] = field(default_factory=dict)
    stack: str | None = None
    local: LocalFile | None = None
    _outputs: dict[str, str] | None = field(default=None, repr=False)

    def _client(self, service: str, config: BotoConfig | None = None) -> Any:
        try:
            return self.session.client(  # type: ignore[call-overload]
                service,
                endpoint_url=self.service_endpoint_urls.get(service, self.endpoint_url),
                config=config,
            )
        except BotoCoreError as exc:  # no region, an unknown profile, ...
            raise OperatorError(
                f"cannot reach AWS ({type(exc).__name__}): pass --region (or set AWS_REGION) "
                "and --profile, or start `sweeper local up`"
            ) from exc

    def sqs(self) -> SQSClient:
        client: SQSClient = self._client("sqs")
        return client

    def dynamodb(self) -> DynamoDBClient:
        client: DynamoDBClient = self._client("dynamodb")
        return client

    def wake_store(self) -> DynamoWakeStore | None:
        """The policies' wake items beside this ledger (sweeper.ledger.wake): in the limiter
        table; an operator's write lowers them like any other. None when no stack is in reach
        (a bare database URL without AWS): its writes lower nothing (docs/architecture.md)."""
        try:
            table = self.limiter_table()
        except OperatorError:
            return None
        return None if table is None else DynamoWakeStore(self.dynamodb(), table)

    def s3(self) -> Any:
        """An S3 client (discovery's `ListsObjects`; the S3 stubs are not a dependency)."""
        return self._client("s3")

    def cloudwatch(self) -> Any:
        """A CloudWatch client (untyped: the project installs no CloudWatch stubs)."""
        return self._client("cloudwatch")

    def lambda_client(self, config: BotoConfig | None = None) -> LambdaClient:
        client: LambdaClient = self._client("lambda", config)
        return client

    @property
    def region(self) -> str:
        return self.session.region_name or ""

    def require_database(self) -> str:
        if not self.database_url:
            raise OperatorError(
                "no ledger: pass --stack S to go through the stack's operator API, or "
                "--database-url (or DATABASE_URL), or start `sweeper local up`"
            )
        return self.database_url

    def outputs(self) -> dict[str, str]:
        """The deployed stack's outputs (read once)."""
        if self._outputs is None:
            try:
                stacks = self._client("cloudformation").describe_stacks(StackName=self.stack)
            except (ClientError, BotoCoreError) as exc:
                raise OperatorError(
                    f"cannot read the outputs of stack {self.stack!r}: {type(exc).__name__} "
                    "(check --stack, --region and --profile, or start `sweeper local up`)"
                ) from exc
            outputs = stacks["Stacks"][0].get("Outputs", [])
            self._outputs = {o["OutputKey"]: o["OutputValue"] for o in outputs}
        return self._outputs

    def policy(self, name: str) -> PolicyEndpoints:
        if self.local is not None:
            found = self.local.policies.get(name)
            if found is None:
                raise OperatorError(f"the local stack does not run policy {name!r}")
            return found
        outputs = self.outputs()
        prefix = pascal_case(name)
        return PolicyEndpoints(
            queue_url=outputs.get(f"{prefix}QueueUrl"),
            dlq_url=outputs.get(f"{prefix}DeadLetterQueueUrl"),
            consumer_function=outputs.get(f"{prefix}ConsumerFunctionName"),
            producer_function=outputs.get(f"{prefix}ProducerFunctionName"),
            intake_queue_url=outputs.get(f"{prefix}IntakeQueueUrl"),
            intake_dlq_url=outputs.get(f"{prefix}IntakeDeadLetterQueueUrl"),
        )

    def operator_api_outputs(self) -> dict[str, str]:
        """The outputs naming the operator API's URLs (the stack's, or the local stand-in's)."""
        if self.local is not None:
            return dict(self.local.operator_api or {})
        return self.outputs()

    def limiter_table(self) -> str | None:
        if self.local is not None:
            return self.local.limiter_table
        return self.outputs().get("LimiterTableName")


def resolve(
    *,
    local_file: str | None,
    database_url: str | None,
    region: str | None,
    profile: str | None,
    stack: str | None,
) -> Endpoints:
    """The local stack when its file exists, else AWS."""
    path = Path(local_file or DEFAULT_LOCAL_FILE)
    local = read_local_file(path)
    if local is not None:
        _check_alive(local, path)
        session = boto3.Session(
            aws_access_key_id="testing",
            aws_secret_access_key="testing",  # noqa: S106 - the local emulator's fixed key
            region_name=local.region,
        )
        return Endpoints(
            "local",
            session,
            database_url or local.database_url,
            endpoint_url=local.aws_endpoint_url,
            service_endpoint_urls=dict(local.service_endpoint_urls),
            local=local,
        )
    try:
        session = boto3.Session(region_name=region, profile_name=profile)
    except BotoCoreError as exc:
        raise OperatorError(f"AWS session: {exc}") from exc
    return Endpoints("aws", session, database_url, stack=stack or DEFAULT_STACK)


def _check_alive(local: LocalFile, path: Path) -> None:
    try:
        os.kill(local.pid, 0)
    except ProcessLookupError as exc:
        raise OperatorError(
            f"{path} names a local stack that is not running (pid {local.pid}); "
            "run `sweeper local down` to clean up, then `sweeper local up`"
        ) from exc
    except PermissionError:
        pass  # it exists, under another user

"""Where an operator command reaches: a deployed stack's outputs, or the local stack's file.

The operator API's function builds its `Endpoints` from its environment; the CLI resolves one
from `.sweeper/local.json` (a `LocalFile`, which `sweeper local up` writes) or from AWS
(`sweeper_tools.endpoints.resolve`). The commands run the same code either way.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

import boto3
from botocore.config import Config as BotoConfig
from botocore.exceptions import BotoCoreError, ClientError
from pydantic import BaseModel, ConfigDict

from sweeper.errors import OperatorError

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_lambda import LambdaClient
    from mypy_boto3_sqs import SQSClient


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

    def client(self, service: str, config: BotoConfig | None = None) -> Any:
        """A boto3 client of `service` at this target (untyped: for services without stubs)."""
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
        client: SQSClient = self.client("sqs")
        return client

    def dynamodb(self) -> DynamoDBClient:
        client: DynamoDBClient = self.client("dynamodb")
        return client

    def s3(self) -> Any:
        """An S3 client (discovery's `ListsObjects`; the S3 stubs are not a dependency)."""
        return self.client("s3")

    def lambda_client(self, config: BotoConfig | None = None) -> LambdaClient:
        client: LambdaClient = self.client("lambda", config)
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
                stacks = self.client("cloudformation").describe_stacks(StackName=self.stack)
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

    def limiter_table(self) -> str | None:
        if self.local is not None:
            return self.local.limiter_table
        return self.outputs().get("LimiterTableName")

"""AWS APIs on this machine: moto in server mode (a real HTTP endpoint), and the resources the
CDK app would create (work queue with its DLQ, the idempotency table) made with plain boto3.

The application's boto3 code is unchanged: it reaches moto through AWS_ENDPOINT_URL.
"""

from __future__ import annotations

import json
import os
import secrets as secrets_module
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Self

import boto3
from botocore.config import Config as BotoConfig

from sweeper.config import Policy
from sweeper_local.errors import LocalStackError
from sweeper_local.lite_aws import REQUESTS_PATH
from sweeper_local.postgres import START_TIMEOUT_SECONDS, free_port
from sweeper_local.service import Service

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_sqs import SQSClient

LOCAL_REGION = "us-east-1"
#: Longer than the work queue's retention: a DLQ message keeps its original enqueue time.
DLQ_RETENTION_SECONDS = 14 * 86_400
QUEUE_RETENTION_SECONDS = 4 * 86_400


def local_credentials_env(endpoint_url: str) -> dict[str, str]:
    """Environment that points any boto3 client in any process at the local endpoint."""
    return {
        "AWS_ENDPOINT_URL": endpoint_url,
        "AWS_DEFAULT_REGION": LOCAL_REGION,
        "AWS_REGION": LOCAL_REGION,
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
    }


#: `SWEEPER_LOCAL_AWS=moto` puts SQS and DynamoDB back on moto wherever the local stack starts
#: (demo, `local up`, drills, tests), to compare the two; unset or `lite`: the stand-in.
LOCAL_AWS_ENV = "SWEEPER_LOCAL_AWS"
LOCAL_AWS_CHOICES = ("lite", "moto")


def lite_by_default() -> bool:
    """Whether SQS and DynamoDB go to the stand-in when a caller does not say."""
    chosen = os.environ.get(LOCAL_AWS_ENV, "lite") or "lite"
    if chosen not in LOCAL_AWS_CHOICES:
        raise LocalStackError(f"{LOCAL_AWS_ENV} must be one of {', '.join(LOCAL_AWS_CHOICES)}")
    return chosen == "lite"


class LocalAws(Service):
    """The AWS APIs on loopback: SQS and DynamoDB on `sweeper_local.lite_aws`, the rest on moto
    in server mode, each in a process of its own on a free loopback port.

    Processes of their own, not threads of ours: request handling is CPU-bound Python, and
    sharing our interpreter would make every AWS call wait for the caller's own work.

    SQS and DynamoDB are on the stand-in because moto measures itself at real rates: its
    receive slows with the queue's depth and its DynamoDB carries a couple of hundred
    writes/s (docs/local-stack.md, "Which emulator"). `lite=False` (or `SWEEPER_LOCAL_AWS=moto`)
    keeps them on moto.
    """

    def __init__(self, port: int = 0, *, lite: bool | None = None, lite_port: int = 0) -> None:
        self.port = port
        if lite is None:
            # A server already running (its port given) is lite only when its lite port is.
            lite = bool(lite_port) if port else lite_by_default()
        self.lite = lite or bool(lite_port)
        self.lite_port = lite_port
        self._proc: subprocess.Popen[bytes] | None = None
        self._lite_proc: subprocess.Popen[bytes] | None = None

    @property
    def endpoint_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def lite_endpoint_url(self) -> str | None:
        """Where SQS and DynamoDB are served when they are not on moto."""
        return f"http://127.0.0.1:{self.lite_port}" if self.lite else None

    def start(self) -> Self:
        self.port = self.port or free_port()
        # Both servers start at once; each is then waited for until it listens.
        self._proc = _spawn("sweeper_local.moto_server", self.port)
        try:
            if self.lite:
                self.lite_port = self.lite_port or free_port()
                self._lite_proc = _spawn("sweeper_local.lite_aws", self.lite_port)
            _await_listening(self._proc, self.port, "moto server")
            if self._lite_proc is not None:
                _await_listening(self._lite_proc, self.lite_port, "lite AWS")
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        running = [proc for proc in (self._lite_proc, self._proc) if proc is not None]
        for proc in running:  # both are told at once, then each is waited for
            proc.terminate()
        for proc in running:
            _end(proc)
        self._proc = self._lite_proc = None

    def env(self) -> dict[str, str]:
        env = local_credentials_env(self.endpoint_url)
        if self.lite_endpoint_url is not None:
            # botocore's service-specific endpoints: only these two services leave moto.
            env["AWS_ENDPOINT_URL_SQS"] = self.lite_endpoint_url
            env["AWS_ENDPOINT_URL_DYNAMODB"] = self.lite_endpoint_url
        return env

    def service_endpoint_urls(self) -> dict[str, str]:
        """The services not on moto's endpoint, and where they are (the local file names them)."""
        lite = self.lite_endpoint_url
        return {} if lite is None else {"sqs": lite, "dynamodb": lite}

    def requests(self) -> dict[str, int]:
        """SQS and DynamoDB requests served so far, by `service:Operation` (lite only)."""
        if self.lite_endpoint_url is None:
            raise LocalStackError("request counts come from the lite AWS endpoint only")
        with urllib.request.urlopen(  # noqa: S310 - loopback URL built here
            self.lite_endpoint_url + REQUESTS_PATH, timeout=10
        ) as answer:
            counts: dict[str, int] = json.load(answer)["requests"]
        return counts

    def _client_kwargs(self, service: str = "") -> dict[str, object]:
        lite = service in ("sqs", "dynamodb") and self.lite_endpoint_url is not None
        return {
            "endpoint_url": self.lite_endpoint_url if lite else self.endpoint_url,
            "region_name": LOCAL_REGION,
            "aws_access_key_id": "testing",
            "aws_secret_access_key": "testing",
            "config": BotoConfig(retries={"max_attempts": 2, "mode": "standard"}),
        }

    def sqs(self) -> SQSClient:
        return boto3.client("sqs", **self._client_kwargs("sqs"))  # type: ignore[call-overload,no-any-return]

    def dynamodb(self) -> DynamoDBClient:
        return boto3.client("dynamodb", **self._client_kwargs("dynamodb"))  # type: ignore[call-overload,no-any-return]

    def s3(self) -> Any:
        """An S3 client (untyped: the S3 stubs are not a dependency; discovery's seam is typed)."""
        return boto3.client("s3", **self._client_kwargs())  # type: ignore[call-overload]

    def secretsmanager(self) -> Any:
        return boto3.client("secretsmanager", **self._client_kwargs())  # type: ignore[call-overload]


def _spawn(module: str, port: int) -> subprocess.Popen[bytes]:
    """Start `python -m module -H 127.0.0.1 -p port` (_await_listening waits for it)."""
    return subprocess.Popen(  # noqa: S603 - fixed argv, no shell
        [sys.executable, "-m", module, "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def _await_listening(proc: subprocess.Popen[bytes], port: int, what: str) -> None:
    """Return once the server listens on `port`; raise if it exits or does not in time."""
    deadline = time.monotonic() + START_TIMEOUT_SECONDS
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise LocalStackError(f"{what} exited at start ({proc.returncode})")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.05)
    _end(proc)
    raise LocalStackError(f"{what} did not listen within {START_TIMEOUT_SECONDS}s")


def _end(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


@dataclass(frozen=True, slots=True)
class PipelineResources:
    queue_url: str
    queue_arn: str
    dlq_url: str
    dlq_arn: str
    idempotency_table: str
    limiter_table: str


def provision(
    sqs: SQSClient,
    dynamodb: DynamoDBClient,
    policy: Policy,
    *,
    prefix: str = "sweeper",
    visibility_timeout_seconds: int | None = None,
) -> PipelineResources:
    """Create (or find) the policy's queues and the idempotency table, as the CDK app does."""
    base = f"{prefix}-{policy.name}"
    dlq_url = sqs.create_queue(
        QueueName=f"{base}-dlq",
        Attributes={"MessageRetentionPeriod": str(DLQ_RETENTION_SECONDS)},
    )["QueueUrl"]
    dlq_arn = sqs.get_queue_attributes(QueueUrl=dlq_url, AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"
    ]
    visibility = visibility_timeout_seconds or policy.consumer.visibility_timeout_seconds
    queue_url = sqs.create_queue(
        QueueName=f"{base}-work",
        Attributes={
            "VisibilityTimeout": str(visibility),
            "MessageRetentionPeriod": str(QUEUE_RETENTION_SECONDS),
            "RedrivePolicy": json.dumps(
                {
                    "deadLetterTargetArn": dlq_arn,
                    "maxReceiveCount": policy.consumer.max_receive_count,
                }
            ),
        },
    )["QueueUrl"]
    queue_arn = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["QueueArn"])[
        "Attributes"
    ]["QueueArn"]
    table = _table(dynamodb, f"{prefix}-idempotency", key="id", ttl="expiration")
    limiter = _table(dynamodb, f"{prefix}-limiter", key="pk", ttl="expires_at")
    return PipelineResources(queue_url, queue_arn, dlq_url, dlq_arn, table, limiter)


def _table(dynamodb: DynamoDBClient, name: str, *, key: str, ttl: str) -> str:
    """An on-demand table with a string partition key and TTL, as tables.py in infra/ makes."""
    if name not in dynamodb.list_tables()["TableNames"]:
        dynamodb.create_table(
            TableName=name,
            KeySchema=[{"AttributeName": key, "KeyType": "HASH"}],
            AttributeDefinitions=[{"AttributeName": key, "AttributeType": "S"}],
            BillingMode="PAY_PER_REQUEST",
        )
        dynamodb.update_time_to_live(
            TableName=name, TimeToLiveSpecification={"Enabled": True, "AttributeName": ttl}
        )
    return name


@dataclass(frozen=True, slots=True)
class IntakeResources:
    queue_url: str
    queue_arn: str
    dlq_url: str
    replay_table: str
    secret_arn: str


def provision_intake(
    sqs: SQSClient,
    dynamodb: DynamoDBClient,
    secrets: Any,  # a secretsmanager client (no stubs are installed for it)
    policy: Policy,
    *,
    prefix: str = "sweeper",
    secret_value: str | None = None,
) -> IntakeResources:
    """Create (or find) the policy's intake queue, its DLQ, the replay table and the webhook's
    signing secret, as infra/intake.py does. An existing secret keeps its value."""
    base = f"{prefix}-{policy.name}"
    dlq_url = sqs.create_queue(
        QueueName=f"{base}-intake-dlq",
        Attributes={"MessageRetentionPeriod": str(DLQ_RETENTION_SECONDS)},
    )["QueueUrl"]
    dlq_arn = sqs.get_queue_attributes(QueueUrl=dlq_url, AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"
    ]
    queue_url = sqs.create_queue(
        QueueName=f"{base}-intake",
        Attributes={
            "VisibilityTimeout": str(policy.intake.visibility_timeout_seconds),
            "MessageRetentionPeriod": str(QUEUE_RETENTION_SECONDS),
            "RedrivePolicy": json.dumps(
                {"deadLetterTargetArn": dlq_arn, "maxReceiveCount": policy.intake.max_receive_count}
            ),
        },
    )["QueueUrl"]
    queue_arn = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["QueueArn"])[
        "Attributes"
    ]["QueueArn"]
    table = _table(dynamodb, f"{prefix}-replay", key="pk", ttl="expires_at")
    name = f"{base}-webhook"
    try:
        secret_arn = secrets.describe_secret(SecretId=name)["ARN"]
    except secrets.exceptions.ResourceNotFoundException:
        value = secret_value or secrets_module.token_hex(32)
        secret_arn = secrets.create_secret(Name=name, SecretString=value)["ARN"]
    return IntakeResources(queue_url, queue_arn, dlq_url, table, secret_arn)

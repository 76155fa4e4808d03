"""A consumer's first batch builds only the AWS clients it uses: one DynamoDB client shared by
the limiter and idempotency, and a Secrets Manager client only when a secret is first read."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from typing import Any

# Imported at collection, while sockets are allowed: its import opens the X-Ray UDP emitter's
# socket, which the test (sockets blocked) would otherwise open if no earlier test had.
import aws_xray_sdk.core  # type: ignore[import-untyped]  # noqa: F401
import boto3
import pytest
from botocore.session import Session

from sweeper import runtime
from sweeper.config import Policy
from sweeper.limiter import DynamoLimiter


@pytest.fixture
def built(monkeypatch: pytest.MonkeyPatch) -> Iterator[Counter[str]]:
    """A consumer's environment; yields the clients built, by service, as they are built."""
    monkeypatch.setenv("SWEEPER_POLICY", Policy(name="p").model_dump_json())
    monkeypatch.setenv("SWEEPER_DATABASE_URL", "postgresql://me@localhost/db")
    monkeypatch.setenv("SWEEPER_IDEMPOTENCY_TABLE", "idempotency")
    monkeypatch.setenv("SWEEPER_LIMITER_TABLE", "limiter")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "eu-west-1")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    counts: Counter[str] = Counter()
    create = Session.create_client

    def counting(self: Session, service_name: str, *args: Any, **kwargs: Any) -> Any:
        counts[service_name] += 1
        return create(self, service_name, *args, **kwargs)

    monkeypatch.setattr(Session, "create_client", counting)
    runtime.reset()
    yield counts
    runtime.reset()


def test_idempotency_and_the_limiter_share_one_dynamodb_client(built: Counter[str]) -> None:
    # When a consumer builds its guarded call and its limiter (its first batch does both)
    runtime.guarded_call()
    runtime.consumer_limiter()
    # Then one DynamoDB client serves both (Powertools builds no session or client of its own)
    assert built["dynamodb"] == 1


def test_a_consumer_asks_the_shared_limiter_whatever_a_benchmark_variable_says(
    built: Counter[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given the variables that once picked a benchmark baseline, on a local database
    monkeypatch.setenv("SWEEPER_LIMITER_MODE", "off")
    monkeypatch.setenv("SWEEPER_LOCAL_STACK", "1")
    runtime.reset()
    # When a consumer builds its limiter, Then it is the shared one: the layer holds no other
    assert isinstance(runtime.consumer_limiter(), DynamoLimiter)


def test_an_action_without_a_secret_builds_no_secrets_manager_client(built: Counter[str]) -> None:
    # Given the policy's HTTP action, which reads no secret
    runtime.action()
    # Then no Secrets Manager client was built for it
    assert built["secretsmanager"] == 0


class _SecretsManager:
    def __init__(self) -> None:
        self.reads = 0

    def get_secret_value(self, **_: Any) -> dict[str, str]:
        self.reads += 1
        return {"SecretString": f"token-{self.reads}"}


def test_the_first_secret_read_builds_the_client_and_later_reads_reuse_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Given the provider an action is built with, and no client yet
    clients: list[_SecretsManager] = []

    def client(service: str) -> _SecretsManager:
        assert service == "secretsmanager"
        clients.append(_SecretsManager())
        return clients[-1]

    monkeypatch.setattr(boto3, "client", client)
    provider = runtime.SecretsOnFirstRead()
    assert clients == []
    # When the secret is read, then read again past the cache
    first = provider.get("arn:secret", max_age=60)
    again = provider.get("arn:secret", max_age=60, force_fetch=True)
    # Then one client was built, on the first read, and both reads went through it
    assert (first, again) == ("token-1", "token-2")
    assert len(clients) == 1
    assert clients[0].reads == 2

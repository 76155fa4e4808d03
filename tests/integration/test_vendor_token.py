"""The vendor's API token: read per call through the Powertools cache, re-read once on AUTH.

Against the local Secrets Manager (moto) and a vendor that accepts one token at a time.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from aws_lambda_powertools.utilities.parameters import SecretsProvider

from sweeper import runtime
from sweeper.actions.http import HttpAction
from sweeper.actions.token import SecretToken
from sweeper.config import HttpActionConfig, Policy
from sweeper.models import ActionCall, OutcomeClass, operation_key
from sweeper_local.aws import LocalAws

pytestmark = pytest.mark.integration

DEADLINE_SECONDS = 5.0


class _OneToken(BaseHTTPRequestHandler):
    """Answers 204 to `Bearer <accepted>`, 401 to anything else; records what it was sent."""

    protocol_version = "HTTP/1.1"
    accepted = ""
    seen: list[tuple[str, str]] = []  # noqa: RUF012  # reset per test by the fixture

    def do_DELETE(self) -> None:
        auth = self.headers.get("Authorization", "")
        self.seen.append((auth, self.headers.get("Idempotency-Key", "")))
        self.send_response(204 if auth == f"Bearer {self.accepted}" else 401)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def token_vendor() -> Iterator[type[_OneToken]]:
    _OneToken.seen = []
    _OneToken.accepted = "token-1"
    server = ThreadingHTTPServer(("127.0.0.1", 0), _OneToken)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    host, port = server.socket.getsockname()[:2]
    _OneToken.url = f"http://{host}:{port}"  # type: ignore[attr-defined]
    yield _OneToken
    server.shutdown()
    server.server_close()
    thread.join()


@pytest.fixture
def secret_arn(local_aws: LocalAws, unique_name: str) -> str:
    created = local_aws.secretsmanager().create_secret(
        Name=f"{unique_name}-vendor-token", SecretString="token-1"
    )
    return str(created["ARN"])


def _job() -> ActionCall:
    key = operation_key("exports", "t1", "o1", 1)
    return ActionCall(
        key=key,
        idempotency_key=key,
        policy="exports",
        policy_version=1,
        tenant_id="t1",
        object_id="o1",
        scope="exports",
        attempt=0,
        batch_id="b1",
    )


def _counted_provider(local_aws: LocalAws) -> tuple[SecretsProvider, list[str]]:
    """A Secrets Manager provider on moto, and the list of GetSecretValue calls it makes."""
    client = local_aws.secretsmanager()
    reads: list[str] = []
    client.meta.events.register(
        "before-call.secrets-manager.GetSecretValue", lambda **_: reads.append("read")
    )
    return SecretsProvider(boto3_client=client), reads


def test_a_warm_action_sends_a_rotated_token_within_max_age(
    local_aws: LocalAws,
    aws_env: dict[str, str],
    secret_arn: str,
    token_vendor: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Given the consumer's action as the runtime builds it, with a one-second token cache
    policy = Policy(
        name="exports",
        action=HttpActionConfig(
            api_url=token_vendor.url, allow_plain_http=True, auth_secret_arn=secret_arn
        ),
    )
    monkeypatch.setenv("SWEEPER_POLICY", policy.model_dump_json())
    monkeypatch.setenv("SWEEPER_DATABASE_URL", "postgresql://unused@127.0.0.1/unused")
    monkeypatch.setenv("SWEEPER_VENDOR_TOKEN_MAX_AGE_SECONDS", "1")
    runtime.reset()
    action = runtime.action()
    assert action.perform(_job()).outcome is OutcomeClass.ACCEPTED
    # When the token is rotated, and the vendor accepts only the new one
    local_aws.secretsmanager().put_secret_value(SecretId=secret_arn, SecretString="token-2")
    token_vendor.accepted = "token-2"
    # Then the same warm action sends the new token within max_age (polled with a deadline)
    deadline = time.monotonic() + 1 + DEADLINE_SECONDS
    while token_vendor.seen[-1][0] != "Bearer token-2":
        assert time.monotonic() < deadline, "the rotated token never reached the warm action"
        action.perform(_job())
        time.sleep(0.1)
    assert runtime.action() is action  # warm: the same action, the token read per call
    assert action.perform(_job()).outcome is OutcomeClass.ACCEPTED
    runtime.reset()


def test_an_auth_answer_with_a_stale_token_rereads_it_once_and_is_retryable(
    local_aws: LocalAws, aws_env: dict[str, str], secret_arn: str, token_vendor: Any
) -> None:
    # Given an action whose token is cached for five minutes, and has been read
    provider, reads = _counted_provider(local_aws)
    action = HttpAction(
        HttpActionConfig(api_url=token_vendor.url, allow_plain_http=True),
        token=SecretToken(secret_arn, max_age_seconds=300, provider=provider),
    )
    job = _job()
    assert action.perform(job).outcome is OutcomeClass.ACCEPTED
    assert len(reads) == 1
    # When the token is rotated and the old one revoked, within the cache's five minutes
    local_aws.secretsmanager().put_secret_value(SecretId=secret_arn, SecretString="token-2")
    token_vendor.accepted = "token-2"
    refused = action.perform(job)
    # Then the 401 made it read the token once more, and the call is retryable, not AUTH (the
    # circuit stays closed)
    assert len(reads) == 2
    assert (refused.outcome, refused.code) == (OutcomeClass.TRANSIENT, "auth_token_renewed")
    # And the next attempt sends the new token, from the cache, with the same Idempotency-Key
    again = action.perform(job)
    assert again.outcome is OutcomeClass.ACCEPTED
    assert len(reads) == 2
    assert token_vendor.seen[-2:] == [("Bearer token-1", job.key), ("Bearer token-2", job.key)]
    action.close()


def test_a_revoked_token_with_no_new_one_is_auth_after_one_reread(
    local_aws: LocalAws, aws_env: dict[str, str], secret_arn: str, token_vendor: Any
) -> None:
    # Given a vendor that accepts no token the secret holds (revoked, not rotated)
    provider, reads = _counted_provider(local_aws)
    token_vendor.accepted = "a-token-nobody-has"
    action = HttpAction(
        HttpActionConfig(api_url=token_vendor.url, allow_plain_http=True),
        token=SecretToken(secret_arn, max_age_seconds=300, provider=provider),
    )
    # When a call is refused
    result = action.perform(_job())
    action.close()
    # Then the token was read once past the cache, found unchanged, and the answer is AUTH
    assert len(reads) == 2
    assert (result.outcome, result.status_code) == (OutcomeClass.AUTH, 401)
    assert len(token_vendor.seen) == 1  # no second call in the same delivery

"""The `http` kind against a real server: each auth mode as the server sees it, the OAuth2 token
(cached, shared, renewed once, its endpoint's failures classified), headers and JSON bodies.

Secrets live in the local Secrets Manager (moto); the server is a real HTTP server in the test.
"""

from __future__ import annotations

import base64
import json
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs

import pytest
from aws_lambda_powertools.utilities.parameters import SecretsProvider

from sweeper import runtime
from sweeper.actions import Action
from sweeper.actions.base import ActionContext
from sweeper.config import HttpActionConfig, Policy
from sweeper.models import ActionCall, OutcomeClass, operation_key
from sweeper_local.aws import LocalAws

pytestmark = pytest.mark.integration

TOKEN_PATH = "/oauth/token"


@dataclass
class Seen:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes


@dataclass
class Server:
    """What the test server does and has seen (one per test)."""

    url: str = ""
    seen: list[Seen] = field(default_factory=list)
    #: The token endpoint: how many token requests came, and what they carried.
    token_requests: list[dict[str, list[str]]] = field(default_factory=list)
    #: The token endpoint's next answers (status, body, headers); empty: a fresh token.
    token_answers: list[tuple[int, bytes, dict[str, str]]] = field(default_factory=list)
    token_delay_seconds: float = 0.0
    expires_in: int = 3600
    #: The client secret the token endpoint accepts.
    client_secret: str = "cs-1"
    #: Tokens the API accepts; an OAuth2 token is added when issued.
    valid_bearers: set[str] = field(default_factory=set)
    #: The API's status for an accepted call (a refused one gets 401).
    api_status: int = 204
    #: When set, the API checks `Authorization` against valid_bearers.
    check_bearer: bool = False
    lock: threading.Lock = field(default_factory=threading.Lock)

    def api_calls(self) -> list[Seen]:
        return [s for s in self.seen if s.path != TOKEN_PATH]


def _handler(server: Server) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def _any(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length)
            seen = Seen(self.command, self.path, dict(self.headers.items()), body)
            with server.lock:
                server.seen.append(seen)
            if self.path == TOKEN_PATH:
                self._token(body)
                return
            auth = self.headers.get("Authorization", "")
            refused = (
                server.check_bearer and auth.removeprefix("Bearer ") not in server.valid_bearers
            )
            self._reply(401 if refused else server.api_status, b"", {})

        def _token(self, body: bytes) -> None:
            form = parse_qs(body.decode())
            time.sleep(server.token_delay_seconds)
            with server.lock:
                server.token_requests.append(form)
                number = len(server.token_requests)
                scripted = server.token_answers.pop(0) if server.token_answers else None
            if scripted is not None:
                self._reply(*scripted)
                return
            if form.get("client_secret") != [server.client_secret]:
                self._reply(401, b'{"error": "invalid_client"}', {})
                return
            token = f"tok-{number}"
            with server.lock:
                server.valid_bearers.add(token)
            answer = {
                "access_token": token,
                "token_type": "Bearer",
                "expires_in": server.expires_in,
            }
            self._reply(200, json.dumps(answer).encode(), {"Content-Type": "application/json"})

        def _reply(self, status: int, body: bytes, headers: dict[str, str]) -> None:
            self.send_response(status)
            for name, value in headers.items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_GET = do_POST = do_DELETE = do_PUT = do_PATCH = _any

        def log_message(self, format: str, *args: object) -> None:
            pass

    return Handler


@pytest.fixture
def server() -> Iterator[Server]:
    state = Server()
    http = ThreadingHTTPServer(("127.0.0.1", 0), _handler(state))
    thread = threading.Thread(target=http.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    host, port = http.socket.getsockname()[:2]
    state.url = f"http://{host}:{port}"
    yield state
    http.shutdown()
    http.server_close()
    thread.join()


class Secrets:
    """Secrets on moto, and the Powertools provider the actions read them through."""

    def __init__(self, local_aws: LocalAws, prefix: str) -> None:
        self.client = local_aws.secretsmanager()
        self.provider = SecretsProvider(boto3_client=self.client)
        self._prefix = prefix

    def __call__(self, suffix: str, value: str) -> str:
        created = self.client.create_secret(Name=f"{self._prefix}-{suffix}", SecretString=value)
        return str(created["ARN"])


@pytest.fixture
def secrets(local_aws: LocalAws, unique_name: str) -> Secrets:
    return Secrets(local_aws, unique_name)


def job(object_id: str = "o1", **params: Any) -> ActionCall:
    key = operation_key("payments", "t1", object_id, 1)
    return ActionCall(
        key=key,
        idempotency_key=key,
        policy="payments",
        policy_version=1,
        tenant_id="t1",
        object_id=object_id,
        scope="payments",
        attempt=0,
        batch_id="b1",
        params=params,
    )


def build(config: HttpActionConfig, secrets: Secrets, max_age: int = 300) -> Action:
    return config.build(ActionContext(secrets=secrets.provider, secret_max_age_seconds=max_age))


def oauth2_config(server: Server, secret_arn: str, **extra: Any) -> HttpActionConfig:
    return HttpActionConfig(
        api_url=server.url,
        allow_plain_http=True,
        method="POST",
        url_template="{api_url}/v1/reconciliations",
        auth={
            "type": "oauth2",
            "token_url": "{api_url}/oauth/token",
            "secret_arn": secret_arn,
            "client_id": "sweeper",
            **extra,
        },
    )


# --- each auth mode, as the server sees it ---------------------------------------------------


def test_no_auth_sends_no_credential(server: Server, secrets: Secrets) -> None:
    action = build(HttpActionConfig(api_url=server.url, allow_plain_http=True), secrets)
    assert action.perform(job()).outcome is OutcomeClass.ACCEPTED
    (call,) = server.api_calls()
    assert "Authorization" not in call.headers


def test_bearer_auth_sends_the_secret_as_a_bearer_token(server: Server, secrets: Secrets) -> None:
    arn = secrets("bearer", "b-token")
    config = HttpActionConfig(
        api_url=server.url, allow_plain_http=True, auth={"type": "bearer", "secret_arn": arn}
    )
    assert build(config, secrets).perform(job()).outcome is OutcomeClass.ACCEPTED
    assert server.api_calls()[0].headers["Authorization"] == "Bearer b-token"


def test_the_older_auth_secret_arn_is_still_bearer(server: Server, secrets: Secrets) -> None:
    arn = secrets("legacy", "old-style")
    config = HttpActionConfig(api_url=server.url, allow_plain_http=True, auth_secret_arn=arn)
    assert build(config, secrets).perform(job()).outcome is OutcomeClass.ACCEPTED
    assert server.api_calls()[0].headers["Authorization"] == "Bearer old-style"


def test_header_auth_sends_the_api_key_in_the_named_header(
    server: Server, secrets: Secrets
) -> None:
    arn = secrets("key", "k-123")
    config = HttpActionConfig(
        api_url=server.url,
        allow_plain_http=True,
        auth={"type": "header", "header": "X-Api-Key", "secret_arn": arn},
    )
    assert build(config, secrets).perform(job()).outcome is OutcomeClass.ACCEPTED
    (call,) = server.api_calls()
    assert call.headers["X-Api-Key"] == "k-123"
    assert "Authorization" not in call.headers


def test_basic_auth_sends_user_and_password_from_the_secret(
    server: Server, secrets: Secrets
) -> None:
    arn = secrets("basic", json.dumps({"username": "svc", "password": "p:w d"}, indent=2))
    config = HttpActionConfig(
        api_url=server.url, allow_plain_http=True, auth={"type": "basic", "secret_arn": arn}
    )
    assert build(config, secrets).perform(job()).outcome is OutcomeClass.ACCEPTED
    sent = server.api_calls()[0].headers["Authorization"]
    assert sent.startswith("Basic ")
    assert base64.b64decode(sent.removeprefix("Basic ")).decode() == "svc:p:w d"


def test_a_basic_secret_that_is_not_user_and_password_sends_nothing(
    server: Server, secrets: Secrets
) -> None:
    arn = secrets("basic-bad", "just-a-string")
    config = HttpActionConfig(
        api_url=server.url, allow_plain_http=True, auth={"type": "basic", "secret_arn": arn}
    )
    result = build(config, secrets).perform(job())
    assert (result.outcome, result.code) == (OutcomeClass.TRANSIENT, "basic_secret_invalid")
    assert server.api_calls() == []


def test_oauth2_sends_the_fetched_token_and_the_form_the_endpoint_expects(
    server: Server, secrets: Secrets
) -> None:
    arn = secrets("oauth", "cs-1")
    action = build(oauth2_config(server, arn, scope="recon:write", audience="payments"), secrets)
    assert action.perform(job()).outcome is OutcomeClass.ACCEPTED
    (form,) = server.token_requests
    assert form == {
        "grant_type": ["client_credentials"],
        "client_id": ["sweeper"],
        "client_secret": ["cs-1"],
        "scope": ["recon:write"],
        "audience": ["payments"],
    }
    token_call = next(s for s in server.seen if s.path == TOKEN_PATH)
    assert token_call.headers["Content-Type"] == "application/x-www-form-urlencoded"
    assert server.api_calls()[0].headers["Authorization"] == "Bearer tok-1"


def test_oauth2_takes_the_client_id_from_a_json_secret(server: Server, secrets: Secrets) -> None:
    arn = secrets("oauth-json", json.dumps({"client_id": "from-secret", "client_secret": "cs-1"}))
    config = oauth2_config(server, arn).model_copy(
        update={"auth": oauth2_config(server, arn).auth.model_copy(update={"client_id": None})}
    )
    assert build(config, secrets).perform(job()).outcome is OutcomeClass.ACCEPTED
    assert server.token_requests[0]["client_id"] == ["from-secret"]


# --- the OAuth2 token: cached, shared, renewed -----------------------------------------------


def test_one_token_fetch_serves_concurrent_calls(server: Server, secrets: Secrets) -> None:
    # Given a token endpoint slow enough that every thread asks while the first fetch is out
    server.token_delay_seconds = 0.3
    server.check_bearer = True
    action = build(oauth2_config(server, secrets("oauth", "cs-1")), secrets)
    calls = 16
    started = threading.Barrier(calls)

    def call(index: int) -> OutcomeClass:
        started.wait()
        return action.perform(job(f"o{index}")).outcome

    # When a batch's threads call at once
    with ThreadPoolExecutor(max_workers=calls) as pool:
        outcomes = list(pool.map(call, range(calls)))
    # Then one token was fetched, and every call carried it
    assert outcomes == [OutcomeClass.ACCEPTED] * calls
    assert len(server.token_requests) == 1
    assert {s.headers["Authorization"] for s in server.api_calls()} == {"Bearer tok-1"}


def test_a_cached_token_is_reused_until_shortly_before_it_expires(
    server: Server, secrets: Secrets
) -> None:
    # Given tokens that live 2 s (renewed a tenth of their life, 0.2 s, before they expire)
    server.expires_in = 2
    action = build(oauth2_config(server, secrets("oauth", "cs-1")), secrets)
    action.perform(job())
    action.perform(job())
    assert len(server.token_requests) == 1
    # When the token nears its expiry
    deadline = time.monotonic() + 5
    while len(server.token_requests) == 1:
        assert time.monotonic() < deadline, "the token was never renewed"
        action.perform(job())
        time.sleep(0.05)
    # Then a new one was fetched before the old one had expired, and sent
    assert server.api_calls()[-1].headers["Authorization"] == "Bearer tok-2"


def test_a_401_renews_the_token_once_and_the_call_is_retryable(
    server: Server, secrets: Secrets
) -> None:
    # Given a cached token the API has since revoked
    server.check_bearer = True
    action = build(oauth2_config(server, secrets("oauth", "cs-1")), secrets)
    assert action.perform(job()).outcome is OutcomeClass.ACCEPTED
    server.valid_bearers.clear()
    # When a call is refused
    refused = action.perform(job())
    # Then one new token was fetched, and the call counts as retryable, not AUTH
    assert len(server.token_requests) == 2
    assert (refused.outcome, refused.code) == (OutcomeClass.TRANSIENT, "auth_token_renewed")
    # And the next attempt sends the new token without another fetch
    assert action.perform(job()).outcome is OutcomeClass.ACCEPTED
    assert len(server.token_requests) == 2
    assert [s.headers["Authorization"] for s in server.api_calls()] == [
        "Bearer tok-1",
        "Bearer tok-1",
        "Bearer tok-2",
    ]


def test_a_renewed_token_refused_again_is_auth(server: Server, secrets: Secrets) -> None:
    # Given an API that refuses every token
    server.api_status = 401
    action = build(oauth2_config(server, secrets("oauth", "cs-1")), secrets)
    # When a call is refused, and its retry with the renewed token is refused too
    first = action.perform(job())
    second = action.perform(job())
    # Then the first counted as retryable; the second is AUTH, with no third token (a token
    # endpoint that mints a new token every time cannot keep AUTH from ever being seen)
    assert first.code == "auth_token_renewed"
    assert (second.outcome, second.status_code) == (OutcomeClass.AUTH, 401)
    assert len(server.token_requests) == 2


def test_the_same_token_refused_again_is_auth(server: Server, secrets: Secrets) -> None:
    # Given a token endpoint that hands out the same token, which the API refuses
    same: tuple[int, bytes, dict[str, str]] = (
        200,
        json.dumps({"access_token": "t", "token_type": "Bearer"}).encode(),
        {},
    )
    server.token_answers = [same, same]
    server.check_bearer = True
    action = build(oauth2_config(server, secrets("oauth", "cs-1")), secrets)
    # When a call is refused
    result = action.perform(job())
    # Then the token was renewed once, came back the same, and the answer is AUTH
    assert (result.outcome, result.status_code) == (OutcomeClass.AUTH, 401)
    assert len(server.token_requests) == 2
    assert len(server.api_calls()) == 1


def test_a_rotated_client_secret_is_reread_once_when_the_endpoint_refuses_it(
    server: Server, secrets: Secrets
) -> None:
    # Given a client secret cached for five minutes, and tokens that live one second
    server.expires_in = 1
    arn = secrets("oauth", "cs-1")
    action = build(oauth2_config(server, arn), secrets)
    assert action.perform(job()).outcome is OutcomeClass.ACCEPTED
    # When the client secret is rotated, and the token comes up for renewal
    secrets.client.put_secret_value(SecretId=arn, SecretString="cs-2")
    server.client_secret = "cs-2"
    deadline = time.monotonic() + 5
    while len(server.token_requests) == 1:
        assert time.monotonic() < deadline, "the token was never renewed"
        result = action.perform(job())
        time.sleep(0.05)
    # Then the endpoint's refusal of the cached secret made it re-read the secret once and ask
    # again, and the call went through
    assert result.outcome is OutcomeClass.ACCEPTED
    assert [form["client_secret"] for form in server.token_requests] == [
        ["cs-1"],
        ["cs-1"],
        ["cs-2"],
    ]


# --- a failing token endpoint is classified, never raised ------------------------------------


@pytest.mark.parametrize(
    ("answer", "outcome", "code"),
    [
        ((500, b"oops", {}), OutcomeClass.TRANSIENT, "oauth2_http_500"),
        ((503, b"", {}), OutcomeClass.TRANSIENT, "oauth2_http_503"),
        ((429, b"", {"Retry-After": "7"}), OutcomeClass.THROTTLED, "oauth2_throttled"),
        ((400, b'{"error":"invalid_scope"}', {}), OutcomeClass.AUTH, "oauth2_http_400"),
        ((401, b'{"error":"invalid_client"}', {}), OutcomeClass.AUTH, "oauth2_http_401"),
        ((200, b"<html>not json</html>", {}), OutcomeClass.TRANSIENT, "oauth2_bad_answer"),
        ((200, b'{"token_type":"Bearer"}', {}), OutcomeClass.TRANSIENT, "oauth2_bad_answer"),
        (
            (200, b'{"access_token":"x","token_type":"mac"}', {}),
            OutcomeClass.AUTH,
            "oauth2_token_type",
        ),
    ],
)
def test_a_failing_token_endpoint_is_classified_and_the_api_is_not_called(
    server: Server,
    secrets: Secrets,
    answer: tuple[int, bytes, dict[str, str]],
    outcome: OutcomeClass,
    code: str,
) -> None:
    server.token_answers = [answer, answer]
    action = build(oauth2_config(server, secrets("oauth", "cs-1")), secrets)
    result = action.perform(job())
    assert (result.outcome, result.code) == (outcome, code)
    if outcome is OutcomeClass.THROTTLED:
        assert result.retry_after_seconds == 7.0
    assert server.api_calls() == []


def test_a_token_endpoint_that_times_out_is_transient_and_held_briefly(
    server: Server, secrets: Secrets
) -> None:
    # Given a token endpoint slower than the action's read timeout
    server.token_delay_seconds = 1.0
    config = oauth2_config(server, secrets("oauth", "cs-1")).model_copy(
        update={"read_timeout_seconds": 0.2}
    )
    action = build(config, secrets)
    # When two calls follow one another
    first = action.perform(job())
    second = action.perform(job())
    # Then both are transient, from one fetch (the failure is held, not retried per call)
    assert (first.outcome, first.code) == (OutcomeClass.TRANSIENT, "oauth2_timeout")
    assert (second.outcome, second.code) == (OutcomeClass.TRANSIENT, "oauth2_timeout")
    assert server.api_calls() == []
    deadline = time.monotonic() + 5
    while len(server.token_requests) < 1:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    assert len(server.token_requests) == 1


def test_an_unreachable_token_endpoint_is_transient(server: Server, secrets: Secrets) -> None:
    config = oauth2_config(server, secrets("oauth", "cs-1"))
    unreachable = config.auth.model_copy(update={"token_url": "http://127.0.0.1:9/oauth/token"})
    action = build(config.model_copy(update={"auth": unreachable}), secrets)
    result = action.perform(job())
    assert (result.outcome, result.code) == (OutcomeClass.TRANSIENT, "oauth2_unreachable")


# --- the runtime builds whatever kind is configured -----------------------------------------


def test_the_runtime_builds_the_configured_auth_mode(
    server: Server, secrets: Secrets, aws_env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    arn = secrets("oauth", "cs-1")
    policy = Policy(name="payments", action=oauth2_config(server, arn))
    monkeypatch.setenv("SWEEPER_POLICY", policy.model_dump_json())
    monkeypatch.setenv("SWEEPER_DATABASE_URL", "postgresql://unused@127.0.0.1/unused")
    runtime.reset()
    try:
        assert runtime.action().perform(job()).outcome is OutcomeClass.ACCEPTED
    finally:
        runtime.reset()
    assert server.api_calls()[0].headers["Authorization"] == "Bearer tok-1"

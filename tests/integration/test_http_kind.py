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
from datetime import date
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote

import boto3
import pytest
import urllib3
from aws_lambda_powertools.utilities.parameters import SecretsProvider
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sweeper import runtime
from sweeper.actions import Action
from sweeper.actions.base import ActionContext
from sweeper.actions.http import HttpAction
from sweeper.actions.http_auth import OAuth2Auth, OAuth2Credentials
from sweeper.actions.token import FixedToken
from sweeper.config import HttpActionConfig, Policy, SweeperConfig
from sweeper.models import ActionCall, OutcomeClass, operation_key
from sweeper_local.aws import LocalAws
from sweeper_tools.doctor import Status, check_actions, run_doctor

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
    #: How long the API takes to answer.
    api_delay_seconds: float = 0.0
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
            time.sleep(server.api_delay_seconds)
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
    # (a request is recorded on arrival, long before the read timeout gave up on it)
    assert len([s for s in server.seen if s.path == TOKEN_PATH]) == 1


def test_the_token_fetch_spends_the_calls_time_budget(server: Server, secrets: Secrets) -> None:
    # Given a token endpoint that takes 0.3 s and an API that takes 0.3 s
    server.token_delay_seconds = 0.3
    server.api_delay_seconds = 0.3
    action = build(oauth2_config(server, secrets("oauth", "cs-1")), secrets)
    # When a call has 0.5 s in all (what Lambda has left)
    started = time.monotonic()
    result = action.perform(job(), timeout_seconds=0.5)
    # Then the call had only what the token left it, and gave up within the budget
    assert (result.outcome, result.code) == (OutcomeClass.UNKNOWN, "read_timeout")
    assert time.monotonic() - started < 0.5 + 0.15


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


def test_a_token_is_renewed_a_tenth_of_its_life_before_it_expires(server: Server) -> None:
    # Given a token that lives 100 s, on a clock the test turns
    server.expires_in = 100
    now = [0.0]
    auth = OAuth2Auth(token_url=f"{server.url}/oauth/token", secret_arn="unused", client_id="c")
    credentials = OAuth2Credentials(
        auth,
        auth.token_url,
        FixedToken("cs-1"),
        urllib3.PoolManager,
        connect_timeout_seconds=1,
        read_timeout_seconds=1,
        user_agent="test",
        clock=lambda: now[0],
    )
    first = credentials.present(None)
    # When the clock nears its expiry, then reaches 10 s before it
    now[0] = 89.9
    cached = credentials.present(None)
    now[0] = 90.0
    renewed = credentials.present(None)
    # Then it was cached until then, and renewed from then
    assert first == cached
    assert renewed.credential == "tok-2"
    assert len(server.token_requests) == 2


# --- headers, the idempotency header, templates over ids and params --------------------------


def test_the_operation_key_travels_in_the_configured_idempotency_header(
    server: Server, secrets: Secrets
) -> None:
    config = HttpActionConfig(
        api_url=server.url, allow_plain_http=True, idempotency_header="X-Idempotency-Token"
    )
    call = job()
    build(config, secrets).perform(call)
    (seen,) = server.api_calls()
    assert seen.headers["X-Idempotency-Token"] == call.key
    assert "Idempotency-Key" not in seen.headers


def test_extra_headers_are_sent_as_they_are(server: Server, secrets: Secrets) -> None:
    config = HttpActionConfig(
        api_url=server.url, allow_plain_http=True, headers={"X-Region": "eu-west-1"}
    )
    build(config, secrets).perform(job())
    assert server.api_calls()[0].headers["X-Region"] == "eu-west-1"


PAYMENT_BODY: dict[str, Any] = {
    "payment_id": "{object_id}",
    "business_date": "{params.business_date}",
    "amount": "{params.amount}",
    "meta": {"tenant": "{tenant_id}", "source": "sweeper", "tags": ["{params.tags}", "fixed"]},
}


def test_a_body_template_is_filled_with_the_fields_json_values(
    server: Server, secrets: Secrets
) -> None:
    config = HttpActionConfig(
        api_url=server.url,
        allow_plain_http=True,
        method="POST",
        url_template="{api_url}/v1/reconciliations",
        body=PAYMENT_BODY,
    )
    call = job("pay_9", business_date="2026-11-30", amount=12.5, tags=["a", "b"])
    assert build(config, secrets).perform(call).outcome is OutcomeClass.ACCEPTED
    (seen,) = server.api_calls()
    assert seen.headers["Content-Type"] == "application/json"
    assert json.loads(seen.body) == {
        "payment_id": "pay_9",
        "business_date": "2026-11-30",
        "amount": 12.5,
        "meta": {"tenant": "t1", "source": "sweeper", "tags": [["a", "b"], "fixed"]},
    }


def test_a_body_goes_with_the_content_type_the_policy_names(
    server: Server, secrets: Secrets
) -> None:
    config = HttpActionConfig(
        api_url=server.url,
        allow_plain_http=True,
        method="POST",
        headers={"content-type": "application/vnd.api+json"},
        body={"id": "{object_id}"},
    )
    build(config, secrets).perform(job())
    (seen,) = server.api_calls()
    sent = [v for k, v in seen.headers.items() if k.lower() == "content-type"]
    assert sent == ["application/vnd.api+json"]
    assert json.loads(seen.body) == {"id": "o1"}


def test_a_param_in_the_url_fills_exactly_one_segment(server: Server, secrets: Secrets) -> None:
    config = HttpActionConfig(
        api_url=server.url,
        allow_plain_http=True,
        url_template="{api_url}/v1/days/{params.day}/payments/{object_id}",
        refuse_dot_segments=False,  # a `..` that a decoding proxy would climb by, sent as data
    )
    assert build(config, secrets).perform(job("p/1", day="../2026/x")).outcome is (
        OutcomeClass.ACCEPTED
    )
    segments = server.api_calls()[0].path.split("/")
    assert [unquote(s) for s in segments] == ["", "v1", "days", "../2026/x", "payments", "p/1"]


@pytest.mark.parametrize(
    ("params", "code"), [({}, "param_missing"), ({"day": {"y": 2026}}, "param_not_a_segment")]
)
def test_a_param_that_cannot_fill_the_url_is_permanent_and_nothing_is_sent(
    server: Server, secrets: Secrets, params: dict[str, Any], code: str
) -> None:
    config = HttpActionConfig(
        api_url=server.url,
        allow_plain_http=True,
        url_template="{api_url}/v1/days/{params.day}/payments/{object_id}",
    )
    result = build(config, secrets).perform(job(**params))
    assert (result.outcome, result.code) == (OutcomeClass.PERMANENT, code)
    assert server.api_calls() == []


def test_a_missing_body_param_is_permanent_and_nothing_is_sent(
    server: Server, secrets: Secrets
) -> None:
    config = HttpActionConfig(
        api_url=server.url, allow_plain_http=True, method="POST", body=PAYMENT_BODY
    )
    result = build(config, secrets).perform(job(business_date="2026-11-30"))
    assert (result.outcome, result.code) == (OutcomeClass.PERMANENT, "param_missing")
    assert server.api_calls() == []


# --- properties: no id or param changes a URL's shape or a body's structure -----------------

ANY_TEXT = st.one_of(
    st.sampled_from(
        [".", "..", "/", "../..", "a/../b", '"', '", "x": "', "{object_id}", "}", "\\"]
    ),
    st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), min_size=1, max_size=30),
)
JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**53), max_value=2**53)
    | st.floats(allow_nan=False, allow_infinity=False)
    | ANY_TEXT,
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(ANY_TEXT, children, max_size=3)
    ),
    max_leaves=8,
)


def _expected(template: Any, values: dict[str, Any]) -> Any:
    """The template with each `{field}` string swapped for its value, by structure."""
    if isinstance(template, dict):
        return {key: _expected(value, values) for key, value in template.items()}
    if isinstance(template, list):
        return [_expected(item, values) for item in template]
    if isinstance(template, str) and template.startswith("{") and template.endswith("}"):
        return values[template[1:-1]]
    return template


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    object_id=ANY_TEXT,
    business_date=JSON_VALUES,
    amount=JSON_VALUES,
    tags=JSON_VALUES,
)
def test_no_id_or_param_changes_the_bodys_structure(
    server: Server, object_id: str, business_date: Any, amount: Any, tags: Any
) -> None:
    # Given the payment body template, and ids and params of any content
    action = HttpAction(
        HttpActionConfig(
            api_url=server.url,
            allow_plain_http=True,
            method="POST",
            url_template="{api_url}/v1/reconciliations",
            body=PAYMENT_BODY,
        )
    )
    server.seen.clear()
    params = {"business_date": business_date, "amount": amount, "tags": tags}
    # When the call is made
    action.perform(job(object_id, **params))
    action.close()
    # Then the server got valid JSON whose every key and literal is the template's, each field
    # exactly where its placeholder stood
    (seen,) = server.api_calls()
    sent = json.loads(seen.body)
    values = {
        "object_id": object_id,
        "tenant_id": "t1",
        **{f"params.{k}": v for k, v in params.items()},
    }
    assert sent == _expected(PAYMENT_BODY, values)
    assert set(sent) == set(PAYMENT_BODY)
    assert set(sent["meta"]) == set(PAYMENT_BODY["meta"])


SEGMENT_VALUES = st.one_of(ANY_TEXT, st.integers(), st.booleans())


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(tenant_id=ANY_TEXT, object_id=ANY_TEXT, day=SEGMENT_VALUES)
def test_no_id_or_param_changes_the_urls_shape(
    server: Server, tenant_id: str, object_id: str, day: Any
) -> None:
    # Given a template with ids and a param, and values of any content
    action = HttpAction(
        HttpActionConfig(
            api_url=server.url,
            allow_plain_http=True,
            url_template="{api_url}/v1/{tenant_id}/days/{params.day}/objects/{object_id}",
            refuse_dot_segments=False,  # the shape holds even for ids the default refuses
        )
    )
    server.seen.clear()
    call = job(object_id, day=day).model_copy(update={"tenant_id": tenant_id})
    # When the call is made
    result = action.perform(call)
    action.close()
    # Then the request line has the template's segments, each decoding to its own value
    assert result.outcome is OutcomeClass.ACCEPTED
    (seen,) = server.api_calls()
    segments = seen.path.split("/")
    expected_day = day if isinstance(day, str) else json.dumps(day)
    assert [unquote(s) for s in segments] == [
        "",
        "v1",
        tenant_id,
        "days",
        expected_day,
        "objects",
        object_id,
    ]
    assert not {segments[2], segments[4], segments[6]} & {".", ".."}


# --- sweeper doctor: the kind's credentials, checked without an effect -----------------------


def _config_with(action: HttpActionConfig) -> SweeperConfig:
    return SweeperConfig(policies=[Policy(name="payments", action=action)])


def test_doctor_says_the_oauth2_token_endpoint_issues_a_token(
    server: Server, secrets: Secrets
) -> None:
    config = _config_with(oauth2_config(server, secrets("oauth", "cs-1")))
    (found,) = check_actions(config, secrets.client)
    assert (found.name, found.status) == ("payments: action auth (oauth2)", Status.OK)
    assert len(server.token_requests) == 1
    assert server.api_calls() == []  # the vendor itself is never called


def test_doctor_fails_a_client_the_token_endpoint_refuses(server: Server, secrets: Secrets) -> None:
    config = _config_with(oauth2_config(server, secrets("oauth", "wrong")))
    (found,) = check_actions(config, secrets.client)
    assert found.status is Status.FAIL
    assert found.detail == "refused: oauth2_http_401"
    assert found.fix is not None
    assert "wrong" not in found.detail + found.fix  # never the secret
    assert "auth.token_url" in found.fix


def test_doctor_warns_when_the_token_endpoint_cannot_be_reached_from_here(
    server: Server, secrets: Secrets
) -> None:
    action = oauth2_config(server, secrets("oauth", "cs-1"))
    unreachable = action.auth.model_copy(update={"token_url": "http://127.0.0.1:9/token"})
    (found,) = check_actions(
        _config_with(action.model_copy(update={"auth": unreachable})), secrets.client
    )
    assert (found.status, found.detail) == (
        Status.WARN,
        "could not be verified from here: oauth2_unreachable",
    )


def test_doctor_fails_a_secret_it_cannot_read(server: Server, secrets: Secrets) -> None:
    missing = secrets("bearer", "x").replace("bearer", "no-such-secret")
    action = HttpActionConfig(
        api_url=server.url, allow_plain_http=True, auth={"type": "bearer", "secret_arn": missing}
    )
    (found,) = check_actions(_config_with(action), secrets.client)
    assert (found.status, found.detail) == (Status.FAIL, "secret unusable: token_unavailable")


def test_doctor_fails_a_basic_secret_without_user_and_password(
    server: Server, secrets: Secrets
) -> None:
    action = HttpActionConfig(
        api_url=server.url,
        allow_plain_http=True,
        auth={"type": "basic", "secret_arn": secrets("basic", '{"username": "u"}')},
    )
    (found,) = check_actions(_config_with(action), secrets.client)
    assert (found.status, found.detail) == (Status.FAIL, "secret unusable: basic_secret_invalid")


def test_doctor_has_nothing_to_check_for_an_action_without_auth(secrets: Secrets) -> None:
    assert check_actions(_config_with(HttpActionConfig()), secrets.client) == []


def test_doctor_runs_the_action_checks_with_the_others(
    server: Server, secrets: Secrets, aws_env: dict[str, str], tmp_path: Path
) -> None:
    arn = secrets("oauth", "cs-1")
    policy_file = tmp_path / "sweeper.toml"
    policy_file.write_text(
        f"""
[[policies]]
name = "payments"
[policies.action]
api_url = "{server.url}"
allow_plain_http = true
[policies.action.auth]
type = "oauth2"
token_url = "{{api_url}}/oauth/token"
secret_arn = "{arn}"
client_id = "c"
""",
        encoding="utf-8",
    )
    region = secrets.client.meta.region_name
    session = boto3.Session(region_name=region)

    def client(service: str) -> Any:
        return session.client(service)  # type: ignore[call-overload]

    results = run_doctor(
        client,
        region=region,
        config_path=policy_file,
        stack="Sweeper",
        today=date(2026, 11, 29),
    )
    assert results[-1].name == "payments: action auth (oauth2)"
    assert results[-1].status is Status.OK

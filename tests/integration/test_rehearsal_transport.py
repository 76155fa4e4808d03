"""Over real HTTP: in a rehearsal every request of the http kind goes to the rehearsal's URL,
whatever host the policy names, and no name of the policy's own is ever resolved (issue 41,
point 3)."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from sweeper.actions.http import HttpAction
from sweeper.actions.http_auth import (
    OAuth2Auth,
    OAuth2Credentials,
    SecretCredentials,
    bearer_header,
)
from sweeper.actions.rehearsal import ORIGINAL_HOST_HEADER, Rehearsal
from sweeper.actions.token import FixedToken
from sweeper.config import HttpActionConfig
from sweeper.models import OutcomeClass
from tests.integration.test_http_action import job_for

pytestmark = pytest.mark.integration

PER_TENANT = "https://{tenant_id}.helpdesk.example"
TICKETS = "{api_url}/api/v2/tickets/{object_id}.json"


class _Recorder(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    seen: list[dict[str, Any]]

    def _any(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        self.rfile.read(length)
        self.seen.append(
            {
                "method": self.command,
                "path": self.path,
                "original": self.headers.get(ORIGINAL_HOST_HEADER),
                "authorization": self.headers.get("Authorization"),
            }
        )
        body = b""
        if self.path == "/oauth/token":
            token = {"access_token": "issued", "token_type": "Bearer", "expires_in": 3600}
            body = json.dumps(token).encode()
        self.send_response(200 if body else 204)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_DELETE = do_GET = do_POST = _any  # http.server's naming

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def recorder() -> Iterator[tuple[str, list[dict[str, Any]]]]:
    """A loopback server standing in for the vendor: its URL and every request it saw."""
    seen: list[dict[str, Any]] = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), type("H", (_Recorder,), {"seen": seen}))
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    host, port = server.socket.getsockname()[:2]
    yield f"http://{host}:{port}", seen
    server.shutdown()
    server.server_close()
    thread.join()


@pytest.fixture
def lookups(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every host name this process resolves from now on."""
    names: list[str] = []
    real = socket.getaddrinfo

    def recording(host: Any, *args: Any, **kwargs: Any) -> Any:
        names.append(str(host))
        return real(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", recording)
    return names


def _rehearsed(url: str, **config: Any) -> HttpAction:
    action = HttpAction(
        HttpActionConfig(api_url=PER_TENANT, url_template=TICKETS, **config),
        rehearsal=Rehearsal.parse(url),
    )
    action.use(SecretCredentials(FixedToken("tok-1"), bearer_header))
    return action


def test_a_per_tenant_call_goes_to_the_rehearsal_with_its_host_named(
    recorder: tuple[str, list[dict[str, Any]]], lookups: list[str]
) -> None:
    # Given a per-tenant policy rehearsed against a loopback vendor
    url, seen = recorder
    action = _rehearsed(url)
    try:
        # When two tenants' jobs are warmed and performed
        for tenant in ("acme", "globex"):
            action.warm(job_for(tenant, "7"))
            result = action.perform(job_for(tenant, "7"))
            assert (result.outcome, result.code) == (OutcomeClass.ACCEPTED, "http_204")
    finally:
        action.close()
    # Then each arrived at the loopback vendor, its path kept, its own host named
    assert [(s["method"], s["path"], s["original"]) for s in seen] == [
        ("DELETE", "/api/v2/tickets/7.json", "acme.helpdesk.example"),
        ("DELETE", "/api/v2/tickets/7.json", "globex.helpdesk.example"),
    ]
    assert all(s["authorization"] == "Bearer tok-1" for s in seen)
    # And no name of the policy's was ever looked up
    assert lookups  # the loopback vendor's was
    assert not [name for name in lookups if "helpdesk.example" in name]


def test_an_oauth2_token_endpoint_of_its_own_is_rehearsed_too(
    recorder: tuple[str, list[dict[str, Any]]], lookups: list[str]
) -> None:
    # Given a per-tenant policy whose OAuth2 token endpoint is another real host
    url, seen = recorder
    auth = OAuth2Auth(
        token_url="https://login.helpdesk.example:8443/oauth/token",
        secret_arn="arn:aws:secretsmanager:eu-west-1:111122223333:secret:helpdesk",
        client_id="sweeper",
    )
    action = HttpAction(
        HttpActionConfig(api_url=PER_TENANT, url_template=TICKETS, auth=auth),
        rehearsal=Rehearsal.parse(url),
    )
    action.use(
        OAuth2Credentials(
            auth,
            auth.token_url,
            FixedToken("client-secret"),
            action.pool_manager,
            connect_timeout_seconds=2,
            read_timeout_seconds=5,
            user_agent="test",
        )
    )
    try:
        # When a job is performed
        result = action.perform(job_for("acme", "9"))
    finally:
        action.close()
    # Then the token request and the call both reached the loopback vendor, each naming its host
    assert result.outcome is OutcomeClass.ACCEPTED
    assert [(s["path"], s["original"]) for s in seen] == [
        ("/oauth/token", "login.helpdesk.example:8443"),
        ("/api/v2/tickets/9.json", "acme.helpdesk.example"),
    ]
    assert seen[1]["authorization"] == "Bearer issued"
    assert not [name for name in lookups if "helpdesk.example" in name]


def test_the_authority_rules_still_hold_before_the_redirect(
    recorder: tuple[str, list[dict[str, Any]]],
) -> None:
    # Given a rehearsed per-tenant policy
    url, seen = recorder
    action = _rehearsed(url)
    try:
        # When a job's tenant id is not one DNS label
        result = action.perform(job_for("evil.example#", "1"))
    finally:
        action.close()
    # Then it is refused as in production, and nothing is sent
    assert (result.outcome, result.code) == (OutcomeClass.PERMANENT, "bad_host_label")
    assert seen == []

"""Over real HTTP: a call goes to api_url's host and nowhere else, whatever the vendor answers
or the id holds (issue 40, point 4)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from sweeper.actions.http import HttpAction
from sweeper.config import HttpActionConfig
from sweeper.models import OutcomeClass
from tests.integration.test_http_action import job_for

pytestmark = pytest.mark.integration

TOKEN = "tok-authority-1"


class _Seen(BaseHTTPRequestHandler):
    """Records each request (target and Authorization) and answers as `answer` says."""

    protocol_version = "HTTP/1.1"
    seen: list[tuple[str, str | None]]
    answer: tuple[int, dict[str, str]]

    def _any(self) -> None:
        self.seen.append((self.path, self.headers.get("Authorization")))
        status, headers = self.answer
        self.send_response(status)
        for name, value in {**headers, "Content-Length": "0"}.items():
            self.send_header(name, value)
        self.end_headers()

    do_DELETE = do_GET = do_POST = _any  # http.server's naming

    def log_message(self, format: str, *args: object) -> None:
        pass


class AnswerServer:
    """A loopback HTTP server answering every request `status` (and `headers`); `seen` holds
    each request's target and Authorization header."""

    def __init__(self, status: int, headers: dict[str, str] | None = None) -> None:
        self.seen: list[tuple[str, str | None]] = []
        handler = type("Handler", (_Seen,), {"seen": self.seen, "answer": (status, headers or {})})
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}
        )
        self._thread.start()
        host, port = self._server.socket.getsockname()[:2]
        self.url = f"http://{host}:{port}"

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()


@pytest.fixture
def elsewhere() -> Iterator[AnswerServer]:
    """Another host's server: nothing may ever reach it."""
    server = AnswerServer(204)
    yield server
    server.close()


@pytest.mark.parametrize("status", [301, 302, 303, 307, 308])
def test_a_redirect_is_not_followed_and_the_token_never_reaches_its_target(
    elsewhere: AnswerServer, status: int
) -> None:
    # Given a vendor that redirects every call to another host
    vendor = AnswerServer(status, {"Location": f"{elsewhere.url}/stolen"})
    action = HttpAction(HttpActionConfig(api_url=vendor.url, allow_plain_http=True), TOKEN)
    try:
        # When a call is made with a bearer token
        result = action.perform(job_for("t1", "o1"))
    finally:
        action.close()
        vendor.close()
    # Then the redirect is the answer (a wrong URL: permanent), and the other host saw nothing
    assert (result.outcome, result.code) == (OutcomeClass.PERMANENT, f"http_{status}")
    assert vendor.seen == [("/v1/tenants/t1/objects/o1", f"Bearer {TOKEN}")]
    assert elsewhere.seen == []


@pytest.mark.parametrize("object_id", ["../../admin/users", "..%2F..%2Fadmin", "%2e%2e"])
def test_an_id_that_climbs_once_decoded_never_reaches_the_vendor(
    elsewhere: AnswerServer, object_id: str
) -> None:
    # Given a policy on the default refuse_dot_segments
    action = HttpAction(HttpActionConfig(api_url=elsewhere.url, allow_plain_http=True), TOKEN)
    # When an id that a decoding proxy would route up the tree is called
    result = action.perform(job_for("t1", object_id))
    action.close()
    # Then it fails permanently, and no request was made
    assert (result.outcome, result.code) == (OutcomeClass.PERMANENT, "dot_segment")
    assert elsewhere.seen == []

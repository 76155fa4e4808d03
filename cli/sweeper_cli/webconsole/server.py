"""The console's local web server: the standard library's threading HTTP server on loopback,
every request through `Guard` first, pages rendered by `page`, actions through the backend."""

from __future__ import annotations

import json
import sys
import threading
from datetime import UTC, datetime
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from typing import Any
from urllib.parse import parse_qs, urlsplit

from sweeper.errors import SweeperError
from sweeper_cli.webconsole import page
from sweeper_cli.webconsole.backend import ConsoleBackend
from sweeper_cli.webconsole.guard import Guard, Refusal

LOOPBACK = "127.0.0.1"
#: A request body larger than this is refused (an action is a few hundred bytes).
MAX_BODY_BYTES = 16_384
STATIC = {"console.js": "text/javascript", "console.css": "text/css"}
#: Where the printed URL's one-time code is traded for the session cookie.
LOGIN_PATH = "/login"
#: The answer to a login: a page that moves on to the console from this origin, so that the
#: SameSite=Strict cookie goes with it even when the login came from another (the --open file).
SIGNED_IN_PAGE = (
    b'<!doctype html><html lang="en"><head><meta charset="utf-8">'
    b'<meta http-equiv="refresh" content="0;url=/"><title>sweeper console</title></head>'
    b'<body><p>Signed in: <a href="/">open the console</a>.</p></body></html>\n'
)
#: Sent with every answer: nothing framed, nothing inlined, nothing fetched from elsewhere.
SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
        "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
    ),
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}


class ConsoleServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, backend: ConsoleBackend, port: int = 0) -> None:
        super().__init__((LOOPBACK, port), ConsoleHandler)
        self.backend = backend
        self.guard = Guard.fresh(self.server_address[1])
        # One request at a time reaches the backend (the ledger has one connection).
        self.backend_lock = threading.Lock()

    @property
    def port(self) -> int:
        return self.guard.port

    @property
    def url(self) -> str:
        """The URL to open: with the one-time login code, traded once for the session cookie."""
        return f"{self.home}{LOGIN_PATH.lstrip('/')}?code={self.guard.login.code}"

    @property
    def home(self) -> str:
        """The console's address, for a browser that holds the session cookie."""
        return f"http://{LOOPBACK}:{self.port}/"


class ConsoleHandler(BaseHTTPRequestHandler):
    server: ConsoleServer
    server_version = "sweeper-console"
    sys_version = ""

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: a request line holds the login code and keys; nothing is logged."""

    # -- answers ------------------------------------------------------------------------------

    def _send(
        self,
        status: HTTPStatus,
        body: bytes,
        content_type: str,
        extra: dict[str, str] | None = None,
    ) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for name, value in {**SECURITY_HEADERS, **(extra or {})}.items():
            self.send_header(name, value)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _html(self, status: HTTPStatus, title: str, body: str) -> None:
        backend = self.server.backend
        text = page.layout(
            title,
            body,
            token=self.server.guard.csrf,
            operator=backend.operator,
            target=backend.target,
        )
        self._send(status, text.encode("utf-8"), "text/html; charset=utf-8")

    def _json(self, status: HTTPStatus, data: dict[str, Any]) -> None:
        self._send(status, json.dumps(data).encode("utf-8"), "application/json")

    def _refuse(self, refusal: Refusal, as_json: bool) -> None:
        if as_json:
            self._json(refusal.status, {"error": refusal.reason})
        else:
            body = f"refused: {refusal.reason}\n".encode()
            self._send(refusal.status, body, "text/plain; charset=utf-8")

    # -- reading ------------------------------------------------------------------------------

    def do_GET(self) -> None:
        parts = urlsplit(self.path)
        query = {k: v[0] for k, v in parse_qs(parts.query).items()}
        headers = dict(self.headers.items())
        if parts.path == LOGIN_PATH:
            self._login(headers, query.get("code"))
            return
        refused = self.server.guard.read_refusal(headers)
        if refused is not None:
            self._refuse(refused, as_json=False)
            return
        name = parts.path.removeprefix("/static/")
        if parts.path.startswith("/static/") and name in STATIC:
            # A file of the package: no backend, so never queued behind a ledger read.
            data = resources.files("sweeper_cli.webconsole").joinpath("static", name).read_bytes()
            self._send(HTTPStatus.OK, data, f"{STATIC[name]}; charset=utf-8")
            return
        try:
            with self.server.backend_lock:
                self._route(parts.path, query)
        except SweeperError as exc:
            self._html(
                HTTPStatus.BAD_REQUEST,
                "error",
                page.message_page("refused", f"{type(exc).__name__}: {exc}"),
            )
        except Exception as exc:  # one line, never a traceback: it may hold a key or a tenant
            self._unexpected(exc, as_json=False)

    def _login(self, headers: dict[str, str], code: str | None) -> None:
        """Trade the one-time code for the session cookie; a browser already signed in moves
        on to the console; anything else is refused."""
        guard = self.server.guard
        refused = guard.host_refusal(headers)
        if refused is not None:
            self._refuse(refused, as_json=False)
        elif guard.login.redeem(code):
            extra = {"Set-Cookie": guard.set_cookie()}
            self._send(HTTPStatus.OK, SIGNED_IN_PAGE, "text/html; charset=utf-8", extra)
        elif guard.signed_in(headers):
            self._send(HTTPStatus.SEE_OTHER, b"", "text/plain", {"Location": "/"})
        else:
            reason = "this login code was used or has expired: restart `sweeper console`"
            self._refuse(Refusal(HTTPStatus.FORBIDDEN, reason), as_json=False)

    def _unexpected(self, exc: Exception, *, as_json: bool) -> None:
        line = f"unexpected {type(exc).__name__}; see the terminal running `sweeper console`"
        sys.stderr.write(f"sweeper console: a request failed ({type(exc).__name__})\n")
        self._refuse(Refusal(HTTPStatus.INTERNAL_SERVER_ERROR, line), as_json=as_json)

    def _route(self, path: str, query: dict[str, str]) -> None:
        backend = self.server.backend
        policies = backend.policies()
        if path == "/":
            sections = [
                page.overview(name, backend.overview(name), backend.activity(name), policies)
                for name in policies
            ]
            self._html(HTTPStatus.OK, "overview", "".join(sections))
        elif path == "/search":
            policy = query.get("policy") or policies[0]
            text = query.get("q", "")
            hits = backend.search(policy, text)
            self._html(HTTPStatus.OK, "search", page.search_page(policy, text, hits, policies))
        elif path == "/job":
            job = backend.job(query.get("key", ""))
            if job is None:
                body = page.message_page("no such job", "no job has this operation key")
                self._html(HTTPStatus.NOT_FOUND, "job", body)
            else:
                self._html(HTTPStatus.OK, "job", page.job_page(job))
        else:
            self._send(HTTPStatus.NOT_FOUND, b"not found\n", "text/plain; charset=utf-8")

    # -- changing -----------------------------------------------------------------------------

    def do_POST(self) -> None:
        refused = self.server.guard.change_refusal(dict(self.headers.items()))
        if refused is not None:
            self._refuse(refused, as_json=True)
            return
        if urlsplit(self.path).path != "/api/action":
            self._json(HTTPStatus.NOT_FOUND, {"error": "not found"})
            return
        try:
            length = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            length = -1
        if not 0 < length <= MAX_BODY_BYTES:
            self._json(HTTPStatus.BAD_REQUEST, {"error": "a JSON body of at most 16 KiB"})
            return
        try:
            body = json.loads(self.rfile.read(length))
            request = _ActionRequest.parse(body)
        except (ValueError, TypeError, KeyError) as exc:
            self._json(HTTPStatus.BAD_REQUEST, {"error": f"not an action request: {exc}"})
            return
        try:
            with self.server.backend_lock:
                report = self.server.backend.act(
                    request.policy,
                    request.action,
                    key=request.key,
                    tenant_id=request.tenant_id,
                    reason=request.reason,
                    until=request.until,
                    dry_run=request.dry_run,
                )
        except SweeperError as exc:
            self._json(HTTPStatus.BAD_REQUEST, {"error": str(exc)})
            return
        except Exception as exc:  # one line, never a traceback
            self._unexpected(exc, as_json=True)
            return
        self._json(HTTPStatus.OK, report)

    def do_OPTIONS(self) -> None:
        # No CORS: a preflight gets no Access-Control-* header, so the browser stops there.
        self._send(HTTPStatus.FORBIDDEN, b"", "text/plain")

    do_PUT = do_DELETE = do_PATCH = do_OPTIONS


class _ActionRequest:
    """The JSON an action POST carries, checked field by field."""

    def __init__(self, body: dict[str, Any]) -> None:
        self.policy = _text(body, "policy", required=True) or ""
        self.action = _text(body, "action", required=True) or ""
        self.key = _text(body, "key")
        self.tenant_id = _text(body, "tenant_id")
        self.reason = _text(body, "reason")
        until = _text(body, "until")
        self.until = None if until is None else _time(until)
        dry_run = body.get("dry_run", True)
        if not isinstance(dry_run, bool):
            raise TypeError("dry_run must be true or false")
        self.dry_run = dry_run

    @classmethod
    def parse(cls, body: Any) -> _ActionRequest:
        if not isinstance(body, dict):
            raise TypeError("a JSON object")
        return cls(body)


def _text(body: dict[str, Any], name: str, *, required: bool = False) -> str | None:
    value = body.get(name)
    if value is None or value == "":
        if required:
            raise KeyError(name)
        return None
    if not isinstance(value, str) or len(value) > 1000:
        raise TypeError(f"{name} must be a short string")
    return value


def _time(value: str) -> datetime:
    parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    if parsed.tzinfo is None:
        raise ValueError("give the time with a time zone, e.g. 2026-12-31T00:00:00Z")
    return parsed.astimezone(UTC)

"""A loopback stand-in for the operator API's two function URLs, over the local stack.

It does what the Lambda function URL service does before the function runs, as far as the
local stack can: a request without a SigV4 `Authorization` header is refused with 403 and never
reaches the function; a signed one becomes a function URL event whose authorizer names the
caller (`arn:aws:iam::000000000000:user/<access key id>`, the local emulator's account), and
the function's own logic (`serve_function_url`) answers it with the local stack's backend.
`/read/` is the read-only function, `/operate/` the operator one.

The read-only function's ledger is reached as the reader role (migration 0014: SELECT on what
the reads read), as on AWS; locally it is assumed by the database URL's user at login
(`options=-c role=sweeper_reader`) rather than logged in as with a secret of its own.
"""

from __future__ import annotations

import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from psycopg.conninfo import conninfo_to_dict, make_conninfo

from sweeper.endpoints import LocalFile
from sweeper.ledger.roles import READER_ROLE
from sweeper.ledger.store import Ledger
from sweeper.operator_api.commands import Backend
from sweeper.operator_api.service import Access, function_url_response, serve_function_url
from sweeper_tools.endpoints import resolve, wake_store, write_local_file
from sweeper_tools.operator_client import OPERATOR_URL_OUTPUT, READ_ONLY_URL_OUTPUT
from sweeper_tools.policy_file import load_config

LOCAL_ACCOUNT = "000000000000"
_CREDENTIAL_RE = re.compile(r"^AWS4-HMAC-SHA256 Credential=([A-Za-z0-9]+)/")
_PATHS: dict[str, Access] = {"/read/": "read", "/operate/": "operate"}


def caller_for(authorization: str | None) -> str | None:
    """The principal a SigV4 Authorization header names (by its access key id), or None."""
    match = _CREDENTIAL_RE.match(authorization or "")
    return None if match is None else f"arn:aws:iam::{LOCAL_ACCOUNT}:user/{match[1]}"


def as_role(conninfo: str, role: str) -> str:
    """The connection string whose session takes `role`'s rights (and only those) at login."""
    info = conninfo_to_dict(conninfo)
    info["options"] = f"{info.get('options') or ''} -c role={role}".strip()
    return make_conninfo(**info)  # type: ignore[arg-type]


def function_url_event(body: str, caller: str, method: str = "POST") -> dict[str, Any]:
    """The event Lambda builds for a function URL request an IAM authorizer let through."""
    return {
        "version": "2.0",
        "rawPath": "/",
        "rawQueryString": "",
        "headers": {"content-type": "application/json"},
        "requestContext": {
            "accountId": LOCAL_ACCOUNT,
            "apiId": "local",
            "authorizer": {"iam": {"accountId": LOCAL_ACCOUNT, "userArn": caller}},
            "domainName": "localhost",
            "http": {
                "method": method,
                "path": "/",
                "protocol": "HTTP/1.1",
                "sourceIp": "127.0.0.1",
                "userAgent": "sweeper",
            },
            "requestId": "local",
            "routeKey": "$default",
            "stage": "$default",
            "time": "",
            "timeEpoch": 0,
        },
        "body": body,
        "isBase64Encoded": False,
    }


class OperatorApiStandIn:
    """The two URLs on loopback, serving the local stack in `local_file`."""

    def __init__(self, local_file: Path) -> None:
        self.local_file = local_file
        endpoints = resolve(
            local_file=str(local_file), database_url=None, region=None, profile=None, stack=None
        )
        assert endpoints.local is not None
        self.local: LocalFile = endpoints.local
        database_url = self.local.database_url
        config = load_config(self.local.config)
        reader_url = as_role(database_url, READER_ROLE)
        #: One backend per function: the read-only one reads as the reader role.
        self.backends: dict[Access, Backend] = {
            "read": Backend(config, endpoints, lambda: Ledger(reader_url)),
            "operate": Backend(
                config, endpoints, lambda: Ledger(database_url, wake=wake_store(endpoints))
            ),
        }
        self.backend = self.backends["operate"]
        self._lock = threading.Lock()
        stand_in = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                stand_in.answer(self)

            def log_message(self, format: str, *args: Any) -> None:
                return

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def urls(self) -> dict[str, str]:
        port = self._server.server_address[1]
        return {
            OPERATOR_URL_OUTPUT: f"http://127.0.0.1:{port}/operate/",
            READ_ONLY_URL_OUTPUT: f"http://127.0.0.1:{port}/read/",
        }

    def start(self) -> OperatorApiStandIn:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def write_local_file(self, path: Path) -> Path:
        """A local stack file that names this stand-in as the operator API."""
        write_local_file(self.local.model_copy(update={"operator_api": self.urls}), path)
        return path

    def answer(self, request: BaseHTTPRequestHandler) -> None:
        access = _PATHS.get(request.path)
        caller = caller_for(request.headers.get("Authorization"))
        length = int(request.headers.get("Content-Length") or 0)
        body = request.rfile.read(length).decode("utf-8", "replace")
        if access is None or caller is None:  # what IAM refuses before the function runs
            self._send(request, 403, json.dumps({"Message": "Forbidden"}))
            return
        with self._lock:  # one ledger connection, as one warm function has
            reply = serve_function_url(
                function_url_event(body, caller), access=access, backend=self.backends[access]
            )
        response = function_url_response(reply)
        self._send(request, response["statusCode"], response["body"])

    @staticmethod
    def _send(request: BaseHTTPRequestHandler, status: int, body: str) -> None:
        data = body.encode()
        request.send_response(status)
        request.send_header("content-type", "application/json")
        request.send_header("content-length", str(len(data)))
        request.end_headers()
        request.wfile.write(data)

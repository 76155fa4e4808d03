"""The webhook on loopback: the same `handle_webhook` the function URL runs, behind HTTP.

It keeps the limits the AWS front keeps: at most `concurrency` requests at once (Lambda's
reserved concurrency; beyond it a function URL answers 429), and a body larger than the
policy's limit is refused by its Content-Length, unread.
"""

from __future__ import annotations

import json
import logging
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Mapping
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self

from aws_lambda_powertools.utilities.parameters import SecretsProvider

from sweeper.config import Policy
from sweeper.intake.replay import DynamoReplayMarkers
from sweeper.intake.secrets import RotatingSecret
from sweeper.intake.send import QueueBacklog
from sweeper.intake.signature import SCHEME, digest
from sweeper.intake.webhook import (
    PATH_RE,
    RETRY_AFTER_SECONDS,
    WebhookDeps,
    WebhookRequest,
    WebhookResponse,
    handle_webhook,
)
from sweeper.observability import MetricSink
from sweeper.sqs_queue import SqsPublisher
from sweeper_local.aws import IntakeResources, LocalAws
from sweeper_local.postgres import free_port
from sweeper_local.service import Service

log = logging.getLogger(__name__)

#: How long the local secret is kept before it is read again (the Lambda caches for 300 s).
LOCAL_SECRET_MAX_AGE_SECONDS = 5
#: How often the server looks for shutdown (the default half second is paid by every stop).
SHUTDOWN_POLL_SECONDS = 0.1


class LocalWebhook(Service):
    """`POST /v1/hints/{policy}` on 127.0.0.1, one WebhookDeps per policy."""

    def __init__(
        self, deps: Mapping[str, WebhookDeps], *, concurrency: int = 10, port: int = 0
    ) -> None:
        self.deps = dict(deps)
        self.port = port
        self.concurrency = concurrency
        self._slots = threading.BoundedSemaphore(concurrency)
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> Self:
        self.port = self.port or free_port()
        self._server = ThreadingHTTPServer(("127.0.0.1", self.port), self._handler_class())
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": SHUTDOWN_POLL_SECONDS},
            name="sweeper-webhook",
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        webhook = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                webhook._serve(self)

            def do_GET(self) -> None:
                webhook._serve(self)

            def log_message(self, format: str, *args: Any) -> None:
                return  # no access log: paths and headers are the sender's

        return Handler

    def _serve(self, http: BaseHTTPRequestHandler) -> None:
        if not self._slots.acquire(blocking=False):
            self._send(http, WebhookResponse(429, {"error": "throttled"}, _retry_after()), True)
            return
        try:
            self._serve_one(http)
        finally:
            self._slots.release()

    def _serve_one(self, http: BaseHTTPRequestHandler) -> None:
        match = PATH_RE.match(http.path)
        deps = self.deps.get(match["policy"]) if match else None
        if deps is None:
            self._send(http, WebhookResponse(404, {"error": "not_found"}), True)
            return
        try:
            length = int(http.headers.get("Content-Length", "0"))
        except ValueError:
            length = -1
        if length < 0:
            self._send(http, WebhookResponse(400, {"error": "invalid_body"}), True)
            return
        if length > deps.policy.intake.max_body_bytes:
            # Refused unread, as Lambda refuses a payload over its limit; the connection closes.
            self._send(
                http,
                WebhookResponse(
                    413,
                    {"error": "body_too_large", "limit_bytes": deps.policy.intake.max_body_bytes},
                ),
                True,
            )
            return
        body = http.rfile.read(length) if length else b""
        request = WebhookRequest(
            method=http.command,
            path=http.path,
            headers={k.lower(): v for k, v in http.headers.items()},
            body=body,
        )
        self._send(http, handle_webhook(request, deps), False)

    @staticmethod
    def _send(http: BaseHTTPRequestHandler, response: WebhookResponse, close: bool) -> None:
        payload = json.dumps(response.body, separators=(",", ":")).encode()
        http.send_response(response.status)
        http.send_header("Content-Type", "application/json")
        http.send_header("Content-Length", str(len(payload)))
        for name, value in response.headers.items():
            http.send_header(name, value)
        if close:
            http.send_header("Connection", "close")
            http.close_connection = True
        http.end_headers()
        http.wfile.write(payload)


def _retry_after() -> dict[str, str]:
    return {"Retry-After": str(RETRY_AFTER_SECONDS)}


def local_webhook_deps(
    aws: LocalAws, resources: IntakeResources, policy: Policy, metrics: MetricSink
) -> WebhookDeps:
    """What the webhook function gets on AWS, pointed at the emulator."""
    secrets = aws.secretsmanager()
    sqs = aws.sqs()

    return WebhookDeps(
        policy=policy,
        secrets=RotatingSecret(
            resources.secret_arn,
            LOCAL_SECRET_MAX_AGE_SECONDS,
            current=SecretsProvider(boto3_client=secrets),
            previous=SecretsProvider(boto3_client=secrets),
        ),
        replay=DynamoReplayMarkers(aws.dynamodb(), resources.replay_table),
        publisher=SqsPublisher(sqs, resources.queue_url),
        backlog=QueueBacklog(sqs, resources.queue_url),
        clock=lambda: datetime.now(UTC),
        metrics=metrics,
    )


def post_signed(
    base_url: str,
    policy: str,
    secret: str,
    hints: object,
    *,
    timestamp: int | None = None,
    timeout_seconds: float = 10.0,
) -> tuple[int, dict[str, Any]]:
    """Send hints to a webhook as a sender would: JSON, signed now. Returns status and body."""
    body = json.dumps(hints, separators=(",", ":")).encode()
    stamp = int(time.time()) if timestamp is None else timestamp
    request = urllib.request.Request(  # noqa: S310 - the caller's webhook URL
        f"{base_url.rstrip('/')}/v1/hints/{policy}",
        data=body,
        method="POST",
        headers={
            "Content-Type": "application/json",
            "Sweeper-Signature": sign(secret, stamp, body),
        },
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout_seconds) as response:  # noqa: S310
            return response.status, json.loads(response.read() or b"{}")
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"{}")


def sign(secret: str, timestamp: int, body: bytes) -> str:
    """The header value a sender puts on `body` at `timestamp`."""
    return f"t={timestamp},{SCHEME}={digest(secret, timestamp, body)}"

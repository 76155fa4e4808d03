"""`POST /v1/hints/{policy}`: authenticate, validate, put on the intake queue, answer.

Plain Python behind small inputs: the Lambda function URL handler (functions/webhook) and the
local stack's loopback server both build a WebhookRequest and call `handle_webhook`.

Order matters: size first (413, nothing read), then the signature over the raw body (401,
nothing parsed), then the body (400/413), then load (429), then the replay marker, then the
send. 202 means the hints are on the intake queue, which the intake function drains into the
ledger; a body's values are never echoed, logged or put in a metric.
"""

from __future__ import annotations

import base64
import json
import logging
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sweeper.config import Policy
from sweeper.errors import HintRejectedError, PublishError, ReplayStoreError, SignatureError
from sweeper.intake.hints import parse_webhook_body
from sweeper.intake.replay import EXPIRY_MARGIN_SECONDS, Claim, DynamoReplayMarkers
from sweeper.intake.send import new_request_id, send_hints
from sweeper.intake.signature import SIGNATURE_HEADER, verify
from sweeper.observability import Metric, MetricSink
from sweeper.params import ParamsRules
from sweeper.sqs_queue import Publisher

logger = logging.getLogger(__name__)

PATH_RE = re.compile(r"^/v1/hints/(?P<policy>[^/]+)/?$")
#: What a shed or failed request is told to wait before trying again.
RETRY_AFTER_SECONDS = 5
#: Answers to a request refused for what it is (unsigned, badly signed, malformed, too large,
#: wrong path or method): a metric each, no log line at INFO.
REJECTED_STATUSES = frozenset({400, 401, 404, 405, 413})


@dataclass(frozen=True, slots=True)
class WebhookRequest:
    method: str
    path: str
    #: Header names in lower case.
    headers: Mapping[str, str]
    body: bytes


@dataclass(frozen=True, slots=True)
class WebhookResponse:
    status: int
    body: dict[str, Any]
    headers: dict[str, str] = field(default_factory=dict)

    @property
    def code(self) -> str:
        return str(self.body.get("error") or self.body.get("result") or self.status)

    def json(self) -> str:
        return json.dumps(self.body, separators=(",", ":"))


@dataclass(frozen=True)
class WebhookDeps:
    policy: Policy
    #: The signing secrets to accept, current first (Secrets Manager's AWSCURRENT, then
    #: AWSPREVIOUS during a rotation; cached); raises when they cannot be read.
    secrets: Callable[[], tuple[str, ...]]
    replay: DynamoReplayMarkers
    publisher: Publisher
    #: Messages waiting on the intake queue, or None when unknown.
    backlog: Callable[[], int | None]
    clock: Callable[[], datetime]
    metrics: MetricSink


def _error(status: int, code: str, **extra: Any) -> WebhookResponse:
    headers = {"Retry-After": str(RETRY_AFTER_SECONDS)} if status in (429, 503) else {}
    return WebhookResponse(status, {"error": code, **extra}, headers)


def handle_webhook(request: WebhookRequest, deps: WebhookDeps) -> WebhookResponse:
    """Answer one request; counts its answer code as a metric and logs ids only.

    A request refused for what it is (REJECTED_STATUSES) is counted, not logged: anyone can send
    those, and a flood of them must not become a log line each (docs/decisions.md, 2026-12-02).
    """
    request_id = new_request_id()
    response = _handle(request, deps, request_id)
    deps.metrics.add_metric(f"{Metric.WEBHOOK_PREFIX}{response.code}", "Count", 1)
    log = logger.debug if response.status in REJECTED_STATUSES else logger.info
    log(
        "webhook answered",
        extra={
            "request_id": request_id,
            "policy": deps.policy.name,
            "status": response.status,
            "code": response.code,
            "bytes": len(request.body),
        },
    )
    return response


def _handle(request: WebhookRequest, deps: WebhookDeps, request_id: str) -> WebhookResponse:
    policy = deps.policy
    match = PATH_RE.match(request.path)
    if match is None or match["policy"] != policy.name:
        return _error(404, "not_found")
    if request.method.upper() != "POST":
        return WebhookResponse(405, {"error": "method_not_allowed"}, {"Allow": "POST"})
    if len(request.body) > policy.intake.max_body_bytes:
        return _error(413, "body_too_large", limit_bytes=policy.intake.max_body_bytes)

    now = deps.clock()
    try:
        secrets = deps.secrets()
    except Exception:
        logger.exception("webhook secret unavailable", extra={"request_id": request_id})
        return _error(503, "unavailable")
    try:
        signature = verify(
            request.headers.get(SIGNATURE_HEADER),
            request.body,
            secrets,
            now=now.timestamp(),
            tolerance_seconds=policy.intake.signature_tolerance_seconds,
        )
    except SignatureError as exc:
        return _error(401, exc.reason)

    try:
        jobs = parse_webhook_body(
            request.body, now, policy.intake.max_hints_per_request, ParamsRules.of(policy)
        )
    except HintRejectedError as exc:
        if exc.reason == "too_many_hints":
            return _error(413, exc.reason, limit_hints=policy.intake.max_hints_per_request)
        return _error(400, exc.reason, problems=list(exc.problems))

    backlog = deps.backlog()
    if backlog is not None and backlog > policy.intake.max_backlog:
        return _error(429, "backlog")

    key = deps.replay.key(policy.name, signature.timestamp, signature.digest)
    expires_at = signature.timestamp + policy.intake.signature_tolerance_seconds
    try:
        claim = deps.replay.claim(
            key, now=now.timestamp(), expires_at=expires_at + EXPIRY_MARGIN_SECONDS
        )
    except ReplayStoreError:
        logger.exception("replay markers unavailable", extra={"request_id": request_id})
        return _error(503, "unavailable")
    if claim is Claim.DUPLICATE:
        return WebhookResponse(202, {"result": "duplicate", "accepted": 0})
    if claim is Claim.IN_PROGRESS:
        return _error(409, "in_progress")

    try:
        send_hints(deps.publisher, policy.name, "webhook", jobs, request_id=request_id)
    except PublishError:
        logger.exception("intake queue refused hints", extra={"request_id": request_id})
        try:
            deps.replay.release(key)
        except ReplayStoreError:
            # The claim's lease runs out instead; until then a retry with this signature
            # answers 409, and a retry signed anew is accepted.
            logger.exception("claim not released", extra={"request_id": request_id})
        return _error(503, "unavailable")
    try:
        deps.replay.accept(key)
    except ReplayStoreError:
        # The hints are on the queue: 202 stands. A replay after the lease may send them
        # again, which the ledger's upsert absorbs.
        logger.exception("claim not marked accepted", extra={"request_id": request_id})
    deps.metrics.add_metric(Metric.WEBHOOK_HINTS_ACCEPTED, "Count", len(jobs))
    return WebhookResponse(
        202, {"result": "accepted", "accepted": len(jobs), "request_id": request_id}
    )


def request_from_function_url(event: Mapping[str, Any]) -> WebhookRequest:
    """A Lambda function URL event (payload format 2.0) as a WebhookRequest, body as sent."""
    http = event.get("requestContext", {}).get("http", {})
    raw_body = event.get("body") or ""
    body = base64.b64decode(raw_body) if event.get("isBase64Encoded") else raw_body.encode("utf-8")
    headers = {str(k).lower(): str(v) for k, v in (event.get("headers") or {}).items()}
    return WebhookRequest(
        method=str(http.get("method", "")),
        path=str(event.get("rawPath", "")),
        headers=headers,
        body=body,
    )


def function_url_response(response: WebhookResponse) -> dict[str, Any]:
    return {
        "statusCode": response.status,
        "headers": {"content-type": "application/json", **response.headers},
        "body": response.json(),
    }

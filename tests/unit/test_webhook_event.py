"""The function URL event (payload 2.0) as a WebhookRequest, and the answer as Lambda wants it."""

from __future__ import annotations

import base64
import json

from sweeper.intake.webhook import (
    WebhookResponse,
    function_url_response,
    request_from_function_url,
)

BODY = b'{"tenant_id":"t1","object_id":"o\xc3\xa9"}'


def _event(body: str, encoded: bool) -> dict[str, object]:
    return {
        "version": "2.0",
        "rawPath": "/v1/hints/exports",
        "rawQueryString": "",
        "headers": {"Sweeper-Signature": "t=1,v1=ab", "content-type": "application/json"},
        "requestContext": {"http": {"method": "POST", "path": "/v1/hints/exports"}},
        "body": body,
        "isBase64Encoded": encoded,
    }


def test_a_plain_body_is_the_bytes_that_were_sent() -> None:
    request = request_from_function_url(_event(BODY.decode("utf-8"), encoded=False))
    assert (request.method, request.path, request.body) == ("POST", "/v1/hints/exports", BODY)
    assert request.headers["sweeper-signature"] == "t=1,v1=ab"  # names in lower case


def test_a_base64_body_is_decoded_to_the_bytes_that_were_sent() -> None:
    request = request_from_function_url(_event(base64.b64encode(BODY).decode(), encoded=True))
    assert request.body == BODY


def test_the_answer_is_json_with_its_headers() -> None:
    answer = function_url_response(WebhookResponse(429, {"error": "backlog"}, {"Retry-After": "5"}))
    assert answer["statusCode"] == 429
    assert answer["headers"] == {"content-type": "application/json", "Retry-After": "5"}
    assert json.loads(answer["body"]) == {"error": "backlog"}

"""Answers as vendors send them, over real HTTP: GitHub's exhausted limit (a 403 with
`x-ratelimit-remaining: 0`), Stripe's `Stripe-Should-Retry`, an error code in a JSON body, and a
form body as the server reads it."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any
from urllib.parse import parse_qsl

import pytest

from sweeper.actions.http import HttpAction, HttpActionConfig
from sweeper.models import ActionCall, OutcomeClass
from tests.calls import action_call
from tests.serving import served

pytestmark = pytest.mark.integration

Scripted = tuple[int, dict[str, str], bytes]


@dataclass
class Vendor:
    url: str = ""
    #: The next answers, in order; when empty, 204.
    answers: list[Scripted] = field(default_factory=list)
    requests: list[tuple[dict[str, str], bytes]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)


@pytest.fixture
def vendor() -> Iterator[Vendor]:
    state = Vendor()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def _any(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            with state.lock:
                state.requests.append((dict(self.headers.items()), body))
                status, headers, payload = state.answers.pop(0) if state.answers else (204, {}, b"")
            self.send_response(status)
            for name, value in headers.items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        do_POST = do_DELETE = _any

        def log_message(self, format: str, *args: object) -> None:
            pass

    with served(Handler) as url:
        state.url = url
        yield state


def _job(object_id: str = "ch_1", **params: Any) -> ActionCall:
    return action_call("refunds", "acct_1", object_id, **params)


def _action(vendor: Vendor, **config: Any) -> HttpAction:
    return HttpAction(
        HttpActionConfig(api_url=vendor.url, allow_plain_http=True, **config), token="tok"
    )


GITHUB_RULE = {
    "status": [403, 429],
    "header": {"name": "x-ratelimit-remaining", "equals": "0"},
    "outcome": "throttled",
    "retry_at_header": "x-ratelimit-reset",
}
STRIPE_RULES = [
    {"header": {"name": "Stripe-Should-Retry", "equals": "false"}, "outcome": "permanent"},
    {"header": {"name": "Stripe-Should-Retry", "equals": "true"}, "outcome": "transient"},
]


def _exhausted(reset_in: int) -> Scripted:
    headers = {
        "X-RateLimit-Limit": "5000",
        "X-RateLimit-Remaining": "0",
        "X-RateLimit-Reset": str(int(time.time()) + reset_in),
    }
    return 403, headers, b'{"message": "API rate limit exceeded for user ID 1."}'


def test_githubs_exhausted_limit_is_throttled_until_its_reset(vendor: Vendor) -> None:
    # Given GitHub's answer to an exhausted limit: 403, no requests left, a reset in 42 s
    vendor.answers.append(_exhausted(42))
    action = _action(vendor, outcome_rules=[GITHUB_RULE])
    # When the call is made
    result = action.perform(_job())
    # Then it is throttled until the reset (not auth: the credential is fine, no circuit opens)
    assert (result.outcome, result.code, result.status_code) == (
        OutcomeClass.THROTTLED,
        "http_403",
        403,
    )
    assert result.retry_after_seconds is not None
    assert 40 <= result.retry_after_seconds <= 43


def test_a_403_with_requests_left_is_still_a_refusal(vendor: Vendor) -> None:
    vendor.answers.append((403, {"X-RateLimit-Remaining": "4999"}, b""))
    result = _action(vendor, outcome_rules=[GITHUB_RULE]).perform(_job())
    assert result.outcome is OutcomeClass.AUTH


@pytest.mark.parametrize(
    ("status", "says", "outcome"),
    [
        (500, "false", OutcomeClass.PERMANENT),  # a 5xx Stripe says will fail again
        (409, "true", OutcomeClass.TRANSIENT),  # a lock Stripe says will clear
        (400, "true", OutcomeClass.TRANSIENT),
    ],
)
def test_stripe_should_retry_decides_over_the_status(
    vendor: Vendor, status: int, says: str, outcome: OutcomeClass
) -> None:
    vendor.answers.append((status, {"Stripe-Should-Retry": says}, b'{"error": {}}'))
    result = _action(vendor, outcome_rules=STRIPE_RULES).perform(_job())
    assert (result.outcome, result.code) == (outcome, f"http_{status}")


def test_an_error_code_in_a_json_body_decides_and_never_reaches_the_result(
    vendor: Vendor,
) -> None:
    # Given a vendor that answers 400 with its error's code in the body
    body = json.dumps({"error": {"code": "charge_already_refunded", "message": "secret text"}})
    vendor.answers.append((400, {"Content-Type": "application/json"}, body.encode()))
    rule = {
        "status": 400,
        "json_path": {"path": "error.code", "equals": "charge_already_refunded"},
        "outcome": "absent",
        "code": "already_refunded",
    }
    # When the call is made
    result = _action(vendor, outcome_rules=[rule]).perform(_job())
    # Then the rule's class and code are the result, and nothing of the body is in it
    assert (result.outcome, result.code) == (OutcomeClass.ABSENT, "already_refunded")
    assert "secret" not in result.model_dump_json()
    # ... and the connection was read to its end: the next call reuses it
    assert _action(vendor).perform(_job()).outcome is OutcomeClass.ACCEPTED


def test_a_form_body_reaches_the_server_as_its_fields(vendor: Vendor) -> None:
    action = _action(
        vendor,
        method="POST",
        url_template="{api_url}/v1/refunds",
        body={"charge": "{object_id}", "amount": "{params.amount}", "metadata": {"n": "a&b=c"}},
        body_encoding="form",
    )
    assert action.perform(_job(amount=1200)).outcome is OutcomeClass.ACCEPTED
    ((headers, body),) = vendor.requests
    assert headers["Content-Type"] == "application/x-www-form-urlencoded"
    assert parse_qsl(body.decode()) == [
        ("charge", "ch_1"),
        ("amount", "1200"),
        ("metadata[n]", "a&b=c"),
    ]

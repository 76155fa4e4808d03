"""An age too large for the time arithmetic (`stuck_after_seconds`, `older_than_days` of 1e300)
is refused by the operator API as an invalid request (400), before anything runs; it was an
unhandled OverflowError (issue 40)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from sweeper.config import Policy, SweeperConfig
from sweeper.operator_api.commands import Backend
from sweeper.operator_api.requests import MAX_AGE_DAYS, MAX_AGE_SECONDS
from sweeper.operator_api.service import serve_function_url

CALLER = "arn:aws:iam::000000000000:user/reader"


class _Ledger:
    """A ledger nothing may touch: a request that reaches it fails the test."""

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"the ledger was reached ({name}) by a request that is invalid")


def _event(body: dict[str, Any]) -> dict[str, Any]:
    """A function URL request as Lambda delivers it, from an IAM caller."""
    return {
        "version": "2.0",
        "rawPath": "/",
        "headers": {"content-type": "application/json"},
        "requestContext": {
            "http": {"method": "POST", "path": "/"},
            "authorizer": {"iam": {"userArn": CALLER}},
        },
        "body": json.dumps(body),
        "isBase64Encoded": False,
    }


def _backend() -> Backend:
    return Backend(
        config=SweeperConfig(policies=[Policy(name="exports")]),
        endpoints=None,  # type: ignore[arg-type]  # nothing valid reaches it here
        open_ledger=_Ledger,  # type: ignore[arg-type]
    )


@pytest.mark.parametrize(
    ("body", "access", "field"),
    [
        ({"command": "inspect", "stuck_after_seconds": 1e300}, "read", "stuck_after_seconds"),
        (
            {"command": "inspect", "stuck_after_seconds": MAX_AGE_SECONDS + 1},
            "read",
            "stuck_after_seconds",
        ),
        (
            {"command": "prune", "older_than_days": 1e300, "reason": "cleanup"},
            "operate",
            "older_than_days",
        ),
        (
            {"command": "prune", "older_than_days": MAX_AGE_DAYS + 1, "reason": "cleanup"},
            "operate",
            "older_than_days",
        ),
    ],
)
def test_an_age_past_a_hundred_years_is_an_invalid_request_and_nothing_runs(
    body: dict[str, Any], access: Any, field: str
) -> None:
    reply = serve_function_url(_event(body), access=access, backend=_backend())
    assert (reply.outcome, reply.status_code) == ("invalid", 400)
    assert field in reply.body["error"]
    assert "1e+300" not in reply.json()  # the value sent is never echoed


def test_a_prune_without_a_reason_is_an_invalid_request() -> None:
    body = {"command": "prune", "older_than_days": 30}
    reply = serve_function_url(_event(body), access="operate", backend=_backend())
    assert (reply.outcome, reply.status_code) == ("invalid", 400)
    assert "reason" in reply.body["error"]

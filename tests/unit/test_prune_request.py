"""A prune without a reason is refused by the operator API's handler as an invalid request
(400), before anything runs (issue 40: every change names its actor and reason)."""

from __future__ import annotations

import json
from typing import Any

from sweeper.config import Policy, SweeperConfig
from sweeper.operator_api.commands import Backend
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


def test_a_prune_without_a_reason_is_an_invalid_request() -> None:
    body = {"command": "prune", "older_than_days": 30}
    reply = serve_function_url(_event(body), access="operate", backend=_backend())
    assert (reply.outcome, reply.status_code) == ("invalid", 400)
    assert "reason" in reply.body["error"]
    reply = serve_function_url(
        _event({**body, "reason": " "}), access="operate", backend=_backend()
    )
    assert (reply.outcome, reply.status_code) == ("failed", 422)
    assert "give a reason to prune" in reply.body["error"]

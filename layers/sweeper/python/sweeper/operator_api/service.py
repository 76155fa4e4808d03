"""The operator API's logic, knowing nothing of Lambda: a body and the caller's identity in,
a reply out.

The body is validated whole against the request models (`requests.py`); anything else is
refused with an outcome code and nothing runs. Which commands may run depends on `access`, the
function's own setting: the read-only function serves `READ_COMMANDS` only, whoever asks, so a
principal allowed to reach only that function can change nothing. The actor every change
records is `caller`, the IAM principal ARN the function URL's authorizer established, never a
value from the body.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import ValidationError

from sweeper.errors import SweeperError
from sweeper.operator_api.commands import Backend, ConfirmationNeededError, run_command
from sweeper.operator_api.requests import READ_COMMANDS, REQUEST_ADAPTER

Access = Literal["read", "operate"]

#: Far more than any request needs (a thousand keys); a larger body is refused unread.
MAX_BODY_BYTES = 256 * 1024
#: The ledger's actor column holds this many characters (migration 0012), IAM's own limit for
#: an ARN; a longer caller is no IAM principal, and is refused rather than recorded cut short.
MAX_PRINCIPAL_CHARS = 2048

#: Outcome codes, one per way a request ends (the handler counts each).
OK = "ok"
INVALID = "invalid"
FORBIDDEN = "forbidden"
CONFIRM = "confirm"
FAILED = "failed"

_STATUS = {OK: 200, INVALID: 400, FORBIDDEN: 403, CONFIRM: 409, FAILED: 422}


@dataclass(frozen=True)
class Reply:
    """What the API answers: the outcome, and the JSON body."""

    outcome: str
    body: dict[str, Any] = field(default_factory=dict)
    command: str | None = None

    @property
    def status_code(self) -> int:
        return _STATUS[self.outcome]

    def json(self) -> str:
        return json.dumps(self.body, default=str)


def _refuse(outcome: str, message: str, command: str | None = None) -> Reply:
    return Reply(outcome, {"ok": False, "outcome": outcome, "error": message}, command)


def parse_body(body: str | bytes | None) -> Any:
    """The JSON object of a request body; ValueError when it is not one."""
    if body is None:
        raise ValueError("the body is empty: send a JSON object")
    raw = body.encode() if isinstance(body, str) else body
    if len(raw) > MAX_BODY_BYTES:
        raise ValueError(f"the body is larger than {MAX_BODY_BYTES} bytes")
    data = json.loads(raw)
    if not isinstance(data, dict):
        raise ValueError("the body is not a JSON object")
    return data


def _describe(exc: ValidationError) -> str:
    """Where and what is wrong, never the value sent."""
    problems = []
    for error in exc.errors(include_input=False, include_url=False)[:5]:
        where = ".".join(str(part) for part in error["loc"]) or "body"
        problems.append(f"{where}: {error['msg']}")
    return "; ".join(problems)


def serve(
    body: str | bytes | None, *, caller: str | None, access: Access, backend: Backend
) -> Reply:
    """Validate, authorize and run one request; the reply, never an exception for a refusal."""
    if not caller or not caller.startswith("arn:"):
        return _refuse(FORBIDDEN, "no IAM caller: reach the operator API through its IAM URL")
    if len(caller) > MAX_PRINCIPAL_CHARS:
        return _refuse(
            FORBIDDEN,
            f"your principal ARN is longer than the {MAX_PRINCIPAL_CHARS} characters the ledger "
            "records: use a shorter role session name",
        )
    try:
        data = parse_body(body)
    except (ValueError, UnicodeDecodeError) as exc:
        message = str(exc) if not isinstance(exc, json.JSONDecodeError) else "not JSON"
        return _refuse(INVALID, f"invalid request: {message}")
    command = data.get("command") if isinstance(data.get("command"), str) else None
    try:
        request = REQUEST_ADAPTER.validate_python(data)
    except ValidationError as exc:
        return _refuse(INVALID, f"invalid request: {_describe(exc)}")
    command = request.command
    if access != "operate" and command not in READ_COMMANDS:
        return _refuse(
            FORBIDDEN,
            f"{command} changes the ledger: the read-only operator API serves "
            f"{', '.join(sorted(READ_COMMANDS))} only (use the operator role)",
            command,
        )
    try:
        result = run_command(backend, request, actor=caller)
    except ConfirmationNeededError as exc:
        reply = _refuse(CONFIRM, str(exc), command)
        reply.body["moved"] = exc.moved
        reply.body["threshold"] = exc.threshold
        return reply
    except SweeperError as exc:
        reply = _refuse(FAILED, str(exc), command)
        reply.body["error_type"] = type(exc).__name__
        return reply
    return Reply(OK, {"ok": True, "command": command, "result": result}, command)


def caller_of(event: dict[str, Any]) -> str | None:
    """The IAM principal ARN the function URL's AWS_IAM authorizer established, or None (an
    event that did not come through an IAM-authorized function URL)."""
    from aws_lambda_powertools.utilities.data_classes import LambdaFunctionUrlEvent

    try:
        authorizer = LambdaFunctionUrlEvent(event).request_context.authorizer
        iam = authorizer.iam if authorizer is not None else None
        return iam.user_arn if iam is not None else None
    except (KeyError, TypeError, AttributeError):
        return None


def serve_function_url(event: dict[str, Any], *, access: Access, backend: Backend) -> Reply:
    """One function URL request: only a POST with a JSON body, from an IAM caller."""
    from aws_lambda_powertools.utilities.data_classes import LambdaFunctionUrlEvent

    caller = caller_of(event)
    try:
        request = LambdaFunctionUrlEvent(event)
        method = request.request_context.http.method
        body = request.decoded_body
    except (KeyError, TypeError, AttributeError, ValueError):
        return _refuse(INVALID, "invalid request: not a function URL request")
    if method != "POST":
        return _refuse(INVALID, "invalid request: POST a JSON object")
    return serve(body, caller=caller, access=access, backend=backend)


def function_url_response(reply: Reply) -> dict[str, Any]:
    return {
        "statusCode": reply.status_code,
        "headers": {"content-type": "application/json"},
        "body": reply.json(),
    }

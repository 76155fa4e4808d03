"""The `lambda` action kind: invoke the team's own function synchronously with the job.

The kind's module (see sweeper.actions.base): its config (`LambdaActionConfig`), its
implementation (`LambdaInvokeAction`), its outcome mapping (the function's answer through
`sweeper.actions.contract`; the Invoke API's own errors through `classify_invoke_error`) and its
plan defaults (none: the function's latency is measured); its grant and network path are its
deploy-time provider (`sweeper_tools.deploy.lambda_invoke`).

The event is `contract.Call.to_payload()`; the function returns `contract.Answer`'s JSON shape.
A function that raised is answered by Lambda with `FunctionError`: its `errorType` `NotSent`
is TRANSIENT (the function says nothing was sent), any other is UNKNOWN.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Final, Literal

from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    ConnectTimeoutError,
    EndpointConnectionError,
)
from pydantic import Field

from sweeper.actions.base import Action, ActionContext, AwsAction, AwsKind, aws_refusal
from sweeper.actions.contract import (
    BAD_ANSWER,
    Call,
    NotSent,
    result_of_answer,
)
from sweeper.models import ActionCall, ActionResult, OutcomeClass

#: An unqualified function ARN: the team's own function, in a named account and region.
FUNCTION_ARN_PATTERN: Final = (
    r"^arn:aws[a-z-]*:lambda:[a-z0-9-]+:\d{12}:function:[A-Za-z0-9_-]{1,64}$"
)

#: Invoke API errors that say the function never ran: retried as TRANSIENT.
_NOT_RUN: Final = frozenset(
    {
        "ResourceNotReadyException",
        "ResourceConflictException",
        "EC2ThrottledException",
        "EC2UnexpectedException",
        "ENILimitReachedException",
        "SubnetIPAddressLimitReachedException",
        "KMSNotFoundException",
        "KMSDisabledException",
        "KMSInvalidStateException",
        "KMSAccessDeniedException",
        "SnapStartNotReadyException",
        "SnapStartTimeoutException",
    }
)
#: The caller or the function is refused (or missing): the scope closes (auth) until fixed.
_AUTH: Final = frozenset(
    {
        "AccessDeniedException",
        "UnrecognizedClientException",
        "InvalidSignatureException",
        "ExpiredTokenException",
        "ResourceNotFoundException",
    }
)
_THROTTLED: Final = frozenset({"TooManyRequestsException"})
_BY_CODE: Final = {
    OutcomeClass.THROTTLED: _THROTTLED,
    OutcomeClass.AUTH: _AUTH,
    OutcomeClass.TRANSIENT: _NOT_RUN,
}


class LambdaActionConfig(AwsKind):
    """Invoke `function_arn` (at `qualifier`, an alias or version, when set) per job."""

    kind: Literal["lambda"] = "lambda"
    function_arn: str = Field(pattern=FUNCTION_ARN_PATTERN)
    qualifier: str | None = Field(default=None, pattern=r"^(\$LATEST|[A-Za-z0-9_-]{1,128})$")
    #: How long the function may run: at most its own timeout, and the consumer's.
    read_timeout_seconds: float = Field(default=30.0, gt=0, le=120)

    def build(self, context: ActionContext) -> Action:
        return LambdaInvokeAction(self)

    @property
    def call_seconds(self) -> float:
        return self.connect_timeout_seconds + self.read_timeout_seconds

    @property
    def function_name(self) -> str:
        return self.function_arn.rsplit(":", 1)[-1]

    @property
    def scope_host(self) -> str:
        return f"{self.function_name}.lambda"


def classify_invoke_error(exc: ClientError) -> ActionResult:
    """The Invoke API's own refusal (the function's answer is never one of these)."""
    code = str(exc.response.get("Error", {}).get("Code", "unknown"))
    # Another 5xx (ServiceException and the like): the function may have run.
    return aws_refusal(exc, code, _BY_CODE, OutcomeClass.UNKNOWN, service="lambda")


def result_of_function_error(payload: Any) -> ActionResult:
    """A function that raised: `NotSent` is TRANSIENT, anything else UNKNOWN."""
    error_type = payload.get("errorType") if isinstance(payload, dict) else None
    if error_type == NotSent.__name__:
        message = payload.get("errorMessage")
        code = message if isinstance(message, str) and 0 < len(message) <= 64 else "not_sent"
        return ActionResult(outcome=OutcomeClass.TRANSIENT, code=code)
    name = error_type if isinstance(error_type, str) and error_type else "function_error"
    return ActionResult(outcome=OutcomeClass.UNKNOWN, code=f"raised:{name}"[:64])


@dataclass
class LambdaInvokeAction(AwsAction[LambdaActionConfig]):
    """Carry out a job by invoking the function (RequestResponse); see `sweeper.actions.Action`."""

    service = "lambda"

    def perform(self, job: ActionCall, timeout_seconds: float | None = None) -> ActionResult:
        """Invoke once and classify the answer; never raises for the function's answer."""
        left = self.config.call_seconds if timeout_seconds is None else timeout_seconds
        if left <= 0:
            return ActionResult(outcome=OutcomeClass.TRANSIENT, code="no_time_left")
        request: dict[str, Any] = {
            "FunctionName": self.config.function_arn,
            "InvocationType": "RequestResponse",
            "Payload": json.dumps(Call.for_job(job, left).to_payload()).encode(),
        }
        if self.config.qualifier:
            request["Qualifier"] = self.config.qualifier
        try:
            answer = self.client().invoke(**request)
            body = answer["Payload"].read()
        except ClientError as exc:
            return classify_invoke_error(exc)
        except (EndpointConnectionError, ConnectTimeoutError):
            return ActionResult(outcome=OutcomeClass.TRANSIENT, code="lambda_connect_error")
        except BotoCoreError as exc:  # a read timeout, a dropped connection: it may have run
            return ActionResult(
                outcome=OutcomeClass.UNKNOWN, code=f"lambda_{type(exc).__name__}"[:64]
            )
        try:
            payload = json.loads(body) if body else None
        except ValueError:
            return BAD_ANSWER
        if answer.get("FunctionError"):
            return result_of_function_error(payload)
        return result_of_answer(payload)

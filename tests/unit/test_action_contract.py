"""The contract of the lambda and python kinds, and the python kind that runs it in-process."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from sweeper.actions.contract import Answer, Call, NotSent, result_of_answer
from sweeper.actions.lambda_invoke import (
    LambdaActionConfig,
    LambdaInvokeAction,
    classify_invoke_error,
    result_of_function_error,
)
from sweeper.actions.python_call import PythonActionConfig, PythonCallAction
from sweeper.actions.s3_delete import S3DeleteAction, S3DeleteActionConfig
from sweeper.models import ActionCall, OutcomeClass
from sweeper_tools.deploy import deploy_for
from sweeper_tools.deploy.base import NetworkPath

FUNCTION = "arn:aws:lambda:eu-west-1:111122223333:function:acme-cleanup"


def job(**params: Any) -> ActionCall:
    return ActionCall(
        key="exports:t1:o1:v1",
        idempotency_key="exports:t1:o1:v1#r1",
        policy="exports",
        policy_version=1,
        tenant_id="t1",
        object_id="o1",
        scope="global",
        attempt=2,
        batch_id="b",
        params=params,
    )


def python_config(**extra: Any) -> PythonActionConfig:
    return PythonActionConfig(callable="acme.cleanup:run", package_path="pkg", **extra)


def test_the_callable_receives_the_keys_ids_params_attempt_and_time_left() -> None:
    seen: list[Call] = []

    def run(call: Call) -> Answer:
        seen.append(call)
        return Answer(outcome=OutcomeClass.ACCEPTED)

    result = PythonCallAction(python_config(), run).perform(job(date="2026-11-30"), 4.5)
    assert result.outcome is OutcomeClass.ACCEPTED
    assert seen == [
        Call(
            operation_key="exports:t1:o1:v1",
            idempotency_key="exports:t1:o1:v1#r1",
            tenant_id="t1",
            object_id="o1",
            attempt=2,
            time_left_seconds=4.5,
            params={"date": "2026-11-30"},
        )
    ]


@pytest.mark.parametrize("outcome", list(OutcomeClass))
def test_every_outcome_class_may_be_answered_with_a_code(outcome: OutcomeClass) -> None:
    result = result_of_answer({"outcome": outcome.value, "code": "vendor_said_so"})
    assert (result.outcome, result.code) == (outcome, "vendor_said_so")


def test_snooze_and_throttled_carry_their_wait() -> None:
    result = result_of_answer({"outcome": "snooze", "retry_after_seconds": 30})
    assert result.outcome is OutcomeClass.SNOOZE
    assert result.retry_after_seconds == 30


@pytest.mark.parametrize(
    "answer", [None, "accepted", {"outcome": "done"}, {"outcome": "accepted", "body": "x"}]
)
def test_an_answer_outside_the_contract_is_unknown(answer: Any) -> None:
    assert result_of_answer(answer).outcome is OutcomeClass.UNKNOWN
    assert result_of_answer(answer).code == "bad_answer"


def test_not_sent_is_transient_and_any_other_exception_unknown() -> None:
    def never_sent(call: Call) -> Answer:
        raise NotSent("connect_refused")

    def broke(call: Call) -> Answer:
        raise RuntimeError("customer 42 secret")

    sent = PythonCallAction(python_config(), never_sent).perform(job())
    assert (sent.outcome, sent.code) == (OutcomeClass.TRANSIENT, "connect_refused")
    other = PythonCallAction(python_config(), broke).perform(job())
    # The exception's message may hold customer data: only its class is recorded
    assert (other.outcome, other.code) == (OutcomeClass.UNKNOWN, "raised:RuntimeError")


def test_a_callable_that_cannot_be_imported_closes_the_scope_without_a_call() -> None:
    config = PythonActionConfig(callable="no_such_module_xyz:run", package_path="pkg")
    result = PythonCallAction(config).perform(job())
    assert (result.outcome, result.code) == (OutcomeClass.AUTH, "callable_unavailable")


def test_the_python_kind_needs_no_grant_nor_path_beyond_the_consumers() -> None:
    assert deploy_for(python_config()).grants() == ()
    assert deploy_for(python_config()).network_path() == NetworkPath()


def test_the_package_path_is_read_against_the_policy_files_directory(tmp_path: Path) -> None:
    assert deploy_for(python_config()).layer_dir(tmp_path) == (tmp_path / "pkg").resolve()


def test_a_lambda_function_that_raised_not_sent_is_transient_else_unknown() -> None:
    not_sent = result_of_function_error({"errorType": "NotSent", "errorMessage": "dns"})
    assert (not_sent.outcome, not_sent.code) == (OutcomeClass.TRANSIENT, "dns")
    other = result_of_function_error({"errorType": "KeyError", "errorMessage": "'acct'"})
    assert (other.outcome, other.code) == (OutcomeClass.UNKNOWN, "raised:KeyError")


def _invoke_error(code: str, status: int) -> Any:
    from botocore.exceptions import ClientError

    response: Any = {"Error": {"Code": code}, "ResponseMetadata": {"HTTPStatusCode": status}}
    return ClientError(response, "Invoke")


@pytest.mark.parametrize(
    ("code", "status", "outcome"),
    [
        ("TooManyRequestsException", 429, OutcomeClass.THROTTLED),
        ("AccessDeniedException", 403, OutcomeClass.AUTH),
        ("ResourceNotFoundException", 404, OutcomeClass.AUTH),
        ("ResourceNotReadyException", 502, OutcomeClass.TRANSIENT),
        ("ServiceException", 500, OutcomeClass.UNKNOWN),
        ("RequestTooLargeException", 413, OutcomeClass.PERMANENT),
    ],
)
def test_the_invoke_apis_own_errors_are_classified(
    code: str, status: int, outcome: OutcomeClass
) -> None:
    assert classify_invoke_error(_invoke_error(code, status)).outcome is outcome


@pytest.mark.parametrize(
    ("value", "expected"), [("3", 3.0), ("inf", None), ("1e40", None), ("9" * 40, 3600.0)]
)
def test_an_invoke_throttles_retry_after_is_read_bounded(
    value: str, expected: float | None
) -> None:
    # Given the Invoke API throttling with a Retry-After, a plain one or an enormous one
    error = _invoke_error("TooManyRequestsException", 429)
    error.response["ResponseMetadata"]["HTTPHeaders"] = {"retry-after": value}
    # Then its wait is read as S3's and a vendor's are: none, or at most the bound
    assert classify_invoke_error(error).retry_after_seconds == expected


def test_the_lambda_kind_may_invoke_its_function_versions_and_aliases_only() -> None:
    (grant,) = deploy_for(LambdaActionConfig(function_arn=FUNCTION)).grants()
    assert grant.actions == ("lambda:InvokeFunction",)
    assert grant.resources == (FUNCTION, f"{FUNCTION}:*")


def test_the_lambda_kind_needs_a_full_function_arn() -> None:
    with pytest.raises(ValueError, match="function_arn"):
        LambdaActionConfig(function_arn="acme-cleanup")


class _AnsweringLambda:
    """A Lambda client that answers one Invoke with this response (the function's side)."""

    def __init__(self, response: dict[str, Any]) -> None:
        self.response = response
        self.requests: list[dict[str, Any]] = []

    def invoke(self, **request: Any) -> dict[str, Any]:
        self.requests.append(request)
        return self.response


def _invoke_with(response: dict[str, Any]) -> tuple[Any, _AnsweringLambda]:
    import io

    client = _AnsweringLambda({**response, "Payload": io.BytesIO(response["Payload"])})
    action = LambdaInvokeAction(
        LambdaActionConfig(function_arn=FUNCTION, qualifier="live"), lambda _: client
    )
    return action.perform(job(), 3.0), client


def test_a_function_that_raised_not_sent_is_transient_through_the_invoke_answer() -> None:
    result, client = _invoke_with(
        {
            "StatusCode": 200,
            "FunctionError": "Unhandled",
            "Payload": b'{"errorType": "NotSent", "errorMessage": "connect_refused"}',
        }
    )
    assert (result.outcome, result.code) == (OutcomeClass.TRANSIENT, "connect_refused")
    (request,) = client.requests
    assert (request["InvocationType"], request["Qualifier"]) == ("RequestResponse", "live")


def test_a_function_that_raised_anything_else_is_unknown() -> None:
    result, _ = _invoke_with(
        {"StatusCode": 200, "FunctionError": "Unhandled", "Payload": b'{"errorType": "KeyError"}'}
    )
    assert (result.outcome, result.code) == (OutcomeClass.UNKNOWN, "raised:KeyError")


def test_a_function_answer_that_is_not_json_is_unknown() -> None:
    result, _ = _invoke_with({"StatusCode": 200, "Payload": b"Simple Lambda happy path OK"})
    assert (result.outcome, result.code) == (OutcomeClass.UNKNOWN, "bad_answer")


def test_warming_the_lambda_python_and_s3_kinds_calls_and_builds_nothing() -> None:
    # Given an action of each kind that has nothing to prepare before its slot
    built: list[str] = []
    called: list[Call] = []
    lambda_action = LambdaInvokeAction(
        LambdaActionConfig(function_arn=FUNCTION), lambda _: built.append("lambda")
    )
    s3_action = S3DeleteAction(
        S3DeleteActionConfig(bucket="acme-exports", key_template="exports/{tenant_id}/{object_id}"),
        lambda _: built.append("s3"),
    )
    python_action = PythonCallAction(python_config(), called.append)
    # When each is warmed
    for action in (lambda_action, s3_action, python_action):
        action.warm(job(), 1.0)
    # Then no client was built and the team's code was not called
    assert built == []
    assert called == []

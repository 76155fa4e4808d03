"""The lambda kind against moto's Lambda in server mode, without Docker.

moto runs a function's code only in Docker. Its "simple" Lambda backend (moto's config
`{"lambda": {"use_docker": false}}`, set over its `/moto-api/config` endpoint) serves the same
Invoke API over HTTP and answers each invocation with the next result queued at
`/moto-api/static/lambda-simple/response` (or echoes the event when none is queued). The
function's answers are queued there; the kind's own request over HTTP, boto3 as shipped and the
classification of the answer are real. The simple backend answers for any function name and
never reports a function error, so the Invoke API's errors and `FunctionError` are covered by
the unit tests (tests/unit/test_action_contract.py). This moto server is the module's own:
switching its Lambda backend would drop other tests' functions.
"""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Iterator
from typing import Any

import boto3
import pytest

from sweeper.actions.lambda_invoke import LambdaActionConfig, LambdaInvokeAction
from sweeper.models import ActionCall, OutcomeClass
from sweeper_local.aws import LOCAL_REGION, LocalAws

pytestmark = pytest.mark.integration

ACCOUNT = "123456789012"
FUNCTION_NAME = "acme-cleanup"
FUNCTION_ARN = f"arn:aws:lambda:{LOCAL_REGION}:{ACCOUNT}:function:{FUNCTION_NAME}"


def _post(aws: LocalAws, path: str, body: dict[str, Any]) -> None:
    request = urllib.request.Request(
        aws.endpoint_url + path,
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=10):
        pass


@pytest.fixture(scope="module")
def simple_lambda() -> Iterator[LocalAws]:
    with LocalAws() as aws:
        _post(aws, "/moto-api/config", {"lambda": {"use_docker": False}})
        kwargs: dict[str, Any] = {
            "endpoint_url": aws.endpoint_url,
            "region_name": LOCAL_REGION,
            "aws_access_key_id": "testing",
            "aws_secret_access_key": "testing",
        }
        role = boto3.client("iam", **kwargs).create_role(
            RoleName="acme-cleanup", AssumeRolePolicyDocument="{}"
        )["Role"]["Arn"]
        boto3.client("lambda", **kwargs).create_function(
            FunctionName=FUNCTION_NAME,
            Runtime="python3.13",
            Role=role,
            Handler="app.handler",
            Code={"ZipFile": b"not run: moto's simple backend answers for it"},
        )
        yield aws


@pytest.fixture
def action(simple_lambda: LocalAws, monkeypatch: pytest.MonkeyPatch) -> LambdaInvokeAction:
    # boto3's own client, reaching moto through AWS_ENDPOINT_URL as the consumer would
    for name, value in simple_lambda.env().items():
        monkeypatch.setenv(name, value)
    return LambdaInvokeAction(LambdaActionConfig(function_arn=FUNCTION_ARN))


def answer_next(aws: LocalAws, *answers: Any) -> None:
    results = [a if isinstance(a, str) else json.dumps(a) for a in answers]
    _post(
        aws,
        "/moto-api/static/lambda-simple/response",
        {"results": results, "region": LOCAL_REGION, "account_id": ACCOUNT},
    )


def job(**params: Any) -> ActionCall:
    return ActionCall(
        key="exports:t1:o1:v1",
        idempotency_key="exports:t1:o1:v1",
        policy="exports",
        policy_version=1,
        tenant_id="t1",
        object_id="o1",
        scope="global",
        attempt=1,
        batch_id="b",
        params=params,
    )


def test_the_functions_answer_names_the_outcome(
    simple_lambda: LocalAws, action: LambdaInvokeAction
) -> None:
    answer_next(simple_lambda, {"outcome": "accepted", "code": "deleted"})
    result = action.perform(job(), 5.0)
    assert (result.outcome, result.code) == (OutcomeClass.ACCEPTED, "deleted")


def test_a_throttled_answer_carries_its_retry_after(
    simple_lambda: LocalAws, action: LambdaInvokeAction
) -> None:
    answer_next(simple_lambda, {"outcome": "throttled", "retry_after_seconds": 12})
    result = action.perform(job(), 5.0)
    assert (result.outcome, result.retry_after_seconds) == (OutcomeClass.THROTTLED, 12.0)


def test_the_event_is_the_contracts_call(
    simple_lambda: LocalAws, action: LambdaInvokeAction, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given no queued answer, moto's simple backend answers with the event itself: the event
    # is then what came back, and it is not an answer (UNKNOWN: the function ran)
    sent: list[bytes] = []
    client = action.client()
    original = client.invoke

    def recording(**request: Any) -> Any:
        sent.append(request["Payload"])
        return original(**request)

    monkeypatch.setattr(client, "invoke", recording)
    result = action.perform(job(date="2026-11-30"), 5.0)
    assert (result.outcome, result.code) == (OutcomeClass.UNKNOWN, "bad_answer")
    assert json.loads(sent[0]) == {
        "operation_key": "exports:t1:o1:v1",
        "idempotency_key": "exports:t1:o1:v1",
        "tenant_id": "t1",
        "object_id": "o1",
        "params": {"date": "2026-11-30"},
        "attempt": 1,
        "time_left_seconds": 5.0,
    }

"""The operator API's client: each command to its URL, signed for Lambda, replies mapped."""

from __future__ import annotations

import json
from typing import Any

import boto3
import pytest

from sweeper.errors import OperatorError
from sweeper.operator_api.commands import ConfirmationNeededError
from sweeper.operator_api.requests import (
    ControlRequest,
    InspectRequest,
    PauseRequest,
    StatusRequest,
)
from sweeper_tools.operator_client import OperatorApiClient

READ_URL = "https://read.lambda-url.eu-west-1.on.aws/"
OPERATE_URL = "https://operate.lambda-url.eu-west-1.on.aws/"


class Recorder:
    def __init__(self, status: int = 200, reply: Any = None) -> None:
        self.sent: list[tuple[str, dict[str, Any], dict[str, str]]] = []
        self.status = status
        self.reply = {"ok": True, "result": {"done": True}} if reply is None else reply

    def __call__(self, url: str, body: bytes, headers: dict[str, str]) -> tuple[int, bytes]:
        self.sent.append((url, json.loads(body), headers))
        return self.status, json.dumps(self.reply).encode()


def client(transport: Recorder) -> OperatorApiClient:
    session = boto3.Session(
        aws_access_key_id="AKIDEXAMPLE",
        aws_secret_access_key="secret",
        region_name="eu-west-1",
    )
    return OperatorApiClient(
        session, operator_url=OPERATE_URL, read_only_url=READ_URL, transport=transport
    )


def test_reads_go_to_the_read_only_url_and_changes_to_the_operator_url_signed_for_lambda() -> None:
    sent = Recorder()
    api = client(sent)
    for request in (StatusRequest(), InspectRequest(limit=5), PauseRequest(reason="x")):
        assert api.call(request) == {"done": True}
    assert [url for url, _, _ in sent.sent] == [READ_URL, READ_URL, OPERATE_URL]
    assert sent.sent[1][1]["limit"] == 5
    authorization = sent.sent[2][2]["Authorization"]
    assert authorization.startswith("AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/")
    assert "/eu-west-1/lambda/aws4_request" in authorization
    assert "X-Amz-Date" in sent.sent[2][2]


def test_a_refusal_by_iam_names_the_policy_to_attach() -> None:
    api = client(Recorder(403, {"Message": "Forbidden"}))
    with pytest.raises(OperatorError, match="operator policy"):
        api.call(PauseRequest())


def test_a_job_control_above_the_threshold_asks_for_confirmation() -> None:
    reply = {"ok": False, "outcome": "confirm", "error": "...", "moved": 150, "threshold": 100}
    api = client(Recorder(409, reply))
    with pytest.raises(ConfirmationNeededError) as raised:
        api.call(ControlRequest(command="hold", tenant_id="t", reason="legal"))
    assert (raised.value.moved, raised.value.threshold) == (150, 100)


def test_a_failed_command_raises_the_functions_error_class_and_message() -> None:
    reply = {
        "ok": False,
        "outcome": "failed",
        "error": "policy p is paused",
        "error_type": "OperatorError",
    }
    api = client(Recorder(422, reply))
    with pytest.raises(OperatorError, match=r"^policy p is paused$"):
        api.call(PauseRequest())

"""Invoking a deployed scheduled function (producer, discovery): its report, or one line."""

from __future__ import annotations

import io
import json
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import boto3
import pytest
from botocore.response import StreamingBody
from botocore.stub import Stubber

from sweeper.errors import OperatorError
from sweeper.producer.release import invoke_producer
from sweeper_tools.discovery_invoke import invoke_discovery

AT = datetime(2026, 11, 29, 2, 0, tzinfo=UTC)
INVOKERS: dict[str, Callable[..., dict[str, Any]]] = {
    "the producer": invoke_producer,
    "the discovery function": invoke_discovery,
}


def _client(answer: dict[str, Any] | None, error: str | None = None) -> Any:
    client = boto3.client(
        "lambda", region_name="eu-west-1", aws_access_key_id="x", aws_secret_access_key="x"
    )
    stubber = Stubber(client)
    if error:
        stubber.add_client_error("invoke", service_error_code=error)
    else:
        assert answer is not None
        raw = json.dumps(answer["body"]).encode()
        response = {"StatusCode": 200, "Payload": StreamingBody(io.BytesIO(raw), len(raw))}
        if answer.get("function_error"):
            response["FunctionError"] = "Unhandled"
        stubber.add_response("invoke", response)
    stubber.activate()
    return client


@pytest.mark.parametrize("what", list(INVOKERS))
def test_the_report_comes_back(what: str) -> None:
    client = _client({"body": {"published": 3}})
    assert INVOKERS[what](client, "fn", "exports", AT, region="eu-west-1") == {"published": 3}


@pytest.mark.parametrize("what", list(INVOKERS))
def test_a_function_error_is_one_line_naming_the_function_and_its_error_type(what: str) -> None:
    client = _client(
        {"body": {"errorType": "LedgerError", "errorMessage": "secret"}, "function_error": True}
    )
    with pytest.raises(OperatorError) as caught:
        INVOKERS[what](client, "fn", "exports", AT, region="eu-west-1")
    assert str(caught.value).startswith(f"{what} fn failed (LedgerError); ")
    assert "secret" not in str(caught.value)


@pytest.mark.parametrize("what", list(INVOKERS))
def test_an_invoke_refused_says_what_to_check(what: str) -> None:
    client = _client(None, error="AccessDeniedException")
    with pytest.raises(OperatorError, match=f"cannot invoke {what} fn: ClientError .*--stack"):
        INVOKERS[what](client, "fn", "exports", AT, region="eu-west-1")


@pytest.mark.parametrize("what", list(INVOKERS))
def test_no_report_is_an_error(what: str) -> None:
    client = _client({"body": None})
    with pytest.raises(OperatorError, match=f"{what} fn returned no report"):
        INVOKERS[what](client, "fn", "exports", AT, region="eu-west-1")

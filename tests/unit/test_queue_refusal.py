"""A send the queue's policy refuses says so in one line an operator can act on."""

from __future__ import annotations

import boto3
import pytest
from botocore.stub import Stubber

from sweeper.errors import PublishError
from sweeper.sqs_queue import OutgoingMessage, SqsPublisher

QUEUE_URL = "https://sqs.us-east-1.amazonaws.com/123456789012/Sweeper-work"


def _publisher(code: str) -> tuple[SqsPublisher, Stubber]:
    client = boto3.client(
        "sqs", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x"
    )
    stubber = Stubber(client)
    stubber.add_client_error(
        "send_message_batch",
        service_error_code=code,
        service_message="User: arn:aws:iam::1:user/alice",
    )
    return SqsPublisher(client, QUEUE_URL), stubber


def test_a_send_the_queue_policy_refuses_names_the_refusal_and_the_way_round_it() -> None:
    # Given a work queue whose policy admits only the stack's own roles
    publisher, stubber = _publisher("AccessDenied")
    # When a person's principal sends to it
    with stubber, pytest.raises(PublishError) as raised:
        publisher.send_batch([OutgoingMessage(entry_id="0", body="{}")])
    # Then the error names the refusal and the path that works, never AWS's message (an ARN)
    text = str(raised.value)
    assert "AccessDenied" in text
    assert "--stack" in text
    assert "alice" not in text


def test_another_client_error_carries_its_code() -> None:
    publisher, stubber = _publisher("ServiceUnavailable")
    with stubber, pytest.raises(PublishError) as raised:
        publisher.send_batch([OutgoingMessage(entry_id="0", body="{}")])
    assert "ServiceUnavailable" in str(raised.value)
    assert "--stack" not in str(raised.value)

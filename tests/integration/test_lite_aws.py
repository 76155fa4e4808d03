"""The benchmark's SQS and DynamoDB stand-in (sweeper_local.lite_aws) keeps AWS's semantics.

Each test runs against moto and against the stand-in: the same calls, the same answers. The
stand-in serves SQS and DynamoDB for the whole local stack and every other suite
(docs/local-stack.md, "Which emulator"); `SWEEPER_LOCAL_AWS=moto` runs those on moto instead.
Where moto is kinder than AWS, the test names AWS's documented behaviour and runs on the
stand-in only.
"""

from __future__ import annotations

import ast
import http.client
import json
import threading
import time
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

from sweeper_local import lite_aws
from sweeper_local.aws import LocalAws
from sweeper_local.lite_aws import FAILED_CONDITION, LiteAwsServer, serve
from tests.wire import count_writes, exchange

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_sqs import SQSClient


@pytest.fixture(scope="module")
def lite_server() -> Iterator[LiteAwsServer]:
    with serve() as server:
        yield server


@pytest.fixture(scope="module")
def lite_url(lite_server: LiteAwsServer) -> str:
    return f"http://127.0.0.1:{lite_server.server_address[1]}"


def _client(service: str, url: str) -> Any:
    return boto3.client(  # type: ignore[call-overload]
        service,
        endpoint_url=url,
        region_name="us-east-1",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
        config=Config(retries={"max_attempts": 1}),
    )


@pytest.fixture(scope="module")
def moto_aws() -> Iterator[LocalAws]:
    """moto with SQS and DynamoDB on it, whatever the session's local stack serves them with."""
    with LocalAws(lite=False) as aws:
        yield aws


@pytest.fixture(params=["moto", "lite"])
def backend(request: pytest.FixtureRequest, moto_aws: LocalAws, lite_url: str) -> str:
    return str(request.param)


@pytest.fixture
def sqs(backend: str, moto_aws: LocalAws, lite_url: str) -> SQSClient:
    return moto_aws.sqs() if backend == "moto" else _client("sqs", lite_url)


@pytest.fixture
def dynamodb(backend: str, moto_aws: LocalAws, lite_url: str) -> DynamoDBClient:
    if backend == "moto":
        return moto_aws.dynamodb()
    return _client("dynamodb", lite_url)  # type: ignore[no-any-return]


@pytest.fixture
def lite_sqs(lite_url: str) -> SQSClient:
    return _client("sqs", lite_url)  # type: ignore[no-any-return]


def _queue(sqs: SQSClient, name: str, **attributes: str) -> str:
    return sqs.create_queue(QueueName=name, Attributes=attributes)["QueueUrl"]  # type: ignore[arg-type]


def _arn(sqs: SQSClient, url: str) -> str:
    return sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"
    ]


def _receive(sqs: SQSClient, url: str, **kwargs: Any) -> list[Any]:
    return sqs.receive_message(
        QueueUrl=url, MaxNumberOfMessages=10, MessageSystemAttributeNames=["All"], **kwargs
    ).get("Messages", [])


def _code(exc: pytest.ExceptionInfo[ClientError]) -> str:
    return str(exc.value.response["Error"]["Code"])


# --- SQS -----------------------------------------------------------------------------------


def test_a_received_message_is_hidden_for_its_visibility_timeout_then_comes_back(
    sqs: SQSClient, unique_name: str
) -> None:
    url = _queue(sqs, unique_name, VisibilityTimeout="1")
    sqs.send_message(QueueUrl=url, MessageBody="job-1")

    first = _receive(sqs, url)
    assert [m["Body"] for m in first] == ["job-1"]
    assert first[0]["Attributes"]["ApproximateReceiveCount"] == "1"
    assert _receive(sqs, url) == []  # in flight: nobody else gets it

    deadline = time.monotonic() + 10
    again: list[Any] = []
    while not again and time.monotonic() < deadline:
        again = _receive(sqs, url, WaitTimeSeconds=1)
    assert [m["MessageId"] for m in again] == [first[0]["MessageId"]]
    assert again[0]["Attributes"]["ApproximateReceiveCount"] == "2"
    assert again[0]["ReceiptHandle"] != first[0]["ReceiptHandle"]


def test_a_deleted_message_never_returns_and_a_batch_reports_each_entry(
    sqs: SQSClient, unique_name: str
) -> None:
    url = _queue(sqs, unique_name, VisibilityTimeout="0")
    sent = sqs.send_message_batch(
        QueueUrl=url, Entries=[{"Id": str(i), "MessageBody": f"job-{i}"} for i in range(3)]
    )
    assert sorted(e["Id"] for e in sent["Successful"]) == ["0", "1", "2"]
    messages = _receive(sqs, url, VisibilityTimeout=30)
    assert sorted(m["Body"] for m in messages) == ["job-0", "job-1", "job-2"]

    deleted = sqs.delete_message_batch(
        QueueUrl=url,
        Entries=[
            {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(messages)
        ],
    )
    assert len(deleted["Successful"]) == 3
    attributes = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    assert attributes["ApproximateNumberOfMessages"] == "0"
    assert attributes["ApproximateNumberOfMessagesNotVisible"] == "0"


def test_a_message_received_max_receive_count_times_moves_to_the_dlq(
    sqs: SQSClient, unique_name: str
) -> None:
    dlq = _queue(sqs, f"{unique_name}-dlq")
    url = _queue(
        sqs,
        unique_name,
        VisibilityTimeout="0",
        RedrivePolicy=json.dumps({"deadLetterTargetArn": _arn(sqs, dlq), "maxReceiveCount": 2}),
    )
    sqs.send_message(QueueUrl=url, MessageBody="poison")
    sent_id = None
    for _ in range(2):
        got = _receive(sqs, url)
        assert [m["Body"] for m in got] == ["poison"]
        sent_id = got[0]["MessageId"]

    assert _receive(sqs, url) == []  # the third receive moves it instead of delivering it
    moved = _receive(sqs, dlq)
    assert [(m["MessageId"], m["Body"]) for m in moved] == [(sent_id, "poison")]


def test_a_visibility_change_to_zero_returns_the_message_at_once(
    sqs: SQSClient, unique_name: str
) -> None:
    url = _queue(sqs, unique_name, VisibilityTimeout="600")
    sqs.send_message(QueueUrl=url, MessageBody="job")
    (message,) = _receive(sqs, url)
    assert _receive(sqs, url) == []

    sqs.change_message_visibility(
        QueueUrl=url, ReceiptHandle=message["ReceiptHandle"], VisibilityTimeout=0
    )
    assert [m["Body"] for m in _receive(sqs, url)] == ["job"]


def test_a_long_poll_returns_when_a_message_arrives(sqs: SQSClient, unique_name: str) -> None:
    url = _queue(sqs, unique_name)
    got: list[Any] = []
    poller = threading.Thread(target=lambda: got.extend(_receive(sqs, url, WaitTimeSeconds=10)))
    poller.start()
    time.sleep(0.3)  # let the poll begin; it must not need its whole wait
    started = time.monotonic()
    sqs.send_message(QueueUrl=url, MessageBody="late")
    poller.join(timeout=15)
    assert [m["Body"] for m in got] == ["late"]
    assert time.monotonic() - started < 5


def test_batches_keep_sqs_limits(sqs: SQSClient, unique_name: str) -> None:
    url = _queue(sqs, unique_name)
    with pytest.raises(ClientError) as too_many:
        sqs.send_message_batch(
            QueueUrl=url, Entries=[{"Id": str(i), "MessageBody": "x"} for i in range(11)]
        )
    assert _code(too_many) in (
        "TooManyEntriesInBatchRequest",
        "AWS.SimpleQueueService.TooManyEntriesInBatchRequest",
    )
    with pytest.raises(ClientError) as repeated:
        sqs.send_message_batch(
            QueueUrl=url, Entries=[{"Id": "a", "MessageBody": "x"}, {"Id": "a", "MessageBody": "y"}]
        )
    assert "BatchEntryIdsNotDistinct" in _code(repeated)
    with pytest.raises(ClientError) as missing:
        sqs.get_queue_attributes(QueueUrl=url + "-nope", AttributeNames=["All"])
    assert "NonExistentQueue" in _code(missing) or "QueueDoesNotExist" in _code(missing)


def test_a_stale_receipt_handle_deletes_nothing_as_sqs_documents(
    lite_sqs: SQSClient, unique_name: str
) -> None:
    # DeleteMessage: "You must provide the most recently received receipt handle ... otherwise,
    # the request succeeds, but the message will not be deleted." (moto deletes it.)
    url = _queue(lite_sqs, unique_name, VisibilityTimeout="0")
    lite_sqs.send_message(QueueUrl=url, MessageBody="job")
    (old,) = _receive(lite_sqs, url)
    (new,) = _receive(lite_sqs, url, VisibilityTimeout=600)

    lite_sqs.delete_message(QueueUrl=url, ReceiptHandle=old["ReceiptHandle"])
    attributes = lite_sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])
    assert attributes["Attributes"]["ApproximateNumberOfMessagesNotVisible"] == "1"

    lite_sqs.delete_message(QueueUrl=url, ReceiptHandle=new["ReceiptHandle"])
    attributes = lite_sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])
    assert attributes["Attributes"]["ApproximateNumberOfMessagesNotVisible"] == "0"


def test_a_receive_waits_for_nothing_deleted_or_hidden(
    lite_sqs: SQSClient, unique_name: str
) -> None:
    # The stand-in keeps a heap of visibility times: deleted and re-hidden messages leave stale
    # entries behind, which a receive must skip, never deliver.
    url = _queue(lite_sqs, unique_name, VisibilityTimeout="600")
    lite_sqs.send_message_batch(
        QueueUrl=url, Entries=[{"Id": str(i), "MessageBody": f"job-{i}"} for i in range(10)]
    )
    first = _receive(lite_sqs, url, VisibilityTimeout=0)
    for message in first[:5]:
        lite_sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
    again = _receive(lite_sqs, url)
    assert sorted(m["Body"] for m in again) == sorted(m["Body"] for m in first[5:])
    assert _receive(lite_sqs, url) == []


# --- DynamoDB ------------------------------------------------------------------------------


def _table(dynamodb: DynamoDBClient, name: str) -> str:
    dynamodb.create_table(
        TableName=name,
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    return name


def test_a_failed_condition_returns_the_item_when_asked(
    dynamodb: DynamoDBClient, unique_name: str
) -> None:
    table = _table(dynamodb, unique_name)
    dynamodb.put_item(TableName=table, Item={"pk": {"S": "k"}, "v": {"N": "1"}})
    with pytest.raises(ClientError) as failed:
        dynamodb.put_item(
            TableName=table,
            Item={"pk": {"S": "k"}, "v": {"N": "2"}},
            ConditionExpression="attribute_not_exists(pk)",
            ReturnValuesOnConditionCheckFailure="ALL_OLD",
        )
    assert _code(failed) == "ConditionalCheckFailedException"
    assert failed.value.response.get("Item") == {"pk": {"S": "k"}, "v": {"N": "1"}}
    item = dynamodb.get_item(TableName=table, Key={"pk": {"S": "k"}}, ConsistentRead=True)
    assert item["Item"]["v"] == {"N": "1"}


def test_an_update_sets_adds_and_removes_as_dynamodb_does(
    dynamodb: DynamoDBClient, backend: str, unique_name: str
) -> None:
    table = _table(dynamodb, unique_name)
    key = {"pk": {"S": "scope#a"}}
    first = dynamodb.update_item(
        TableName=table,
        Key=key,
        UpdateExpression="SET tat = if_not_exists(tat, :zero) + :step, note = :n ADD closures :one",
        ConditionExpression="attribute_not_exists(closed_until) OR closed_until < :now",
        ExpressionAttributeValues={
            ":zero": {"N": "0"},
            ":step": {"N": "1.5"},
            ":n": {"S": "x"},
            ":one": {"N": "1"},
            ":now": {"N": "100"},
        },
        ReturnValues="UPDATED_NEW",
    )
    updated = dict(first["Attributes"])
    if backend == "moto":
        updated.pop("pk")  # moto returns the key too; DynamoDB returns only what was updated
    assert updated == {"tat": {"N": "1.5"}, "note": {"S": "x"}, "closures": {"N": "1"}}
    second = dynamodb.update_item(
        TableName=table,
        Key=key,
        UpdateExpression="SET #t = #t - :step REMOVE note",
        ConditionExpression="#t BETWEEN :low AND :high AND closures IN (:one, :two)",
        ExpressionAttributeNames={"#t": "tat"},
        ExpressionAttributeValues={
            ":step": {"N": "0.25"},
            ":low": {"N": "1"},
            ":high": {"N": "2"},
            ":one": {"N": "1"},
            ":two": {"N": "2"},
        },
        ReturnValues="ALL_NEW",
    )
    assert second["Attributes"] == {
        "pk": {"S": "scope#a"},
        "tat": {"N": "1.25"},
        "closures": {"N": "1"},
    }
    with pytest.raises(ClientError) as refused:
        dynamodb.update_item(
            TableName=table,
            Key=key,
            UpdateExpression="SET tat = :v",
            ConditionExpression="NOT (tat < :v)",
            ExpressionAttributeValues={":v": {"N": "5"}},
        )
    assert _code(refused) == "ConditionalCheckFailedException"


def test_one_expression_text_with_other_names_and_values_answers_for_its_own(
    dynamodb: DynamoDBClient, unique_name: str
) -> None:
    # The stand-in compiles an expression once and keeps it by its text and its names map:
    # the same text with another names map or other values must still mean what they say.
    table = _table(dynamodb, unique_name)
    key = {"pk": {"S": "k"}}
    dynamodb.put_item(TableName=table, Item={**key, "a": {"N": "1"}, "b": {"N": "2"}})
    update = "SET #x = :v"
    condition = "#x < :limit"

    def write(attribute: str, value: str, limit: str) -> None:
        dynamodb.update_item(
            TableName=table,
            Key=key,
            UpdateExpression=update,
            ConditionExpression=condition,
            ExpressionAttributeNames={"#x": attribute},
            ExpressionAttributeValues={":v": {"N": value}, ":limit": {"N": limit}},
        )

    def read(attribute: str) -> dict[str, Any]:
        return dynamodb.get_item(
            TableName=table,
            Key=key,
            ProjectionExpression="#p",
            ExpressionAttributeNames={"#p": attribute},
        )["Item"]

    write("a", "10", "5")
    write("b", "20", "5")  # another names map: b is written, not a
    write("a", "30", "11")  # other values: 10 < 11 holds, where 10 < 5 did not
    with pytest.raises(ClientError) as failed:
        write("b", "40", "20")  # 20 < 20 fails: the condition reads this request's values
    assert _code(failed) == "ConditionalCheckFailedException"
    assert read("a") == {"a": {"N": "30"}}
    assert read("b") == {"b": {"N": "20"}}
    # and a request that lacks a value the cached expression uses is refused, as before
    with pytest.raises(ClientError) as undefined:
        dynamodb.update_item(
            TableName=table,
            Key=key,
            UpdateExpression=update,
            ExpressionAttributeNames={"#x": "a"},
            ExpressionAttributeValues={":w": {"N": "1"}},
        )
    assert _code(undefined) == "ValidationException"


def test_a_key_attribute_cannot_be_updated(dynamodb: DynamoDBClient, unique_name: str) -> None:
    table = _table(dynamodb, unique_name)
    with pytest.raises(ClientError) as refused:
        dynamodb.update_item(
            TableName=table,
            Key={"pk": {"S": "k"}},
            UpdateExpression="SET pk = :v",
            ExpressionAttributeValues={":v": {"S": "other"}},
        )
    assert _code(refused) == "ValidationException"


def test_a_scan_filters_and_projects(dynamodb: DynamoDBClient, unique_name: str) -> None:
    table = _table(dynamodb, unique_name)
    for name, closed in (("a", 10), ("b", 500), ("c", 900)):
        dynamodb.put_item(
            TableName=table, Item={"pk": {"S": f"scope#{name}"}, "closed_until": {"N": str(closed)}}
        )
    page = dynamodb.scan(
        TableName=table,
        FilterExpression="closed_until > :now",
        ProjectionExpression="pk",
        ExpressionAttributeValues={":now": {"N": "100"}},
    )
    assert sorted(i["pk"]["S"] for i in page["Items"]) == ["scope#b", "scope#c"]
    assert all(set(i) == {"pk"} for i in page["Items"])


def test_conditional_writes_from_many_threads_never_lose_an_update(
    dynamodb: DynamoDBClient, unique_name: str
) -> None:
    # Each request is atomic: a compare-and-set on a version never lets two writers both win.
    table = _table(dynamodb, unique_name)
    key = {"pk": {"S": "counter"}}
    dynamodb.put_item(TableName=table, Item={**key, "v": {"N": "0"}})
    wins: list[int] = []

    def writer() -> None:
        for _ in range(15):
            while True:
                seen = dynamodb.get_item(TableName=table, Key=key, ConsistentRead=True)["Item"]
                version = int(seen["v"]["N"])
                try:
                    dynamodb.update_item(
                        TableName=table,
                        Key=key,
                        UpdateExpression="SET v = :next",
                        ConditionExpression="v = :seen",
                        ExpressionAttributeValues={
                            ":next": {"N": str(version + 1)},
                            ":seen": {"N": str(version)},
                        },
                    )
                except ClientError:
                    continue
                wins.append(version)
                break

    threads = [threading.Thread(target=writer) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    final = dynamodb.get_item(TableName=table, Key=key, ConsistentRead=True)["Item"]["v"]["N"]
    assert int(final) == 60
    assert sorted(wins) == list(range(60))  # every version won exactly once


def test_an_unused_expression_value_is_refused_as_dynamodb_does(
    lite_url: str, unique_name: str
) -> None:
    # DynamoDB: "Value provided in ExpressionAttributeValues unused in expressions".
    dynamodb = _client("dynamodb", lite_url)
    table = _table(dynamodb, unique_name)
    with pytest.raises(ClientError) as refused:
        dynamodb.update_item(
            TableName=table,
            Key={"pk": {"S": "k"}},
            UpdateExpression="SET v = :v",
            ExpressionAttributeValues={":v": {"N": "1"}, ":unused": {"N": "2"}},
        )
    assert _code(refused) == "ValidationException"
    assert "unused" in str(refused.value)


def test_what_the_stand_in_does_not_serve_is_refused_not_answered_wrongly(
    lite_url: str, unique_name: str
) -> None:
    dynamodb = _client("dynamodb", lite_url)
    table = _table(dynamodb, unique_name)
    with pytest.raises(ClientError) as nested:
        dynamodb.update_item(
            TableName=table,
            Key={"pk": {"S": "k"}},
            UpdateExpression="SET a.b = :v",
            ExpressionAttributeValues={":v": {"N": "1"}},
        )
    assert "nested attribute paths" in str(nested.value)
    sqs = _client("sqs", lite_url)
    url = _queue(sqs, unique_name)
    with pytest.raises(ClientError) as attributes:
        sqs.send_message(
            QueueUrl=url,
            MessageBody="x",
            MessageAttributes={"a": {"DataType": "String", "StringValue": "b"}},
        )
    assert "message attributes" in str(attributes.value)


def test_header_lines_are_read_without_the_email_parser_as_http_reads_them(
    lite_server: LiteAwsServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given the standard header parser made to fail: the stand-in must not need it for the
    # plain HTTP/1.1 requests botocore sends
    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("http.client.parse_headers was called")

    monkeypatch.setattr(http.client, "parse_headers", refuse)
    port = lite_server.server_address[1]
    body = b'{"TableName": "absent"}'
    request = (
        b"POST / HTTP/1.1\r\nhost: x\r\ncontent-type: application/x-amz-json-1.0\r\n"
        b"X-AMZ-TARGET: DynamoDB_20120810.DescribeTable\r\ncontent-length: %d\r\n\r\n%s"
    ) % (len(body), body)
    # When two requests share a connection (names in any case), the second asking to close
    answer = exchange(port, request + request.replace(b"host: x", b"Connection: close"))
    # Then both were read whole and answered, and the connection closed after the second
    assert answer.count(b"HTTP/1.1 400") == 2
    assert answer.count(b"ResourceNotFoundException") == 2
    assert answer.count(b"\r\nDate: ") == 2
    # and a header line that is no `Name: value` is refused, not guessed at
    bad = exchange(port, b"POST / HTTP/1.1\r\nno colon here\r\n\r\n")
    assert bad.startswith(b"HTTP/1.0 400") or bad.startswith(b"HTTP/1.1 400")


def test_a_repeated_header_name_reads_its_first_value_in_any_case(
    lite_server: LiteAwsServer,
) -> None:
    # Given a request naming its target twice, in two cases: DynamoDB's first, then another
    port = lite_server.server_address[1]
    body = b'{"TableName": "absent"}'
    request = (
        b"POST / HTTP/1.1\r\nx-amz-target: DynamoDB_20120810.DescribeTable\r\n"
        b"X-Amz-Target: Nobody.Nothing\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s"
    ) % (len(body), body)
    # When it is answered
    answer = exchange(port, request)
    # Then the first value was read, as http.client's HTTPMessage.get reads a repeated name
    assert b"com.amazonaws.dynamodb.v20120810#ResourceNotFoundException" in answer


def test_an_answer_leaves_in_one_write_with_a_request_id_of_its_own(
    lite_server: LiteAwsServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given the writes to the connections counted
    writes = count_writes(lite_aws._Handler, monkeypatch)
    port = lite_server.server_address[1]
    body = b'{"TableName": "absent"}'
    request = (
        b"POST / HTTP/1.1\r\nX-Amz-Target: DynamoDB_20120810.DescribeTable\r\n"
        b"Content-Length: %d\r\n\r\n%s"
    ) % (len(body), body)
    # When three requests are answered on one connection
    answer = exchange(
        port, request * 2 + request.replace(b"\r\n\r\n", b"\r\nConnection: close\r\n\r\n")
    )
    # Then each answer (status line, header fields, body) was one write
    assert len(writes) == 3
    assert all(w.startswith(b"HTTP/1.1 400 Bad Request\r\n") for w in writes)
    assert all(
        w.endswith(b'ResourceNotFoundException", "message": "Requested resource not found"}')
        for w in writes
    )
    assert answer == b"".join(writes)
    # and each carries a request id of its own, shaped as AWS's (a UUID)
    ids = [
        line.split(b": ", 1)[1].decode()
        for line in answer.split(b"\r\n")
        if line.lower().startswith(b"x-amzn-requestid:")
    ]
    assert len(ids) == 3
    assert len(set(ids)) == 3
    assert all(str(uuid.UUID(i)) == i for i in ids)


def test_the_date_header_is_formatted_at_most_once_a_second(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Given the standard formatting counted, and a clock that moves within a second and past it
    real = BaseHTTPRequestHandler.date_time_string
    formatted: list[float | None] = []

    def counting(self: BaseHTTPRequestHandler, timestamp: float | None = None) -> str:
        formatted.append(timestamp)
        return real(self, timestamp)

    monkeypatch.setattr(BaseHTTPRequestHandler, "date_time_string", counting)
    now = [1_000_000.2]
    monkeypatch.setattr(lite_aws, "time", SimpleNamespace(time=lambda: now[0]))
    handler = object.__new__(lite_aws._Handler)
    first = handler.date_time_string()
    now[0] = 1_000_000.9
    second = handler.date_time_string()
    now[0] = 1_000_001.1
    third = handler.date_time_string()
    # Then one second's answers share one formatting, and the next second gets its own
    assert first == second == real(handler, 1_000_000)
    assert third == real(handler, 1_000_001)
    assert formatted == [1_000_000, 1_000_001]


def test_every_request_is_counted_by_service_and_operation(unique_name: str) -> None:
    with LocalAws(lite=True) as aws:
        aws.sqs().create_queue(QueueName=unique_name)
        aws.dynamodb().list_tables()
        aws.dynamodb().list_tables()
        counts = aws.requests()
    assert counts == {"sqs:CreateQueue": 1, "dynamodb:ListTables": 2}


def test_the_keys_a_batch_get_read_are_counted_beside_it(unique_name: str) -> None:
    with LocalAws(lite=True) as aws:
        dynamodb = aws.dynamodb()
        table = _table(dynamodb, unique_name)
        for keys in (3, 2):
            wanted = [{"pk": {"S": f"k{i}"}} for i in range(keys)]
            dynamodb.batch_get_item(RequestItems={table: {"Keys": wanted, "ConsistentRead": True}})
        counts = aws.requests()
    assert counts["dynamodb:BatchGetItem"] == 2  # requests
    assert counts[f"dynamodb:BatchGetItem{lite_aws.KEYS_READ}"] == 5  # what AWS bills


def test_failed_conditional_checks_are_counted_beside_their_operation(unique_name: str) -> None:
    with LocalAws(lite=True) as aws:
        dynamodb = aws.dynamodb()
        table = _table(dynamodb, unique_name)
        new = "attribute_not_exists(pk)"
        dynamodb.put_item(TableName=table, Item={"pk": {"S": "a"}}, ConditionExpression=new)
        with pytest.raises(ClientError):
            dynamodb.put_item(TableName=table, Item={"pk": {"S": "a"}}, ConditionExpression=new)
        counts = aws.requests()
    assert counts["dynamodb:PutItem"] == 2  # every request, failed or not
    assert counts["dynamodb:PutItem:condition_failed"] == 1


def test_a_trace_header_sent_as_a_system_attribute_comes_back_on_receive(
    sqs: SQSClient, unique_name: str
) -> None:
    # Given a message sent with the AWSTraceHeader system attribute, as the producer sends it
    url = _queue(sqs, unique_name)
    header = "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1"
    # (one at a time: moto's SendMessageBatch drops an entry's system attributes, SQS's keeps
    # them; the stand-in keeps them either way)
    sqs.send_message(
        QueueUrl=url,
        MessageBody="traced",
        MessageSystemAttributes={"AWSTraceHeader": {"DataType": "String", "StringValue": header}},
    )
    sqs.send_message(QueueUrl=url, MessageBody="untraced")
    # Then a receive asking for every attribute returns it with that message only
    received = {m["Body"]: m.get("Attributes", {}) for m in _receive(sqs, url)}
    assert received["traced"]["AWSTraceHeader"] == header
    assert "AWSTraceHeader" not in received["untraced"]


def test_a_visibility_batch_changes_each_entry_and_reports_a_stale_one(
    sqs: SQSClient, unique_name: str
) -> None:
    # Given two received messages, one of them deleted since
    url = _queue(sqs, unique_name, VisibilityTimeout="60")
    sqs.send_message_batch(
        QueueUrl=url, Entries=[{"Id": str(i), "MessageBody": f"m{i}"} for i in range(2)]
    )
    first = _receive(sqs, url)
    assert len(first) == 2
    # When the batch makes the first visible at once and hides the second for 60 s more
    answer = sqs.change_message_visibility_batch(
        QueueUrl=url,
        Entries=[
            {"Id": "a", "ReceiptHandle": first[0]["ReceiptHandle"], "VisibilityTimeout": 0},
            {"Id": "b", "ReceiptHandle": first[1]["ReceiptHandle"], "VisibilityTimeout": 60},
        ],
    )
    # Then both succeed and only the first comes back
    assert sorted(e["Id"] for e in answer["Successful"]) == ["a", "b"]
    again = _receive(sqs, url, WaitTimeSeconds=1)
    assert [m["Body"] for m in again] == [first[0]["Body"]]


def test_get_and_delete_item_keep_dynamodb_semantics(
    dynamodb: DynamoDBClient, unique_name: str
) -> None:
    # Given an item
    table = _table(dynamodb, unique_name)
    key = {"pk": {"S": "a"}}
    dynamodb.put_item(TableName=table, Item={**key, "status": {"S": "INPROGRESS"}})
    # Then a consistent read returns it, and a read of another key returns no Item
    assert dynamodb.get_item(TableName=table, Key=key, ConsistentRead=True)["Item"] == {
        **key,
        "status": {"S": "INPROGRESS"},
    }
    assert "Item" not in dynamodb.get_item(TableName=table, Key={"pk": {"S": "b"}})
    # and a delete whose condition fails leaves it, returning nothing but the error
    with pytest.raises(ClientError) as refused:
        dynamodb.delete_item(
            TableName=table,
            Key=key,
            ConditionExpression="#s = :done",
            ExpressionAttributeNames={"#s": "status"},
            ExpressionAttributeValues={":done": {"S": "COMPLETED"}},
        )
    assert _code(refused) == "ConditionalCheckFailedException"
    # while a plain delete removes it (and deleting what is gone is no error)
    dynamodb.delete_item(TableName=table, Key=key)
    dynamodb.delete_item(TableName=table, Key=key)
    assert "Item" not in dynamodb.get_item(TableName=table, Key=key, ConsistentRead=True)


def test_a_batch_get_reads_each_key_consistently_and_leaves_out_those_without_an_item(
    dynamodb: DynamoDBClient, unique_name: str
) -> None:
    # Given two limiter items of three scopes (the third never used)
    table = _table(dynamodb, unique_name)
    for name, closed in (("a", 10), ("b", 500)):
        dynamodb.put_item(
            TableName=table,
            Item={
                "pk": {"S": f"scope#{name}"},
                "closed_until": {"N": str(closed)},
                "x": {"N": "1"},
            },
        )
    keys = [{"pk": {"S": f"scope#{name}"}} for name in ("a", "b", "c")]
    # When the three are read in one request, with and without a projection
    whole = dynamodb.batch_get_item(RequestItems={table: {"Keys": keys, "ConsistentRead": True}})
    projected = dynamodb.batch_get_item(
        RequestItems={
            table: {
                "Keys": keys,
                "ConsistentRead": True,
                "ProjectionExpression": "#pk, #until",
                "ExpressionAttributeNames": {"#pk": "pk", "#until": "closed_until"},
            }
        }
    )

    # Then each item there is returned once (in no particular order), the unused scope not at
    # all, and no key is left unprocessed
    def by_key(answer: Any) -> dict[str, Any]:
        assert not answer.get("UnprocessedKeys")
        return {item["pk"]["S"]: item for item in answer["Responses"][table]}

    assert by_key(whole) == {
        "scope#a": {"pk": {"S": "scope#a"}, "closed_until": {"N": "10"}, "x": {"N": "1"}},
        "scope#b": {"pk": {"S": "scope#b"}, "closed_until": {"N": "500"}, "x": {"N": "1"}},
    }
    assert by_key(projected) == {
        "scope#a": {"pk": {"S": "scope#a"}, "closed_until": {"N": "10"}},
        "scope#b": {"pk": {"S": "scope#b"}, "closed_until": {"N": "500"}},
    }


def test_a_batch_get_refuses_a_key_twice_and_more_than_a_hundred_keys(
    dynamodb: DynamoDBClient, unique_name: str
) -> None:
    table = _table(dynamodb, unique_name)
    twice = [{"pk": {"S": "scope#a"}}] * 2
    with pytest.raises(ClientError) as duplicates:
        dynamodb.batch_get_item(RequestItems={table: {"Keys": twice}})
    assert _code(duplicates) == "ValidationException"
    many = [{"pk": {"S": f"scope#{i}"}} for i in range(lite_aws.DYNAMODB_MAX_BATCH_GET + 1)]
    with pytest.raises(ClientError) as too_many:
        dynamodb.batch_get_item(RequestItems={table: {"Keys": many}})
    assert _code(too_many) == "ValidationException"


def test_tables_are_listed_and_take_a_time_to_live(
    dynamodb: DynamoDBClient, unique_name: str
) -> None:
    # Given a table, as the local stack provisions it
    table = _table(dynamodb, unique_name)
    # Then it is listed, and its TTL is set on the attribute named
    assert table in dynamodb.list_tables()["TableNames"]
    answer = dynamodb.update_time_to_live(
        TableName=table, TimeToLiveSpecification={"Enabled": True, "AttributeName": "expires_at"}
    )
    assert answer["TimeToLiveSpecification"] == {"Enabled": True, "AttributeName": "expires_at"}
    described = dynamodb.describe_time_to_live(TableName=table)["TimeToLiveDescription"]
    assert (described["TimeToLiveStatus"], described["AttributeName"]) == (
        "ENABLED",
        "expires_at",
    )


# --- every operation sweeper calls ---------------------------------------------------------

#: Where sweeper's own SQS and DynamoDB calls are made: the product, its functions, the local
#: stack and the CLI.
CALLERS = ("layers/sweeper/python/sweeper", "functions", "local/sweeper_local", "cli/sweeper_cli")
#: Powertools' idempotency persistence layer (DynamoDBPersistenceLayer) calls these itself.
POWERTOOLS_OPERATIONS = {"dynamodb:PutItem", "dynamodb:GetItem", "dynamodb:UpdateItem"}
POWERTOOLS_OPERATIONS |= {"dynamodb:DeleteItem"}


def operations_sweeper_calls() -> set[str]:
    """`service:Operation` for every SQS and DynamoDB client method named in sweeper's source."""
    root = Path(__file__).resolve().parents[2]
    methods: dict[str, str] = {}
    for service in ("sqs", "dynamodb"):
        client = _client(service, "http://127.0.0.1:9")
        for method, operation in client.meta.method_to_api_mapping.items():
            methods[method] = f"{service}:{operation}"
    called = set(POWERTOOLS_OPERATIONS)
    for folder in CALLERS:
        for source in (root / folder).rglob("*.py"):
            for node in ast.walk(ast.parse(source.read_text(encoding="utf-8"))):
                func = node.func if isinstance(node, ast.Call) else None
                if isinstance(func, ast.Attribute) and func.attr in methods:
                    called.add(methods[func.attr])
    return called


def test_every_operation_sweeper_calls_is_checked_against_moto_by_this_module(
    lite_server: LiteAwsServer,
) -> None:
    # Given every SQS and DynamoDB operation sweeper's code (and Powertools') calls
    called = operations_sweeper_calls()
    assert {"sqs:ReceiveMessage", "dynamodb:UpdateItem"} <= called  # the scan finds them
    # Then each was made by the tests above against the stand-in, as against moto (this test
    # runs last in the module: the requests it reads are theirs)
    with lite_server.requests_lock:
        served = {name for name in lite_server.requests if not name.endswith(FAILED_CONDITION)}
    assert sorted(called - served) == []

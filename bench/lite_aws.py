"""The SQS/DynamoDB stand-in's CPU per request under a fixed synthetic load.

The stand-in (sweeper_local.lite_aws) runs as its own process, as in the local stack; `threads`
boto3 clients send it the calls a consumer batch makes, in the same proportions each round: a
limiter write (a conditional UpdateItem), an idempotency record put and completed (a
conditional PutItem, an UpdateItem), a read (GetItem with a projection), and a message sent,
received and deleted. The figure is the server process's CPU time (user + system, from
/proc, so Linux only) over the requests it served: its cost per request, whatever the client
spends.

`python -m sweeper_bench.lite_aws [--server MODULE] [--rounds N] [--json]` prints the figures;
`--server` names another copy of the stand-in's module (e.g. an older one on PYTHONPATH), so
that two versions are compared in one run on the same machine.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import boto3
from botocore.config import Config

from sweeper_local.postgres import free_port

#: Requests per round of one thread (see `_round`).
REQUESTS_PER_ROUND = 8
START_TIMEOUT_SECONDS = 10.0


def _cpu_seconds(pid: int) -> float:
    """The process's user + system CPU time (/proc/PID/stat, fields 14 and 15)."""
    with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _wait_for(port: int) -> None:
    deadline = time.monotonic() + START_TIMEOUT_SECONDS
    while True:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def _client(service: str, url: str) -> Any:
    return boto3.client(  # type: ignore[call-overload]
        service,
        endpoint_url=url,
        region_name="us-east-1",
        aws_access_key_id="bench",
        aws_secret_access_key="bench",  # noqa: S106 (the stand-in checks no credentials)
        config=Config(retries={"max_attempts": 1}, max_pool_connections=4),
    )


def _round(dynamodb: Any, sqs: Any, table: str, queue_url: str, n: int) -> None:
    """One consumer-like round: REQUESTS_PER_ROUND requests."""
    scope = {"pk": {"S": f"scope#{n % 4}"}}
    dynamodb.update_item(
        TableName=table,
        Key=scope,
        UpdateExpression="SET #tat = if_not_exists(#tat, :zero) + :step",
        ConditionExpression="attribute_not_exists(#tat) OR #tat < :limit",
        ExpressionAttributeNames={"#tat": "tat"},
        ExpressionAttributeValues={
            ":zero": {"N": "0"},
            ":step": {"N": "0.01"},
            ":limit": {"N": "1000000000"},
        },
    )
    record = {"pk": {"S": f"idem#{uuid.uuid4().hex}"}}
    dynamodb.put_item(
        TableName=table,
        Item={**record, "status": {"S": "INPROGRESS"}, "expiration": {"N": str(n)}},
        ConditionExpression="attribute_not_exists(#id) OR #expiry < :now",
        ExpressionAttributeNames={"#id": "pk", "#expiry": "expiration"},
        ExpressionAttributeValues={":now": {"N": "0"}},
    )
    dynamodb.update_item(
        TableName=table,
        Key=record,
        UpdateExpression="SET #status = :status, #data = :data",
        ExpressionAttributeNames={"#status": "status", "#data": "data"},
        ExpressionAttributeValues={":status": {"S": "COMPLETED"}, ":data": {"S": "{}"}},
    )
    dynamodb.get_item(
        TableName=table,
        Key=record,
        ProjectionExpression="#status",
        ExpressionAttributeNames={"#status": "status"},
    )
    sqs.send_message(QueueUrl=queue_url, MessageBody=json.dumps({"n": n}))
    received = sqs.receive_message(QueueUrl=queue_url, MaxNumberOfMessages=1).get("Messages", [])
    for message in received:
        sqs.delete_message(QueueUrl=queue_url, ReceiptHandle=message["ReceiptHandle"])
    sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["ApproximateNumberOfMessages"])


def run_lite_aws_bench(
    server: str = "sweeper_local.lite_aws", rounds: int = 300, threads: int = 4
) -> dict[str, Any]:
    """Serve `rounds` rounds from each of `threads` clients; the server's CPU per request."""
    port = free_port()
    process = subprocess.Popen([sys.executable, "-m", server, "-p", str(port)])  # noqa: S603
    try:
        _wait_for(port)
        url = f"http://127.0.0.1:{port}"
        dynamodb, sqs = _client("dynamodb", url), _client("sqs", url)
        table = "bench"
        dynamodb.create_table(
            TableName=table,
            KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
            AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
            BillingMode="PAY_PER_REQUEST",
        )
        queue_url = sqs.create_queue(QueueName="bench")["QueueUrl"]
        _round(dynamodb, sqs, table, queue_url, 0)  # warm: connections, first compiles
        cpu_before, started = _cpu_seconds(process.pid), time.monotonic()

        def work(thread: int) -> None:
            for n in range(rounds):
                _round(dynamodb, sqs, table, queue_url, thread * rounds + n)

        with ThreadPoolExecutor(threads) as pool:
            list(pool.map(work, range(threads)))
        cpu = _cpu_seconds(process.pid) - cpu_before
        elapsed = time.monotonic() - started
    finally:
        process.terminate()
        process.wait(timeout=10)
    requests = rounds * threads * REQUESTS_PER_ROUND
    return {
        "server": server,
        "requests": requests,
        "server_cpu_seconds": round(cpu, 3),
        "server_cpu_us_per_request": round(cpu / requests * 1e6, 1),
        "requests_per_second": round(requests / elapsed, 1),
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m sweeper_bench.lite_aws")
    parser.add_argument("--server", default="sweeper_local.lite_aws")
    parser.add_argument("--rounds", type=int, default=300)
    parser.add_argument("--threads", type=int, default=4)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    figures = run_lite_aws_bench(args.server, args.rounds, args.threads)
    if args.json:
        print(json.dumps(figures))
    else:
        for key, value in figures.items():
            print(f"{key}: {value}")


if __name__ == "__main__":
    main()

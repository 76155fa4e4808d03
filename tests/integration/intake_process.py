"""An intake invocation killed between its ledger commit and the queue's acknowledgement.

`python -m tests.integration.intake_process QUEUE_URL` receives one batch from the intake queue
(as Lambda's event source does), invokes the real handler (functions/intake/app.py) with the
environment it inherits, prints its response as one JSON line, then dies by SIGKILL before it
deletes anything: what a crash after the commit leaves behind.
"""

from __future__ import annotations

import json
import os
import signal
import sys

import boto3

from sweeper_local.lambda_runtime import LocalLambdaContext, load_handler
from sweeper_local.poller import to_event_record

#: The message comes back this soon after the crash.
VISIBILITY_SECONDS = 2


def main(queue_url: str) -> None:
    handler = load_handler("intake")
    sqs = boto3.client("sqs")
    arn = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"
    ]
    messages = sqs.receive_message(
        QueueUrl=queue_url,
        MaxNumberOfMessages=10,
        WaitTimeSeconds=5,
        VisibilityTimeout=VISIBILITY_SECONDS,
        AttributeNames=["All"],
    ).get("Messages", [])
    event = {"Records": [to_event_record(m, arn, os.environ["AWS_REGION"]) for m in messages]}
    response = handler(event, LocalLambdaContext("sweeper-intake", timeout_seconds=30))
    print(json.dumps({"received": len(messages), "response": response}), flush=True)
    os.kill(os.getpid(), signal.SIGKILL)


if __name__ == "__main__":
    main(sys.argv[1])

"""A local stand-in for Lambda's SQS event source mapping.

It honours what the real one does and what sweeper relies on: batches of at most `batch_size`,
at most `max_concurrency` invocations at once (each in its own worker process, like separate
execution environments), the queue's visibility timeout, and partial batch responses: only the
records not named in `batchItemFailures` are deleted; a function error returns the whole batch.
Hand-written because no library emulates an event source mapping against a real SQS endpoint.
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, wait
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sweeper.local.lambda_runtime import Invocation, invoke, new_environment, warm

if TYPE_CHECKING:
    from mypy_boto3_sqs import SQSClient
    from mypy_boto3_sqs.type_defs import MessageTypeDef

#: How long one ReceiveMessage waits for messages (long polling) before the loop looks around.
RECEIVE_WAIT_SECONDS = 1


@dataclass(frozen=True, slots=True)
class EventSourceConfig:
    queue_url: str
    queue_arn: str
    function: str = "consumer"
    function_name: str = "sweeper-consumer"
    batch_size: int = 10
    max_concurrency: int = 2
    timeout_seconds: float = 60.0
    region: str = "us-east-1"


@dataclass
class PollerStats:
    invocations: int = 0
    function_errors: int = 0
    records_delivered: int = 0
    records_deleted: int = 0
    records_failed: int = 0
    max_in_flight: int = 0

    def add(self, invocation: Invocation, delivered: int, failed: int) -> None:
        self.invocations += 1
        self.records_delivered += delivered
        if invocation.error is not None:
            self.function_errors += 1
            self.records_failed += delivered
        else:
            self.records_failed += failed
            self.records_deleted += delivered - failed


def to_event_record(message: MessageTypeDef, queue_arn: str, region: str) -> dict[str, Any]:
    """One SQS message as Lambda's event source presents it."""
    body = message.get("Body", "")
    return {
        "messageId": message["MessageId"],
        "receiptHandle": message["ReceiptHandle"],
        "body": body,
        "attributes": dict(message.get("Attributes", {})),
        "messageAttributes": {
            name: {
                "stringValue": value.get("StringValue"),
                "binaryValue": value.get("BinaryValue"),
                "stringListValues": [],
                "binaryListValues": [],
                "dataType": value["DataType"],
            }
            for name, value in message.get("MessageAttributes", {}).items()
        },
        "md5OfBody": message.get("MD5OfBody") or hashlib.md5(body.encode()).hexdigest(),  # noqa: S324
        "eventSource": "aws:sqs",
        "eventSourceARN": queue_arn,
        "awsRegion": region,
    }


class LocalEventSource:
    """Poll a queue and invoke the consumer handler in worker processes until stopped."""

    def __init__(
        self,
        sqs: SQSClient,
        config: EventSourceConfig,
        env: dict[str, str],
        *,
        log_file: str | None = None,
    ) -> None:
        self._sqs = sqs
        self._config = config
        self._env = env
        self._log_file = log_file
        self._stop = threading.Event()
        self._paused = threading.Event()
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None
        self.stats = PollerStats()
        self.warmed = threading.Event()  # every execution environment has cold-started

    def start(self) -> LocalEventSource:
        self._thread = threading.Thread(target=self._run, name="local-event-source", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=self._config.timeout_seconds + 10)
            self._thread = None
        if self._error is not None:
            raise self._error

    def pause(self) -> None:
        """Stop receiving (the event source mapping disabled); in-flight batches finish."""
        self._paused.set()

    def resume(self) -> None:
        self._paused.clear()

    def _run(self) -> None:
        try:
            self._loop()
        except BaseException as exc:  # surfaced by stop()
            self._error = exc

    def _loop(self) -> None:
        cfg = self._config
        in_flight: dict[Future[Invocation], list[dict[str, Any]]] = {}
        with new_environment(self._env, self._log_file, cfg.max_concurrency) as pool:
            for cold in [pool.submit(warm, cfg.function) for _ in range(cfg.max_concurrency)]:
                cold.result()
            self.warmed.set()
            while not self._stop.is_set() or in_flight:
                while (
                    not self._stop.is_set()
                    and not self._paused.is_set()
                    and len(in_flight) < cfg.max_concurrency
                ):
                    records = self._receive(wait_seconds=0 if in_flight else RECEIVE_WAIT_SECONDS)
                    if not records:
                        break
                    future = pool.submit(
                        invoke,
                        cfg.function,
                        {"Records": records},
                        function_name=cfg.function_name,
                        timeout_seconds=cfg.timeout_seconds,
                    )
                    in_flight[future] = records
                    self.stats.max_in_flight = max(self.stats.max_in_flight, len(in_flight))
                if not in_flight:
                    if self._paused.is_set():
                        self._stop.wait(0.1)
                    continue
                done, _ = wait(in_flight, timeout=0.2, return_when=FIRST_COMPLETED)
                for future in done:
                    self._complete(future.result(), in_flight.pop(future))

    def _receive(self, wait_seconds: int) -> list[dict[str, Any]]:
        cfg = self._config
        response = self._sqs.receive_message(
            QueueUrl=cfg.queue_url,
            MaxNumberOfMessages=cfg.batch_size,
            WaitTimeSeconds=wait_seconds,
            MessageSystemAttributeNames=["All"],
            MessageAttributeNames=["All"],
        )
        return [to_event_record(m, cfg.queue_arn, cfg.region) for m in response.get("Messages", [])]

    def _complete(self, invocation: Invocation, records: list[dict[str, Any]]) -> None:
        if invocation.error is not None:
            # A function error: the whole batch becomes visible again after the timeout.
            self.stats.add(invocation, len(records), len(records))
            return
        response = invocation.response or {}
        failed_ids = {item["itemIdentifier"] for item in response.get("batchItemFailures", [])}
        done = [r for r in records if r["messageId"] not in failed_ids]
        for start in range(0, len(done), 10):
            chunk = done[start : start + 10]
            self._sqs.delete_message_batch(
                QueueUrl=self._config.queue_url,
                Entries=[
                    {"Id": str(i), "ReceiptHandle": r["receiptHandle"]} for i, r in enumerate(chunk)
                ],
            )
        self.stats.add(invocation, len(records), len(records) - len(done))


def run_until(
    condition: Callable[[], bool], *, timeout_seconds: float, interval_seconds: float = 0.2
) -> bool:
    """Poll `condition` until it holds or the deadline passes (never a bare sleep in tests)."""
    deadline = time.monotonic() + timeout_seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(interval_seconds)
    return condition()

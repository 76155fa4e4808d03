"""A local stand-in for Lambda's SQS event source mapping.

It keeps the rules the real one keeps, because sweeper relies on each of them:

- a mapping Lambda would refuse (see `sweeper_tools.event_source`) is refused at start, checked
  against the queue's real visibility timeout;
- batches of at most `batch_size`, gathered for up to the batching window;
- at most `max_concurrency` invocations at once, each in its own execution environment (a
  process: `ExecutionEnvironment`);
- an invocation past the function's timeout is killed with its environment, and an environment
  that dies (SIGKILL, OOM) is replaced with a cold start; either way the whole batch is left to
  come back after the visibility timeout, including records the handler had already settled;
- partial batch responses as Lambda reads them: a function error, or a response naming an
  identifier that is empty, null, not a string or not in the batch, fails the whole batch;
  otherwise every record not named in `batchItemFailures` is deleted;
- a failing SQS call (the emulator restarting) is logged and retried with backoff; the
  event source keeps running, as Lambda's pollers do.

Hand-written because no library emulates an event source mapping against a real SQS endpoint.
"""

from __future__ import annotations

import hashlib
import logging
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from botocore.exceptions import BotoCoreError, ClientError

from sweeper_local.cpu_cap import CpuCaps
from sweeper_local.errors import LocalStackError
from sweeper_local.lambda_runtime import ExecutionEnvironment, Invocation, InvocationStatus
from sweeper_tools.event_source import check_sqs_event_source

if TYPE_CHECKING:
    from mypy_boto3_sqs import SQSClient
    from mypy_boto3_sqs.type_defs import MessageTypeDef

log = logging.getLogger(__name__)

#: How long one ReceiveMessage waits for messages (long polling) before the loop looks around.
RECEIVE_WAIT_SECONDS = 1
#: SQS returns at most this many messages per ReceiveMessage and deletes as many per call.
SQS_MAX_MESSAGES_PER_CALL = 10
#: Backoff after a failed SQS call: doubles from the first value up to the second.
ERROR_BACKOFF_SECONDS = (0.5, 5.0)
#: How long stop() waits for in-flight invocations beyond the function's timeout.
STOP_MARGIN_SECONDS = 10.0

#: Errors of an SQS call that a running event source outlives (the emulator restarting).
TRANSIENT_AWS_ERRORS = (BotoCoreError, ClientError, OSError)


@dataclass(frozen=True, slots=True)
class EventSourceConfig:
    queue_url: str
    queue_arn: str
    function: str = "consumer"
    function_name: str = "sweeper-consumer"
    batch_size: int = 10
    batch_window_seconds: int = 0
    max_concurrency: int = 2
    timeout_seconds: int = 60
    region: str = "us-east-1"
    #: The function's memory: with it, each environment is held to the CPU share Lambda gives
    #: that memory (sweeper_local.cpu_cap, where the machine allows it). None: uncapped.
    memory_mb: int | None = None


@dataclass
class PollerStats:
    invocations: int = 0
    function_errors: int = 0
    timeouts: int = 0
    environments_lost: int = 0  # killed at the timeout or died; each replaced by a cold start
    invalid_responses: int = 0  # a partial batch response Lambda reads as a failed batch
    records_delivered: int = 0
    records_deleted: int = 0
    records_failed: int = 0
    largest_batch: int = 0
    max_in_flight: int = 0
    sqs_errors: int = 0
    #: Both summed over ended invocations: a span that ends amid a batch leaves that batch out
    #: (`LocalEventSource.busy_seconds_now` counts it; the rate bench takes the CPU from the
    #: environments' processes, sweeper_bench.process_cpu).
    busy_seconds: float = 0.0  # summed invocation durations: what Lambda bills as duration
    cpu_seconds: float = 0.0  # summed CPU time of the invocations' environments
    max_rss_mb: float = 0.0  # the largest peak resident memory an environment reported

    def add(self, invocation: Invocation, delivered: int, failed: int) -> None:
        self.invocations += 1
        self.busy_seconds += invocation.duration_seconds
        self.cpu_seconds += invocation.cpu_seconds
        self.max_rss_mb = max(self.max_rss_mb, invocation.max_rss_mb)
        self.records_delivered += delivered
        self.records_failed += failed
        self.records_deleted += delivered - failed
        self.largest_batch = max(self.largest_batch, delivered)
        if invocation.status is InvocationStatus.FUNCTION_ERROR:
            self.function_errors += 1
        elif invocation.status is InvocationStatus.TIMED_OUT:
            self.timeouts += 1
        if invocation.status in (InvocationStatus.TIMED_OUT, InvocationStatus.ENVIRONMENT_DIED):
            self.environments_lost += 1


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


def records_to_delete(response: Any, records: list[dict[str, Any]]) -> list[dict[str, Any]] | None:
    """The records a successful invocation's response lets Lambda delete; None when Lambda
    reads the response as a failure of the whole batch (nothing is deleted).

    As Lambda reads a partial batch response (ReportBatchItemFailures): no response, no
    `batchItemFailures`, or an empty list, is a complete success; an entry whose `itemIdentifier`
    is missing, empty, null, not a string or not a message of this batch, or a response of
    another shape, is a complete failure.
    """
    if response is None:
        return records
    if not isinstance(response, dict):
        return None
    failures = response.get("batchItemFailures")
    if failures is None:
        return records
    if not isinstance(failures, list):
        return None
    in_batch = {r["messageId"] for r in records}
    named: set[str] = set()
    for item in failures:
        identifier = item.get("itemIdentifier") if isinstance(item, dict) else None
        if not isinstance(identifier, str) or identifier not in in_batch:
            return None
        named.add(identifier)
    return [r for r in records if r["messageId"] not in named]


@dataclass(frozen=True, slots=True)
class _Done:
    environment: ExecutionEnvironment
    records: list[dict[str, Any]]
    invocation: Invocation


class LocalEventSource:
    """Poll a queue and invoke a function in execution environments until stopped."""

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
        #: Guards `_receiving` and the pause, so that a receive starts only while not paused.
        self._receive_state = threading.Condition()
        self._receiving = False
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None
        self._done: queue.Queue[_Done] = queue.Queue()
        self._backoff = ERROR_BACKOFF_SECONDS[0]
        self.environments: list[ExecutionEnvironment] = []
        self.stats = PollerStats()
        self.warmed = threading.Event()  # every execution environment has cold-started
        #: Invocations running now (read by drills: a paused source is quiet once this is 0).
        self.in_flight = 0
        #: When each running invocation started (monotonic), by its environment; guarded by
        #: `_busy_lock` with `stats.busy_seconds`, which takes it over when it is counted.
        self._running_since: dict[int, float] = {}
        self._busy_lock = threading.Lock()

    def check(self) -> None:
        """Refuse the mapping as CreateEventSourceMapping would (ConfigError)."""
        cfg = self._config
        attributes = self._sqs.get_queue_attributes(
            QueueUrl=cfg.queue_url, AttributeNames=["VisibilityTimeout"]
        )["Attributes"]
        check_sqs_event_source(
            batch_size=cfg.batch_size,
            batch_window_seconds=cfg.batch_window_seconds,
            max_concurrency=cfg.max_concurrency,
            function_timeout_seconds=cfg.timeout_seconds,
            visibility_timeout_seconds=int(attributes["VisibilityTimeout"]),
        )

    def start(self) -> LocalEventSource:
        """Check the mapping and start polling (a second call, once started, does nothing)."""
        if self._thread is not None:
            return self
        self.check()
        self._thread = threading.Thread(target=self._run, name="local-event-source", daemon=True)
        self._thread.start()
        return self

    @property
    def error(self) -> BaseException | None:
        """What stopped the event source, if something did (a bug: transient errors don't)."""
        return self._error

    def wait_until_warm(self, timeout_seconds: float) -> None:
        """Return once every environment has cold-started; raise what stopped it otherwise."""
        deadline = time.monotonic() + timeout_seconds
        while not self.warmed.wait(0.1):
            if self._error is not None:
                raise self._error
            if time.monotonic() > deadline:
                raise LocalStackError(f"the {self._config.function} function did not start")

    def stop_soon(self) -> None:
        """Ask the event source to stop without waiting for it: a stack stopping several lets
        their long polls and environments wind down at once; stop() then waits for each."""
        self._stop.set()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=self._config.timeout_seconds + STOP_MARGIN_SECONDS)
            self._thread = None
        if self._error is not None:
            raise self._error

    def pause(self) -> None:
        """Stop receiving (the event source mapping disabled); in-flight batches finish."""
        with self._receive_state:
            self._paused.set()

    def pause_receiving(self, timeout_seconds: float) -> bool:
        """Pause, and return once no receive is under way: nothing sent from now on is taken
        until resume(). False if a receive under way did not end in time."""
        self.pause()  # under the lock: no receive starts after it
        with self._receive_state:
            return self._receive_state.wait_for(lambda: not self._receiving, timeout_seconds)

    def resume(self) -> None:
        self._paused.clear()

    def _run(self) -> None:
        try:
            self._loop()
        except BaseException as exc:  # surfaced by stop()
            self._error = exc

    def _loop(self) -> None:
        cfg = self._config
        caps = CpuCaps() if cfg.memory_mb is not None else None
        self.environments = [
            ExecutionEnvironment(
                cfg.function, self._env, self._log_file, memory_mb=cfg.memory_mb, cpu_caps=caps
            )
            for _ in range(cfg.max_concurrency)
        ]
        idle = list(self.environments)
        try:
            for environment in idle:
                environment.start()  # every cold start at once
            for environment in idle:
                environment.initialise()
            self.warmed.set()
            while not self._stop.is_set() or self.in_flight:
                with self._receive_state:
                    blocked = self._stop.is_set() or self._paused.is_set() or not idle
                    self._receiving = not blocked
                for done in self._finished(wait=blocked):
                    self.in_flight -= 1
                    idle.append(done.environment)
                    self._complete(done.invocation, done.records, done.environment)
                if blocked:
                    continue
                try:
                    records = self._gather()
                finally:
                    with self._receive_state:
                        self._receiving = False
                        self._receive_state.notify_all()
                if not records:
                    continue
                environment = idle.pop()
                self.in_flight += 1
                self.stats.max_in_flight = max(self.stats.max_in_flight, self.in_flight)
                threading.Thread(
                    target=self._invoke,
                    args=(environment, records),
                    name="local-invocation",
                    daemon=True,
                ).start()
        finally:
            # Every environment ends at once: each close waits for its process to exit.
            closing = [
                threading.Thread(target=e.close, name="local-environment-close", daemon=True)
                for e in self.environments
            ]
            for thread in closing:
                thread.start()
            for thread in closing:
                thread.join()

    def _finished(self, *, wait: bool) -> list[_Done]:
        """The invocations that ended since the last look (waiting a little for one if asked)."""
        found: list[_Done] = []
        try:
            if wait:
                found.append(self._done.get(timeout=0.1))
            while True:
                found.append(self._done.get_nowait())
        except queue.Empty:
            return found

    def busy_seconds_now(self) -> float:
        """The invocations' summed durations so far, those still running counted up to now:
        `stats.busy_seconds` adds an invocation only when it ends, so a span that ends amid
        long batches would leave most of their time out."""
        with self._busy_lock:
            now = time.monotonic()
            running = sum(now - since for since in self._running_since.values())
            return self.stats.busy_seconds + running

    def _invoke(self, environment: ExecutionEnvironment, records: list[dict[str, Any]]) -> None:
        cfg = self._config
        with self._busy_lock:
            self._running_since[id(environment)] = time.monotonic()
        invocation = environment.invoke(
            {"Records": records},
            function_name=cfg.function_name,
            timeout_seconds=cfg.timeout_seconds,
        )
        self._done.put(_Done(environment, records, invocation))

    def _gather(self) -> list[dict[str, Any]]:
        """One batch: up to `batch_size` records, or what came within the batching window."""
        cfg = self._config
        records = self._receive(cfg.batch_size, RECEIVE_WAIT_SECONDS)
        if not records or cfg.batch_window_seconds <= 0:
            return records
        closes = time.monotonic() + cfg.batch_window_seconds
        while len(records) < cfg.batch_size and not self._stop.is_set():
            left = closes - time.monotonic()
            if left <= 0:
                break
            more = self._receive(
                cfg.batch_size - len(records), min(RECEIVE_WAIT_SECONDS, int(left))
            )
            if not more and left < RECEIVE_WAIT_SECONDS:
                self._stop.wait(min(left, 0.1))
            records += more
        return records

    def _receive(self, wanted: int, wait_seconds: int) -> list[dict[str, Any]]:
        cfg = self._config
        try:
            response = self._sqs.receive_message(
                QueueUrl=cfg.queue_url,
                MaxNumberOfMessages=min(wanted, SQS_MAX_MESSAGES_PER_CALL),
                WaitTimeSeconds=wait_seconds,
                MessageSystemAttributeNames=["All"],
                MessageAttributeNames=["All"],
            )
        except TRANSIENT_AWS_ERRORS as exc:
            self._sqs_failed("ReceiveMessage", exc)
            return []
        self._backoff = ERROR_BACKOFF_SECONDS[0]
        return [to_event_record(m, cfg.queue_arn, cfg.region) for m in response.get("Messages", [])]

    def _sqs_failed(self, call: str, exc: BaseException) -> None:
        """Log a failed SQS call and back off; the loop goes on, as Lambda's pollers do."""
        self.stats.sqs_errors += 1
        log.warning(
            "local event source: %s on %s failed (%s); retrying in %.1f s",
            call,
            self._config.function_name,
            describe_aws_error(exc),
            self._backoff,
        )
        self._stop.wait(self._backoff)
        self._backoff = min(self._backoff * 2, ERROR_BACKOFF_SECONDS[1])

    def _complete(
        self,
        invocation: Invocation,
        records: list[dict[str, Any]],
        environment: ExecutionEnvironment,
    ) -> None:
        """Delete what the invocation settled; the rest comes back after the visibility timeout."""
        done: list[dict[str, Any]] = []
        if invocation.status is not InvocationStatus.SUCCEEDED:
            log.warning(
                "local event source: %s invocation %s (%s); its %d record(s) come back",
                self._config.function_name,
                invocation.status.value,
                invocation.error,
                len(records),
            )
        else:
            settled = records_to_delete(invocation.response, records)
            if settled is None:
                self.stats.invalid_responses += 1
                log.warning(
                    "local event source: %s returned a partial batch response naming a record "
                    "not in its batch (or none); the whole batch of %d comes back",
                    self._config.function_name,
                    len(records),
                )
            else:
                done = settled
        for start in range(0, len(done), SQS_MAX_MESSAGES_PER_CALL):
            chunk = done[start : start + SQS_MAX_MESSAGES_PER_CALL]
            try:
                self._sqs.delete_message_batch(
                    QueueUrl=self._config.queue_url,
                    Entries=[
                        {"Id": str(i), "ReceiptHandle": r["receiptHandle"]}
                        for i, r in enumerate(chunk)
                    ],
                )
            except TRANSIENT_AWS_ERRORS as exc:  # they come back; the consumer is idempotent
                self._sqs_failed("DeleteMessageBatch", exc)
        with self._busy_lock:  # its running time becomes its duration, at once
            self._running_since.pop(id(environment), None)
            self.stats.add(invocation, len(records), len(records) - len(done))


def describe_aws_error(exc: BaseException) -> str:
    """An AWS call's failure by its code or class, never a request or response body."""
    if isinstance(exc, ClientError):
        return str(exc.response.get("Error", {}).get("Code", "ClientError"))
    return type(exc).__name__


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

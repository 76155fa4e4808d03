"""Putting hints on a policy's intake queue (the webhook, `sweeper schedule --stack`)."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from botocore.exceptions import BotoCoreError, ClientError

from sweeper.errors import PublishError
from sweeper.intake.hints import SQS_MAX_MESSAGE_BYTES, HintSource, hint_messages
from sweeper.models import NewJob
from sweeper.sqs_queue import SQS_MAX_BATCH, OutgoingMessage, Publisher

if TYPE_CHECKING:
    from mypy_boto3_sqs import SQSClient

#: Entries SQS did not take are sent again this many times in all, then the send fails.
SEND_ATTEMPTS = 3
SEND_RETRY_DELAY_SECONDS = 0.1


@dataclass(frozen=True, slots=True)
class SendReport:
    request_id: str
    hints: int
    messages: int


def new_request_id() -> str:
    return uuid.uuid4().hex


def send_hints(
    publisher: Publisher,
    policy: str,
    source: HintSource,
    jobs: Sequence[NewJob],
    *,
    request_id: str | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> SendReport:
    """Send every hint, or raise PublishError (some may have been sent: hints are idempotent,
    so the caller sends them all again)."""
    rid = request_id or new_request_id()
    bodies = hint_messages(policy, source, rid, jobs)
    for batch in _batches(bodies):
        pending = batch
        for attempt in range(1, SEND_ATTEMPTS + 1):
            failed = set(publisher.send_batch(pending))
            pending = [m for m in pending if m.entry_id in failed]
            if not pending:
                break
            if attempt < SEND_ATTEMPTS:
                sleep(SEND_RETRY_DELAY_SECONDS * attempt)
        if pending:
            raise PublishError(
                f"the intake queue did not take {len(pending)} message(s) of request {rid}"
            )
    return SendReport(rid, len(jobs), len(bodies))


def _batches(bodies: Sequence[str]) -> list[list[OutgoingMessage]]:
    """At most ten entries and SQS_MAX_MESSAGE_BYTES a call."""
    batches: list[list[OutgoingMessage]] = []
    current: list[OutgoingMessage] = []
    size = 0
    for index, body in enumerate(bodies):
        length = len(body.encode())
        if current and (len(current) == SQS_MAX_BATCH or size + length > SQS_MAX_MESSAGE_BYTES):
            batches.append(current)
            current, size = [], 0
        current.append(OutgoingMessage(entry_id=str(index), body=body))
        size += length
    if current:
        batches.append(current)
    return batches


class QueueBacklog:
    """How many messages wait on the intake queue, read at most every `max_age_seconds`.

    A failed read answers None (unknown): shedding is for a known backlog, and a queue that
    cannot be read will refuse the send too, which answers 503.
    """

    def __init__(
        self,
        client: SQSClient,
        queue_url: str,
        *,
        max_age_seconds: float = 5.0,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._client = client
        self._queue_url = queue_url
        self._max_age = max_age_seconds
        self._monotonic = monotonic
        self._value: int | None = None
        self._read_at: float | None = None

    def __call__(self) -> int | None:
        now = self._monotonic()
        if self._read_at is None or now - self._read_at >= self._max_age:
            self._read_at = now
            try:
                attributes = self._client.get_queue_attributes(
                    QueueUrl=self._queue_url, AttributeNames=["ApproximateNumberOfMessages"]
                )["Attributes"]
                self._value = int(attributes["ApproximateNumberOfMessages"])
            except (ClientError, BotoCoreError, KeyError, ValueError):
                self._value = None
        return self._value

"""Publishing job messages to the work queue (SQS), a batch of ten per call."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from botocore.exceptions import BotoCoreError, ClientError

from sweeper.errors import PublishError
from sweeper.limits import SQS_MAX_VISIBILITY_TIMEOUT_SECONDS

if TYPE_CHECKING:
    from mypy_boto3_sqs import SQSClient
    from mypy_boto3_sqs.type_defs import (
        ChangeMessageVisibilityBatchRequestEntryTypeDef,
        SendMessageBatchRequestEntryTypeDef,
    )

#: SQS's limit of messages per receive or batch call.
SQS_MAX_BATCH = 10
#: The variable Lambda sets, per invocation, to the invocation's X-Ray trace header
#: (`Root=1-...;Parent=...;Sampled=1`) when tracing is active.
TRACE_HEADER_ENV = "_X_AMZN_TRACE_ID"


def lambda_trace_header() -> str | None:
    """This invocation's X-Ray trace header, or None outside Lambda or with tracing off.

    Read at each send, not cached: Lambda sets a new one for every invocation.
    """
    return os.environ.get(TRACE_HEADER_ENV) or None


def trace_id(header: str | None) -> str | None:
    """The trace id (`Root=...`) of an X-Ray trace header, the id X-Ray's console searches by."""
    for part in (header or "").split(";"):
        name, _, value = part.strip().partition("=")
        if name == "Root" and value:
            return value
    return None


@dataclass(frozen=True, slots=True)
class OutgoingMessage:
    entry_id: str  # unique within one call; the ledger row id
    body: str
    group_id: str | None = None  # the tenant: SQS fair queues keep one tenant from starving others


class Publisher(Protocol):
    def send_batch(self, messages: Sequence[OutgoingMessage]) -> list[str]:
        """Send up to ten messages; return the entry ids that were NOT accepted.

        Raises PublishError when the call as a whole failed (nothing is known to be sent).
        """
        ...


class SqsPublisher:
    """The production publisher.

    Each entry carries the sending invocation's trace header as SQS's `AWSTraceHeader` system
    attribute, so that X-Ray follows a job from the producer through the queue to the consumer.
    """

    def __init__(self, client: SQSClient, queue_url: str) -> None:
        self._client = client
        self._queue_url = queue_url

    def send_batch(self, messages: Sequence[OutgoingMessage]) -> list[str]:
        if not messages:
            return []
        if len(messages) > SQS_MAX_BATCH:
            raise ValueError(f"at most {SQS_MAX_BATCH} messages per batch, got {len(messages)}")
        entries: list[SendMessageBatchRequestEntryTypeDef] = []
        header = lambda_trace_header()
        for message in messages:
            entry: SendMessageBatchRequestEntryTypeDef = {
                "Id": message.entry_id,
                "MessageBody": message.body,
            }
            if message.group_id is not None:
                entry["MessageGroupId"] = message.group_id
            if header is not None:
                entry["MessageSystemAttributes"] = {
                    "AWSTraceHeader": {"DataType": "String", "StringValue": header}
                }
            entries.append(entry)
        try:
            response = self._client.send_message_batch(QueueUrl=self._queue_url, Entries=entries)
        except (ClientError, BotoCoreError) as exc:
            raise PublishError(f"SendMessageBatch failed: {_why(exc)}") from exc
        return [failed["Id"] for failed in response.get("Failed", [])]


@dataclass(frozen=True, slots=True)
class Hide:
    """One received message to be visible again in `seconds` (whole seconds, capped)."""

    message_id: str
    receipt_handle: str
    seconds: float


class Visibility(Protocol):
    def hide_for(self, receipt_handle: str, seconds: float) -> None:
        """Make a received message visible again in `seconds` (whole seconds, capped)."""
        ...

    def hide_each(self, hides: Sequence[Hide]) -> list[str]:
        """Change each message's visibility, ten per call; the message ids NOT changed.

        Never raises for a failed call: its messages are returned as not changed (they come
        back after the queue's own timeout, as before).
        """
        ...


#: AWS's error codes for a principal the queue's policy (or its own) does not allow.
_REFUSED_CODES = frozenset({"AccessDenied", "AccessDeniedException"})


def _why(exc: ClientError | BotoCoreError) -> str:
    """The failure's class and AWS error code, never its message (which may echo the request)."""
    code = exc.response.get("Error", {}).get("Code") if isinstance(exc, ClientError) else None
    if code in _REFUSED_CODES:
        # The work queue admits only the stack's producer, redrive and operator function roles.
        return f"{code}: this principal may not send to the queue (operators: use --stack)"
    return type(exc).__name__ if code is None else f"{type(exc).__name__} {code}"


def visibility_timeout(seconds: float) -> int:
    """A visibility timeout SQS takes: whole seconds, within its range."""
    return max(0, min(SQS_MAX_VISIBILITY_TIMEOUT_SECONDS, int(seconds)))


class SqsVisibility:
    """ChangeMessageVisibility on the work queue: how a consumer schedules a message's return."""

    def __init__(self, client: SQSClient, queue_url: str) -> None:
        self._client = client
        self._queue_url = queue_url

    def hide_for(self, receipt_handle: str, seconds: float) -> None:
        timeout = visibility_timeout(seconds)
        try:
            self._client.change_message_visibility(
                QueueUrl=self._queue_url, ReceiptHandle=receipt_handle, VisibilityTimeout=timeout
            )
        except (ClientError, BotoCoreError) as exc:
            # The record still fails, so SQS returns it after the queue's own timeout instead.
            raise PublishError(f"ChangeMessageVisibility failed: {type(exc).__name__}") from exc

    def hide_each(self, hides: Sequence[Hide]) -> list[str]:
        missed: list[str] = []
        for start in range(0, len(hides), SQS_MAX_BATCH):
            chunk = hides[start : start + SQS_MAX_BATCH]
            # Entry ids are positions: a message id is unique but not promised to fit an Id.
            entries: list[ChangeMessageVisibilityBatchRequestEntryTypeDef] = [
                {
                    "Id": str(i),
                    "ReceiptHandle": hide.receipt_handle,
                    "VisibilityTimeout": visibility_timeout(hide.seconds),
                }
                for i, hide in enumerate(chunk)
            ]
            try:
                response = self._client.change_message_visibility_batch(
                    QueueUrl=self._queue_url, Entries=entries
                )
            except (ClientError, BotoCoreError):
                missed.extend(hide.message_id for hide in chunk)
                continue
            failed = response.get("Failed", [])
            missed.extend(chunk[int(entry["Id"])].message_id for entry in failed)
        return missed

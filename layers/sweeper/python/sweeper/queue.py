"""Publishing job messages to the work queue (SQS), a batch of ten per call."""

from __future__ import annotations

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

#: SendMessageBatch takes at most ten entries.
SQS_MAX_BATCH = 10


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
    """The production publisher."""

    def __init__(self, client: SQSClient, queue_url: str) -> None:
        self._client = client
        self._queue_url = queue_url

    def send_batch(self, messages: Sequence[OutgoingMessage]) -> list[str]:
        if not messages:
            return []
        if len(messages) > SQS_MAX_BATCH:
            raise ValueError(f"at most {SQS_MAX_BATCH} messages per batch, got {len(messages)}")
        entries: list[SendMessageBatchRequestEntryTypeDef] = []
        for message in messages:
            entry: SendMessageBatchRequestEntryTypeDef = {
                "Id": message.entry_id,
                "MessageBody": message.body,
            }
            if message.group_id is not None:
                entry["MessageGroupId"] = message.group_id
            entries.append(entry)
        try:
            response = self._client.send_message_batch(QueueUrl=self._queue_url, Entries=entries)
        except (ClientError, BotoCoreError) as exc:
            raise PublishError(f"SendMessageBatch failed: {type(exc).__name__}") from exc
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


def _seconds(seconds: float) -> int:
    return max(0, min(SQS_MAX_VISIBILITY_TIMEOUT_SECONDS, int(seconds)))


class SqsVisibility:
    """ChangeMessageVisibility on the work queue: how a consumer schedules a message's return."""

    def __init__(self, client: SQSClient, queue_url: str) -> None:
        self._client = client
        self._queue_url = queue_url

    def hide_for(self, receipt_handle: str, seconds: float) -> None:
        timeout = _seconds(seconds)
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
                    "VisibilityTimeout": _seconds(hide.seconds),
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

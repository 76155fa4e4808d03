"""The dead-letter queue as redrive uses it: receive, move back to the work queue, drop, release."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from botocore.exceptions import BotoCoreError, ClientError

from sweeper.errors import QueueError
from sweeper.sqs_queue import SQS_MAX_BATCH, visibility_timeout

if TYPE_CHECKING:
    from mypy_boto3_sqs import SQSClient


@dataclass(frozen=True, slots=True)
class DeadLetter:
    message_id: str
    receipt_handle: str
    body: str


class DeadLetterQueue(Protocol):
    def receive(self, max_messages: int, visibility_seconds: int) -> list[DeadLetter]:
        """Up to `max_messages` visible messages, hidden for `visibility_seconds`."""
        ...

    def move(self, letter: DeadLetter, group_id: str | None) -> None:
        """Send the same body to the work queue, then delete it here (in that order)."""
        ...

    def delete(self, letter: DeadLetter) -> None: ...

    def release(self, letters: Sequence[DeadLetter]) -> None:
        """Make received messages visible again at once."""
        ...

    def depth(self) -> int:
        """Messages in the queue, visible or not."""
        ...


class SqsDeadLetterQueue:
    """The production dead-letter queue (and its work queue)."""

    def __init__(self, client: SQSClient, dlq_url: str, queue_url: str) -> None:
        self._client = client
        self._dlq_url = dlq_url
        self._queue_url = queue_url

    def receive(self, max_messages: int, visibility_seconds: int) -> list[DeadLetter]:
        try:
            response = self._client.receive_message(
                QueueUrl=self._dlq_url,
                MaxNumberOfMessages=max(1, min(SQS_MAX_BATCH, max_messages)),
                VisibilityTimeout=visibility_timeout(visibility_seconds),
                WaitTimeSeconds=0,
            )
        except (ClientError, BotoCoreError) as exc:
            raise QueueError(f"ReceiveMessage on the DLQ failed: {type(exc).__name__}") from exc
        return [
            DeadLetter(m["MessageId"], m["ReceiptHandle"], m.get("Body", ""))
            for m in response.get("Messages", [])
        ]

    def move(self, letter: DeadLetter, group_id: str | None) -> None:
        try:
            if group_id is None:
                self._client.send_message(QueueUrl=self._queue_url, MessageBody=letter.body)
            else:
                self._client.send_message(
                    QueueUrl=self._queue_url, MessageBody=letter.body, MessageGroupId=group_id
                )
        except (ClientError, BotoCoreError) as exc:
            raise QueueError(
                f"SendMessage to the work queue failed for {letter.message_id}: "
                f"{type(exc).__name__}"
            ) from exc
        self.delete(letter)

    def delete(self, letter: DeadLetter) -> None:
        try:
            self._client.delete_message(QueueUrl=self._dlq_url, ReceiptHandle=letter.receipt_handle)
        except (ClientError, BotoCoreError) as exc:
            raise QueueError(
                f"DeleteMessage on the DLQ failed for {letter.message_id}: {type(exc).__name__}"
            ) from exc

    def release(self, letters: Sequence[DeadLetter]) -> None:
        for start in range(0, len(letters), SQS_MAX_BATCH):
            chunk = letters[start : start + SQS_MAX_BATCH]
            try:
                self._client.change_message_visibility_batch(
                    QueueUrl=self._dlq_url,
                    Entries=[
                        {
                            "Id": str(i),
                            "ReceiptHandle": letter.receipt_handle,
                            "VisibilityTimeout": 0,
                        }
                        for i, letter in enumerate(chunk)
                    ],
                )
            except (ClientError, BotoCoreError) as exc:
                raise QueueError(
                    f"ChangeMessageVisibilityBatch on the DLQ failed: {type(exc).__name__}"
                ) from exc

    def depth(self) -> int:
        return queue_depth(self._client, self._dlq_url)[0]


def queue_depth(client: SQSClient, queue_url: str) -> tuple[int, int]:
    """(messages in the queue, of which in flight), from GetQueueAttributes (approximate)."""
    try:
        attributes = client.get_queue_attributes(
            QueueUrl=queue_url,
            AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
        )["Attributes"]
    except (ClientError, BotoCoreError) as exc:
        raise QueueError(f"GetQueueAttributes failed: {type(exc).__name__}") from exc
    visible = int(attributes.get("ApproximateNumberOfMessages", 0))
    in_flight = int(attributes.get("ApproximateNumberOfMessagesNotVisible", 0))
    return visible + in_flight, in_flight

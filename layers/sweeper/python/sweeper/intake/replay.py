"""Replay markers for the webhook, in DynamoDB: one item per accepted signature, expiring by TTL.

Why DynamoDB and not a ledger table (docs/decisions.md): the webhook then needs no path to the
database at all. It answers 202 once the hints are on the intake queue, so a slow or failing
ledger never turns vendors' webhooks into errors, and the marker's conditional write is one
request that TTL cleans up for free.

A marker is claimed before the hints are sent (state `pending`, with a short lease) and marked
`accepted` after. A second request with the same signature then:
- finds `accepted`: a replay, or a retry after a lost answer; nothing is written, 202 again;
- finds `pending` with its lease running: the first request is still sending (409);
- finds `pending` with its lease run out: the first request died mid-way; this one takes over.
If sending fails, the claim is released, so that the sender's retry is not taken for a replay.
"""

from __future__ import annotations

import enum
from typing import TYPE_CHECKING

from botocore.exceptions import BotoCoreError, ClientError

from sweeper.errors import ReplayStoreError

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

REPLAY_PARTITION_KEY = "pk"
REPLAY_TTL_ATTRIBUTE = "expires_at"
#: Longer than the webhook function's timeout: a claim outlives the request that made it.
PENDING_LEASE_SECONDS = 60
#: A marker is kept this long past the end of its timestamp's tolerance (TTL deletes it later).
EXPIRY_MARGIN_SECONDS = 60


class Claim(enum.StrEnum):
    CLAIMED = "claimed"
    DUPLICATE = "duplicate"  # accepted before: write nothing, answer as before
    IN_PROGRESS = "in_progress"  # another request holds the claim


class DynamoReplayMarkers:
    """Conditional writes on the replay table; keys are the policy and the verified signature."""

    def __init__(self, client: DynamoDBClient, table_name: str) -> None:
        self._client = client
        self._table = table_name

    @staticmethod
    def key(policy: str, timestamp: int, digest: str) -> str:
        return f"{policy}#{timestamp}#{digest}"

    def claim(self, key: str, *, now: float, expires_at: int) -> Claim:
        try:
            self._client.put_item(
                TableName=self._table,
                Item={
                    REPLAY_PARTITION_KEY: {"S": key},
                    "state": {"S": "pending"},
                    "lease_until": {"N": str(int(now) + PENDING_LEASE_SECONDS)},
                    REPLAY_TTL_ATTRIBUTE: {"N": str(expires_at)},
                },
                ConditionExpression=(
                    "attribute_not_exists(#pk) OR (#state = :pending AND lease_until < :now)"
                ),
                ExpressionAttributeNames={"#pk": REPLAY_PARTITION_KEY, "#state": "state"},
                ExpressionAttributeValues={
                    ":pending": {"S": "pending"},
                    ":now": {"N": str(int(now))},
                },
            )
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") != "ConditionalCheckFailedException":
                raise ReplayStoreError(f"PutItem failed: {_code(exc)}") from exc
            return self._existing(key)
        except BotoCoreError as exc:
            raise ReplayStoreError(f"PutItem failed: {type(exc).__name__}") from exc
        return Claim.CLAIMED

    def _existing(self, key: str) -> Claim:
        try:
            item = self._client.get_item(
                TableName=self._table,
                Key={REPLAY_PARTITION_KEY: {"S": key}},
                ConsistentRead=True,
            ).get("Item")
        except (ClientError, BotoCoreError) as exc:
            raise ReplayStoreError(f"GetItem failed: {_code(exc)}") from exc
        if item is not None and item.get("state", {}).get("S") == "accepted":
            return Claim.DUPLICATE
        return Claim.IN_PROGRESS

    def accept(self, key: str) -> None:
        """The hints are on the queue: any later request with this signature is a replay."""
        try:
            self._client.update_item(
                TableName=self._table,
                Key={REPLAY_PARTITION_KEY: {"S": key}},
                UpdateExpression="SET #state = :accepted REMOVE lease_until",
                ExpressionAttributeNames={"#state": "state"},
                ExpressionAttributeValues={":accepted": {"S": "accepted"}},
            )
        except (ClientError, BotoCoreError) as exc:
            raise ReplayStoreError(f"UpdateItem failed: {_code(exc)}") from exc

    def release(self, key: str) -> None:
        """Sending failed: forget the claim, so that the sender's retry is accepted."""
        try:
            self._client.delete_item(
                TableName=self._table,
                Key={REPLAY_PARTITION_KEY: {"S": key}},
                ConditionExpression="#state = :pending",
                ExpressionAttributeNames={"#state": "state"},
                ExpressionAttributeValues={":pending": {"S": "pending"}},
            )
        except (ClientError, BotoCoreError) as exc:
            raise ReplayStoreError(f"DeleteItem failed: {_code(exc)}") from exc


def _code(exc: BaseException) -> str:
    if isinstance(exc, ClientError):
        return str(exc.response.get("Error", {}).get("Code", "ClientError"))
    return type(exc).__name__

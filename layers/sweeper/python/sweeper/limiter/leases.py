"""Fleet-wide concurrency caps: at most N calls in flight per key, as leases in DynamoDB.

A cap of N on a key is N lease items (`lease#KEY#0` .. `lease#KEY#N-1`) in the limiter table.
A call holds one while it is at the vendor: `acquire` writes its holder id and an expiry into a
free item (one whose lease is absent or expired) with a conditional write, trying the items from
a random one on; `release` deletes it, on condition that it still holds it. The expiry is at
most the consumer's timeout after the acquisition, so a lease whose environment was killed mid
call frees itself when it expires, and never more than N leases are live at once, whoever holds
them. Cost: one write to acquire while any item is free (more only when several free items are
taken at once), one to release; a full key costs N failed writes to find out.

A limit with `max_in_flight` (sweeper.config.limit) is such a cap; the consumer's delivery takes
and returns its leases.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from sweeper.errors import LimiterError

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

US = 1_000_000


class LeaseCap:
    """At most `cap` live leases per key, shared by every consumer using the same table."""

    def __init__(
        self,
        client: DynamoDBClient,
        table: str,
        *,
        clock: Callable[[], float] = time.time,
        rng: random.Random | None = None,
    ) -> None:
        self._client = client
        self._table = table
        self._clock = clock
        self._rng = rng or random.Random()
        self.writes = 0

    @staticmethod
    def _key(key: str, index: int) -> dict[str, Any]:
        return {"pk": {"S": f"lease#{key}#{index}"}}

    def acquire(
        self, key: str, cap: int, holder: str, lease_seconds: float, tries: int | None = None
    ) -> int | None:
        """Take a free lease of `key` for `holder` until `lease_seconds` from now; its index,
        or None when all `cap` are live (or none of `tries` items, from a random one on, was
        free: a poll of a cap thought full costs that many writes, not `cap`)."""
        now = self._clock()
        start = self._rng.randrange(cap)
        for step in range(min(cap, tries or cap)):
            index = (start + step) % cap
            try:
                self.writes += 1
                # UpdateItem, which creates the item: the limiter's grant (GetItem, UpdateItem)
                # puts no whole item, and a lease is one more conditional write in place.
                self._client.update_item(
                    TableName=self._table,
                    Key=self._key(key, index),
                    UpdateExpression=(
                        "SET holder = :holder, lease_until = :until, expires_at = :ttl"
                    ),
                    ConditionExpression="attribute_not_exists(holder) OR lease_until <= :now",
                    ExpressionAttributeValues={
                        ":holder": {"S": holder},
                        ":until": {"N": str(int((now + lease_seconds) * US))},
                        # DynamoDB's TTL removes forgotten leases some time after they expired
                        ":ttl": {"N": str(int(now + lease_seconds) + 3600)},
                        ":now": {"N": str(int(now * US))},
                    },
                )
            except ClientError as exc:
                if exc.response.get("Error", {}).get("Code") == "ConditionalCheckFailedException":
                    continue  # live: try the next
                raise LimiterError(f"lease acquire failed for key {key!r}") from exc
            return index
        return None

    def release(self, key: str, index: int, holder: str) -> bool:
        """Give a lease back, if `holder` still holds it (an expired one may be another's now)."""
        try:
            self.writes += 1
            # The lease is emptied in place (UpdateItem), not deleted: the grant has no
            # DeleteItem, and TTL removes the item later.
            self._client.update_item(
                TableName=self._table,
                Key=self._key(key, index),
                UpdateExpression="REMOVE holder, lease_until",
                ConditionExpression="holder = :me",
                ExpressionAttributeValues={":me": {"S": holder}},
            )
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") == "ConditionalCheckFailedException":
                return False
            raise LimiterError(f"lease release failed for key {key!r}") from exc
        return True

    def live(self, key: str, cap: int) -> int:
        """How many of the key's leases are live now (strongly consistent reads; for tests and
        operators, not for the hot path)."""
        now = int(self._clock() * US)
        count = 0
        for index in range(cap):
            item = self._client.get_item(
                TableName=self._table, Key=self._key(key, index), ConsistentRead=True
            ).get("Item", {})
            if "lease_until" in item and int(item["lease_until"]["N"]) > now:
                count += 1
        return count

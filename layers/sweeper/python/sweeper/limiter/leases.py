"""Fleet-wide concurrency caps: at most N calls in flight per key, as leases in DynamoDB.

A cap of N on a key is one item (`lease#KEY`) in the limiter table holding N leases side by
side: lease i is the attributes `h<i>` (its holder) and `u<i>` (until when, in microseconds).
A call holds one while it is at the vendor. `free` reads the item (one GetItem, eventually
consistent: the write that follows is conditional) and names the leases absent or expired;
`acquire` reads it and takes as many of those as it is asked for in one conditional
UpdateItem (each lease taken still absent or expired); `release` empties one lease, on
condition that it still names its holder. The expiry is at most the consumer's timeout after
the acquisition, so a lease whose environment was killed mid call frees itself when it
expires, and never more than N leases are live at once, whoever holds them. Cost: a look at a
full cap is one read, not writes; one write takes one lease or several; one gives one back.
A write that fails (another consumer took a lease it saw free) answers with the item as it is
(ReturnValuesOnConditionCheckFailure), so the next try needs no read. The item grows with N,
about 35 bytes a lease with a short holder (the consumer's are 12 characters): up to about 25
leases a write costs one write unit; a larger cap's writes cost more (its leases are not split
over several items).

A limit with `max_in_flight` (sweeper.config.limit) is such a cap; the consumer's delivery takes
and returns its leases.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from sweeper.limiter.items import US, get_item, update_item
from sweeper.limiter.keys import LEASE_KEY_PREFIX

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

#: DynamoDB's TTL removes a cap's item this long after its last lease taken expired.
FORGOTTEN_LEASE_TTL_SECONDS = 3600


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
        self.reads = 0

    @staticmethod
    def _key(key: str) -> dict[str, Any]:
        return {"pk": {"S": LEASE_KEY_PREFIX + key}}

    def _read(self, key: str, *, consistent: bool = False) -> dict[str, Any]:
        self.reads += 1
        pk, failure = LEASE_KEY_PREFIX + key, f"lease read failed for key {key!r}"
        return get_item(self._client, self._table, pk, failure, consistent=consistent)

    @staticmethod
    def _free_in(item: dict[str, Any], cap: int, now_us: int) -> list[int]:
        """The indexes below `cap` whose lease the item shows absent or expired at `now_us`."""
        return [
            index
            for index in range(cap)
            if f"h{index}" not in item or int(item.get(f"u{index}", {"N": "0"})["N"]) <= now_us
        ]

    def acquire(
        self, key: str, cap: int, holder: str, lease_seconds: float, tries: int | None = None
    ) -> int | None:
        """Take a free lease of `key` for `holder` until `lease_seconds` from now; its index, or
        None when all `cap` are live (or `tries` writes were refused by other consumers)."""
        taken = self.acquire_some(key, cap, holder, lease_seconds, 1, tries=tries)
        return taken[0] if taken else None

    def acquire_some(
        self,
        key: str,
        cap: int,
        holder: str,
        lease_seconds: float,
        count: int,
        *,
        tries: int | None = None,
    ) -> list[int]:
        """Take up to `count` free leases of `key` for `holder` in one write: their indexes
        (none when the cap is full, which the read alone finds). A look at the item first; a
        write refused because another consumer took one of them meanwhile is tried again on
        the item it answers with, at most `tries` writes (default: `cap`)."""
        item = self._read(key)
        now = self._clock()
        now_us = int(now * US)
        values = {
            ":holder": {"S": holder},
            ":until": {"N": str(int((now + lease_seconds) * US))},
            # DynamoDB's TTL removes a forgotten cap some time after its last lease expired
            ":ttl": {"N": str(int(now + lease_seconds) + FORGOTTEN_LEASE_TTL_SECONDS)},
            ":now": {"N": str(now_us)},
        }
        for _ in range(tries or cap):
            free = self._free_in(item, cap, now_us)
            if not free:
                return []
            chosen = sorted(self._rng.sample(free, min(count, len(free))))
            sets = ", ".join(f"h{i} = :holder, u{i} = :until" for i in chosen)
            condition = " AND ".join(
                f"(attribute_not_exists(h{i}) OR u{i} <= :now)" for i in chosen
            )
            self.writes += 1
            # UpdateItem, which creates the item: the limiter's grant (GetItem, UpdateItem)
            # puts no whole item, and a lease is one more conditional write in place.
            written, item = update_item(
                self._client,
                f"lease acquire failed for key {key!r}",
                TableName=self._table,
                Key=self._key(key),
                UpdateExpression=f"SET {sets}, expires_at = :ttl",
                ConditionExpression=condition,
                ExpressionAttributeValues=values,
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
            if written:
                return chosen
            # taken meanwhile: the answer is the item as it is now
        return []

    def release(self, key: str, index: int, holder: str) -> bool:
        """Give a lease back, if `holder` still holds it (an expired one may be another's now)."""
        self.writes += 1
        # Emptied in place (UpdateItem): the grant has no DeleteItem, and TTL removes the
        # item once every lease in it is long expired.
        written, _ = update_item(
            self._client,
            f"lease release failed for key {key!r}",
            TableName=self._table,
            Key=self._key(key),
            UpdateExpression=f"REMOVE h{index}, u{index}",
            ConditionExpression=f"h{index} = :me",
            ExpressionAttributeValues={":me": {"S": holder}},
        )
        return written

    def live(self, key: str, cap: int) -> int:
        """How many of the key's leases are live now (one strongly consistent read; for tests
        and operators)."""
        item = self._read(key, consistent=True)
        return cap - len(self._free_in(item, cap, int(self._clock() * US)))

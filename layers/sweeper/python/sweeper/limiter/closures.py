"""The latest closure's end: one item in the limiter table (`closures#latest`), so that the
readers of the closed gates need not Scan a table that holds an item per limiter key.

The rule: every gate close raises the item to its closure's end before it closes the gate
(`Gates.close`), and nothing lowers it (a conditional write: set only when absent or lower). So
the item is at least the end of every closure written, and a reader asking which gates are
closed after an instant (`gates.closed_gates_after`: the watching redrive its last period's
start, the producer now) reads it first (one GetItem) and Scans only when it is later. A
paired call's narrow close (`close_narrow`) is always made beside `close` of the same key and
end, which raises the item.

One item for the whole table, not one per policy: a key may be shared by design (`{host}`, a
constant key) and closed by any of its policies' consumers, while every policy's readers must
see it; each consumer's role is granted this one key (sweeper.limiter.keys). A closure anywhere
makes every reader Scan until it ends: closures are rare (a 429, an auth failure), one extra
write each. The item errs only early (a raise whose gate close then failed costs a Scan that
finds nothing). Every consumer's role may write it, so a faulty `python` callable could lower
it: the readers would then miss a closure as they miss one not visible yet (the producer claims
rows the consumer sends back to wait; the redrive moves a letter that died at a reopening at its
next run). The gates themselves still hold.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from botocore.exceptions import BotoCoreError, ClientError

from sweeper.errors import LimiterError
from sweeper.limiter.items import ITEM_TTL_SECONDS, US, n, update_item
from sweeper.limiter.keys import CLOSURES_KEY

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

#: Raised only when absent or lower: the item never moves earlier. It expires (DynamoDB TTL) a
#: day after the latest closure's end, as a scope's item does.
RAISE = "SET until_us = :u, expires_at = :ttl"
RAISE_IF_LATER = "attribute_not_exists(until_us) OR until_us < :u"


def _key() -> dict[str, Any]:
    return {"pk": {"S": CLOSURES_KEY}}


class LatestClosure:
    """The marker as one process raises it; it remembers the latest end it wrote, so closing
    several keys until the same end (a 429's closures) writes the item once."""

    def __init__(self, client: DynamoDBClient, table: str) -> None:
        self._client = client
        self._table = table
        self._raised_us = 0

    def raise_to(self, until: float, failure: str) -> bool:
        """The marker at least `until` (epoch seconds): one conditional write (True), none when
        this process raised it that far already (it is never lowered, and expires a day later).
        An error is raised as `failure` (the gate close it is part of)."""
        until_us = int(until * US)
        if until_us <= self._raised_us:
            return False
        update_item(
            self._client,
            failure,
            TableName=self._table,
            Key=_key(),
            UpdateExpression=RAISE,
            ConditionExpression=RAISE_IF_LATER,
            ExpressionAttributeValues={":u": n(until_us), ":ttl": n(until + ITEM_TTL_SECONDS)},
        )
        self._raised_us = until_us
        return True


def latest_closure(client: DynamoDBClient, table: str) -> float | None:
    """The latest closure's end (epoch seconds), read consistently (one read unit); None when
    no gate closed within the marker's life."""
    try:
        item = client.get_item(TableName=table, Key=_key(), ConsistentRead=True).get("Item", {})
    except (ClientError, BotoCoreError) as exc:
        # the first step of the read of the closed scopes, named as that read is
        raise LimiterError("limiter read of closed scopes failed") from exc
    return int(item["until_us"]["N"]) / US if "until_us" in item else None

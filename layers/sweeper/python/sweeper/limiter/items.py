"""The limiter's items on DynamoDB: one per scope (`scope#KEY`), written with conditional updates.

`ScopeItems` is what the limiter's parts share: every DynamoDB call they make, the write and read
counts (the benchmark's cost figure), and the lead every reservation is made with, taken from the
recent write round trips (sweeper.limiter.dynamodb's docstring says why).
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Unpack

from botocore.exceptions import ClientError

from sweeper.errors import LimiterError
from sweeper.limiter.base import ScopeState, ShareSeen
from sweeper.limiter.keys import SCOPE_KEY_PREFIX

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_dynamodb.literals import ReturnValueType
    from mypy_boto3_dynamodb.type_defs import UpdateItemInputTypeDef

US = 1_000_000
#: Limiter items of idle scopes expire (DynamoDB TTL) after this long.
ITEM_TTL_SECONDS = 86_400
#: A reservation that loses this many races in a row gives up with a short denial.
MAX_RACES = 8
#: The lead of a limiter that has not measured a write yet (its first round trip also opens
#: the connection), and the most any lead may be: slower writes than this are an incident, not
#: something to plan every slot around.
FIRST_LEAD_SECONDS = 0.05
MAX_LEAD_SECONDS = 0.25
#: How many recent write round trips the lead is taken from (their slowest).
LEAD_SAMPLES = 8


def n(value: float | int) -> dict[str, str]:
    """A DynamoDB number attribute, in whole units."""
    return {"N": str(int(value))}


def step_us(interval: float) -> int:
    """A spacing of `interval` seconds in whole µs, at least one."""
    return max(1, round(interval * US))


def scope_key(scope: str) -> dict[str, Any]:
    """The key of a scope's item."""
    return {"pk": {"S": SCOPE_KEY_PREFIX + scope}}


def update_item(
    client: DynamoDBClient, failure: str, **request: Unpack[UpdateItemInputTypeDef]
) -> tuple[bool, dict[str, Any]]:
    """One UpdateItem on the limiter table: (True, the attributes it returned) when written,
    (False, the item as it is, if the request asked for it) when its condition failed; any
    other error is a LimiterError saying `failure`."""
    try:
        answer = client.update_item(**request)
    except ClientError as exc:
        if exc.response.get("Error", {}).get("Code") != "ConditionalCheckFailedException":
            raise LimiterError(failure) from exc
        item: dict[str, Any] = exc.response.get("Item") or {}  # type: ignore[assignment]
        return False, item
    return True, dict(answer.get("Attributes", {}))


def get_item(
    client: DynamoDBClient, table: str, pk: str, failure: str, *, consistent: bool = True
) -> dict[str, Any]:
    """The limiter table's item `pk` ({} when there is none); an error is a LimiterError
    saying `failure`."""
    try:
        answer = client.get_item(TableName=table, Key={"pk": {"S": pk}}, ConsistentRead=consistent)
    except ClientError as exc:
        raise LimiterError(failure) from exc
    return dict(answer.get("Item", {}))


def share_seen(item: dict[str, Any]) -> ShareSeen | None:
    """The split a scope's item holds (None: no consumer has written one)."""
    if not all(name in item for name in ("sh_own", "sh_oth", "sh_q", "sh_at")):
        return None
    return ShareSeen(
        quota=int(item["sh_q"]["N"]),
        own=int(item["sh_own"]["N"]),
        others=int(item["sh_oth"]["N"]),
        seen_at=int(item["sh_at"]["N"]) / US,
    )


def scope_state(scope: str, item: dict[str, Any]) -> ScopeState:
    """A scope's state as its item holds it ({}: no item yet, an open gate and no slot)."""

    def num(name: str) -> float | None:
        return int(item[name]["N"]) / US if name in item else None

    reason = item.get("reason", {}).get("S")
    last = num("last_close_us")
    return ScopeState(scope, num("tat"), num("closed_until"), reason, last, share_seen(item))


class ScopeItems:
    """The limiter table's scope items as one process writes and reads them."""

    def __init__(self, client: DynamoDBClient, table: str, clock: Callable[[], float]) -> None:
        self._client = client
        self._table = table
        self.clock = clock
        self.writes = 0  # conditional writes made, for the benchmark's cost figure
        self.reads = 0
        self._round_trips: deque[float] = deque(maxlen=LEAD_SAMPLES)

    @property
    def lead(self) -> float:
        """How far ahead of now a reservation is made: the slowest recent write round trip."""
        if not self._round_trips:
            return FIRST_LEAD_SECONDS
        return min(MAX_LEAD_SECONDS, max(self._round_trips))

    def update(
        self,
        scope: str,
        update: str,
        condition: str,
        values: dict[str, Any],
        returns: ReturnValueType,
        names: dict[str, str] | None = None,
    ) -> int | dict[str, Any]:
        """Run a conditional update; the new tat (or 0) on success, the old item on failure."""
        started = time.monotonic()
        extra: dict[str, Any] = {"ExpressionAttributeNames": names} if names else {}
        self.writes += 1
        written, item = update_item(
            self._client,
            f"limiter update failed for scope {scope!r}",
            TableName=self._table,
            Key=scope_key(scope),
            UpdateExpression=update,
            ConditionExpression=condition,
            ExpressionAttributeValues=values,
            ReturnValues=returns,
            ReturnValuesOnConditionCheckFailure="ALL_OLD",
            **extra,
        )
        self._round_trips.append(time.monotonic() - started)
        if not written:
            return item
        return int(item["tat"]["N"]) if "tat" in item else 0

    def read(self, scope: str) -> dict[str, Any]:
        """The scope's item, read consistently ({} when it has none yet)."""
        self.reads += 1
        pk = SCOPE_KEY_PREFIX + scope
        return get_item(self._client, self._table, pk, f"limiter read failed for scope {scope!r}")

    def write(
        self, scope: str, update: str, condition: str, values: dict[str, Any], failure: str
    ) -> bool:
        """Run a conditional update, its round trip not measured; False when its condition
        failed (an error is raised as `failure`, e.g. "gate close failed")."""
        self.writes += 1
        written, _ = update_item(
            self._client,
            f"{failure} for scope {scope!r}",
            TableName=self._table,
            Key=scope_key(scope),
            UpdateExpression=update,
            ConditionExpression=condition,
            ExpressionAttributeValues=values,
        )
        return written

    def read_many(self, scopes: Sequence[str]) -> tuple[dict[str, Any], set[str]]:
        """The items of `scopes` (distinct) in one strongly consistent BatchGetItem, by their
        key, and the keys DynamoDB returned unprocessed."""
        self.reads += 1
        try:
            answer = self._client.batch_get_item(
                RequestItems={
                    self._table: {
                        "Keys": [scope_key(scope) for scope in scopes],
                        "ConsistentRead": True,
                    }
                }
            )
        except ClientError as exc:
            raise LimiterError(f"limiter read failed for {len(scopes)} scopes") from exc
        unprocessed: dict[str, Any] = dict(answer.get("UnprocessedKeys", {}))
        skipped = {key["pk"]["S"] for key in unprocessed.get(self._table, {}).get("Keys", [])}
        responses: dict[str, Any] = dict(answer.get("Responses", {}))
        found = {item["pk"]["S"]: item for item in responses.get(self._table, [])}
        return found, skipped

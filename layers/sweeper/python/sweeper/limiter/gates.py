"""The throttle gates on the scopes' items (`closed_until`, `reason`), the 429 notes of a wider
limit, and the reads of the gates: one scope's, several in one request, every closed one (after
a look at the latest closure's end, sweeper.limiter.closures)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from sweeper.errors import LimiterError
from sweeper.limiter.base import MAX_GATES_PER_READ, Reason, ScopeState
from sweeper.limiter.closures import LatestClosure, latest_closure
from sweeper.limiter.gcra import Reservations
from sweeper.limiter.items import ITEM_TTL_SECONDS, US, ScopeItems, n, scope_state
from sweeper.limiter.keys import SCOPE_KEY_PREFIX

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient


class Gates:
    """The scopes' gates, closed and read; each read also hints the reservations' regime."""

    def __init__(
        self, items: ScopeItems, reservations: Reservations, latest: LatestClosure
    ) -> None:
        self._items = items
        self._reservations = reservations
        self._latest = latest

    def note_throttle(self, scope: str, source: str, within: float) -> bool:
        """A 429 from `source` (a narrower limit's key) under the wider limit `scope`: one
        conditional write on the wider limit's item records it. Returns True when another
        source's 429 was recorded there within the last `within` seconds: the wider limit is
        what refuses (sweeper.limiter.several)."""
        now = int(self._items.clock() * US)
        result = self._items.update(
            scope,
            "SET t429_at = :now, t429_src = :src, expires_at = :ttl",
            "attribute_not_exists(t429_at) OR t429_at <= :since OR t429_src = :src",
            {
                ":now": n(now),
                ":src": {"S": source},
                ":since": n(now - int(within * US)),
                ":ttl": n(now // US + ITEM_TTL_SECONDS),
            },
            returns="NONE",
        )
        return isinstance(result, dict)

    def close(self, scope: str, until: float, reason: Reason) -> float:
        """Close the gate until `until` (never shortens a closure); returns the closure's end.
        The latest closure's marker is raised first: it may err early, never late."""
        if self._latest.raise_to(until, f"gate close failed for scope {scope!r}"):
            self._items.writes += 1
        now = self._items.clock()
        written = self._items.write(
            scope,
            "SET closed_until = :u, reason = :r, last_close_us = :d, "
            "expires_at = :ttl ADD closures :one",
            "attribute_not_exists(closed_until) OR closed_until < :u",
            {
                ":u": n(until * US),
                ":r": {"S": reason},
                ":one": n(1),
                ":d": n(max(0.0, until - now) * US),
                ":ttl": n(until + ITEM_TTL_SECONDS),
            },
            failure="gate close failed",
        )
        if not written:
            return max(until, self.state(scope).closed_until or until)
        return until

    def state(self, scope: str) -> ScopeState:
        """The scope's state, read consistently."""
        asked = self._items.clock()
        item = self._items.read(scope)
        self._reservations.hint(scope, item, asked)
        return scope_state(scope, item)

    def states(self, scopes: Sequence[str]) -> dict[str, ScopeState]:
        """The state of each of `scopes` in one strongly consistent BatchGetItem (each item
        under 4 KB: one read unit per scope, as many as GetItems would cost, in one round trip).

        A key DynamoDB returns unprocessed (its table's throughput exceeded, or the answer's
        16 MB) is left out of the answer: not read, so never taken for an open gate; the caller
        reads it on its own if it must. A scope with no item yet is open, as `state` says.
        """
        wanted = list(dict.fromkeys(scopes))  # a key twice is refused by DynamoDB
        if not wanted:
            return {}
        if len(wanted) > MAX_GATES_PER_READ:
            raise LimiterError(f"at most {MAX_GATES_PER_READ} gates in one read")
        asked = self._items.clock()
        found, skipped = self._items.read_many(wanted)
        for scope in wanted:
            self._reservations.hint(scope, found.get(SCOPE_KEY_PREFIX + scope, {}), asked)
        return {
            scope: scope_state(scope, found.get(SCOPE_KEY_PREFIX + scope, {}))
            for scope in wanted
            if SCOPE_KEY_PREFIX + scope not in skipped
        }


def closed_scopes(client: DynamoDBClient, table: str, now: float) -> set[str]:
    """Every scope whose gate is closed at `now` (`closed_gates_after(now)`): the latest
    closure's end (one GetItem), and only when it is after `now` a Scan of the limiter table
    (an item per limiter key used within a day, about 100 bytes each), eventually consistent.

    For the producer, which passes over their rows: a closure it does not see yet only means
    rows are claimed that the consumer returns, as without this read.
    """
    return {gate.scope for gate in closed_gates_after(client, table, now)}


def closed_gates_after(client: DynamoDBClient, table: str, since: float) -> list[ScopeState]:
    """`closed_gates(since)`, read only when a closure ends after `since`: the latest closure's
    end is read first (one GetItem, sweeper.limiter.closures), and the table is Scanned only
    when it is later. The marker is at least every closure's end, so nothing is left out."""
    latest = latest_closure(client, table)
    if latest is None or round(latest * US) <= int(since * US):
        return []
    return closed_gates(client, table, since)


def closed_gates(client: DynamoDBClient, table: str, now: float) -> list[ScopeState]:
    """Every limiter key closed at `now`, with its closure's end, reason and length: one Scan,
    eventually consistent, whatever the marker says. `sweeper status` reads it so (an operator's
    read, on demand), and names a closed further limit (`NAME:KEY`) as well as a closed scope;
    the scheduled readers go through `closed_gates_after`. No `tat`: not read."""
    closed: list[ScopeState] = []
    start: dict[str, Any] | None = None
    while True:
        args: dict[str, Any] = {
            "TableName": table,
            "FilterExpression": "#until > :now",
            "ProjectionExpression": "#pk, #until, #reason, #length",
            "ExpressionAttributeNames": {
                "#pk": "pk",
                "#until": "closed_until",
                "#reason": "reason",
                "#length": "last_close_us",
            },
            "ExpressionAttributeValues": {":now": n(now * US)},
        }
        if start:
            args["ExclusiveStartKey"] = start
        try:
            page = client.scan(**args)
        except ClientError as exc:
            raise LimiterError("limiter read of closed scopes failed") from exc
        for item in page.get("Items", []):
            # as `state` reads it, of the attributes projected (no `tat`, no share)
            closed.append(scope_state(item["pk"]["S"].removeprefix(SCOPE_KEY_PREFIX), item))
        start = page.get("LastEvaluatedKey")
        if not start:
            return closed

"""Live limits: an operator's change to one of a policy's limits, in force without a redeploy.

One item per policy and limit in the limiter table, `live#POLICY#LIMIT`, written by the
operator commands (`sweeper limits set`, sweeper.operator_api.limits) and only read by the
consumer (its admission's wrapper, sweeper.admission.live) and the redrive. An item holds a
rate lower than the told one (`limit` calls per `period_seconds`; above it only when the
operator said so), or a pause, with who set it and why; `--reset` leaves it changing nothing
(it expires by TTL a day later), and the told limit is back.

Every consumer reads its policy's items at most once per LIVE_READ_SECONDS (one BatchGetItem,
consistent, per environment), so a change is in force fleet-wide within that and the slots a
batch already banked (at most BLOCK_SPAN_SECONDS of them).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from botocore.exceptions import ClientError

from sweeper.errors import LimiterError
from sweeper.limiter.items import get_item, update_item

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

#: An operator's change to a limit, one item per policy and limit.
LIVE_KEY_PREFIX = "live#"
#: A consumer reads its policy's live changes at most this often (seconds).
LIVE_READ_SECONDS = 1.0
#: A reset's item (who reset the limit, and why) is kept this long, then expires by TTL.
RESET_KEPT_SECONDS = 86_400


def live_key(policy: str, limit: str) -> str:
    """The item of one limit's live change (a policy or limit name holds no `#`)."""
    return f"{LIVE_KEY_PREFIX}{policy}#{limit}"


@dataclass(frozen=True, slots=True)
class LiveLimit:
    """One limit's live change: paused, or a rate of `rate_limit` per `rate_period_seconds`."""

    policy: str
    limit: str
    actor: str
    reason: str
    set_at: float  # epoch seconds
    paused: bool = False
    rate_limit: int | None = None
    rate_period_seconds: float | None = None
    above_told: bool = False

    @property
    def in_force(self) -> bool:
        """Does it change anything? (A reset leaves its item, changing nothing, to expire.)"""
        return self.paused or self.rate_limit is not None

    def update(self, expires_at: float) -> dict[str, Any]:
        """The UpdateItem arguments that make its item this change (never a whole-item put:
        the limiter table takes none)."""
        values: dict[str, Any] = {
            ":policy": {"S": self.policy},
            ":limit": {"S": self.limit},
            ":actor": {"S": self.actor},
            ":reason": {"S": self.reason},
            ":set_at": {"N": repr(self.set_at)},
            ":paused": {"BOOL": self.paused},
            ":above": {"BOOL": self.above_told},
        }
        sets = [
            "#policy = :policy",
            "#limit = :limit",
            "actor = :actor",
            "reason = :reason",
            "set_at = :set_at",
            "paused = :paused",
            "above_told = :above",
        ]
        removes = []
        if self.rate_limit is not None and self.rate_period_seconds is not None:
            values[":rate"] = {"N": str(self.rate_limit)}
            values[":period"] = {"N": repr(self.rate_period_seconds)}
            sets += ["rate_limit = :rate", "rate_period_seconds = :period"]
        else:
            removes += ["rate_limit", "rate_period_seconds"]
        if self.in_force:
            removes.append("expires_at")
        else:
            values[":expires"] = {"N": str(int(expires_at))}
            sets.append("expires_at = :expires")
        expression = "SET " + ", ".join(sets)
        if removes:
            expression += " REMOVE " + ", ".join(removes)
        return {
            "Key": {"pk": {"S": live_key(self.policy, self.limit)}},
            "UpdateExpression": expression,
            "ExpressionAttributeNames": {"#policy": "policy", "#limit": "limit"},
            "ExpressionAttributeValues": values,
        }

    @classmethod
    def of_item(cls, item: dict[str, Any]) -> LiveLimit:
        rate = item.get("rate_limit")
        period = item.get("rate_period_seconds")
        return cls(
            policy=item["policy"]["S"],
            limit=item["limit"]["S"],
            actor=item["actor"]["S"],
            reason=item["reason"]["S"],
            set_at=float(item["set_at"]["N"]),
            paused=item.get("paused", {}).get("BOOL", False),
            rate_limit=int(rate["N"]) if rate else None,
            rate_period_seconds=float(period["N"]) if period else None,
            above_told=item.get("above_told", {}).get("BOOL", False),
        )

    def as_dict(self) -> dict[str, Any]:
        return {
            "paused": self.paused,
            "live_rate": None
            if self.rate_limit is None
            else f"{self.rate_limit}/{self.rate_period_seconds:g}s",
            "above_told": self.above_told,
            "actor": self.actor,
            "reason": self.reason,
            "set_at": self.set_at,
        }


class LiveLimitStore:
    """The live changes on one limiter table, and a consumer's cached read of them."""

    def __init__(self, client: DynamoDBClient, table: str) -> None:
        self._client = client
        self._table = table
        self._lock = threading.Lock()  # a batch's threads share one read
        self._seen: dict[str, tuple[float, dict[str, LiveLimit]]] = {}

    def read(self, policy: str, limits: Sequence[str]) -> dict[str, LiveLimit]:
        """The live changes of these limits of the policy, by limit name (one consistent
        BatchGetItem)."""
        keys = [{"pk": {"S": live_key(policy, name)}} for name in limits]
        found: dict[str, LiveLimit] = {}
        request: dict[str, Any] = {self._table: {"Keys": keys, "ConsistentRead": True}}
        try:
            while request:
                answer = self._client.batch_get_item(RequestItems=request)
                for item in answer.get("Responses", {}).get(self._table, []):
                    change = LiveLimit.of_item(item)
                    if change.in_force:
                        found[change.limit] = change
                request = dict(answer.get("UnprocessedKeys") or {})
        except ClientError as exc:
            raise LimiterError("limiter read of live limits failed") from exc
        return found

    def get(self, policy: str, limit: str) -> LiveLimit | None:
        """One limit's live change (a consistent GetItem: the operator commands, the redrive)."""
        failure = "limiter read of a live limit failed"
        item = get_item(self._client, self._table, live_key(policy, limit), failure)
        change = LiveLimit.of_item(item) if item else None
        return change if change is not None and change.in_force else None

    def current(
        self, policy: str, limits: Sequence[str], monotonic: Callable[[], float]
    ) -> dict[str, LiveLimit]:
        """`read`, at most once per LIVE_READ_SECONDS for this process."""
        with self._lock:
            now = monotonic()
            seen = self._seen.get(policy)
            if seen is None or now - seen[0] >= LIVE_READ_SECONDS:
                seen = (now, self.read(policy, limits))
                self._seen[policy] = seen
            return seen[1]

    def put(self, change: LiveLimit) -> None:
        """Write one limit's change; one that changes nothing (a reset) expires in a day."""
        update_item(
            self._client,
            "limiter write of a live limit failed",
            TableName=self._table,
            **change.update(change.set_at + RESET_KEPT_SECONDS),
        )


@runtime_checkable
class LiveSource(Protocol):
    """A limiter whose table holds the operators' live limits (the DynamoDB limiter)."""

    def live(self) -> LiveLimitStore: ...

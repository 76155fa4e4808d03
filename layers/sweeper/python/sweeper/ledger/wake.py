"""The wake-up time: when a policy's ledger may next hold claimable work, kept beside it.

One item per policy (`wake#POLICY` in the limiter table) holds `wake_at`, a time no later than
the earliest moment any row can become claimable (a pending row's next attempt, a leased row's
lease expiry), and `version`, a counter every lowering increments. The ledger stays the truth;
the item may only err early:

- every ledger write that can make work due earlier LOWERS the item before it commits
  (`SET wake_at = :t` when the item is absent or later; `sweeper.ledger.executor`), inside a
  transaction holding the policy's wake lock in shared mode;
- a producer run reads the item first and, when `wake_at` is later than now, returns without
  connecting to the ledger;
- after a run, the producer takes the wake lock exclusively (so no lowering write is between its
  lowering and its commit), reads the item's version, reads the ledger's next time, commits, and
  RAISES the item to that time only if the version is unchanged: a lowering made meanwhile wins.

docs/architecture.md ("Waking the ledger") says why no obligation can be missed.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, Protocol

from botocore.exceptions import BotoCoreError, ClientError

from sweeper.errors import SweeperError

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

#: The wake item's key in the limiter table, one per policy.
WAKE_KEY_PREFIX = "wake#"


class WakeError(SweeperError):
    """The wake item could not be read or written; a producer then connects to the ledger."""


@dataclass(frozen=True, slots=True)
class Wake:
    """The item as read: no `at` means nothing is known, so the ledger must be read."""

    at: datetime | None
    version: int


def wake_key(policy: str) -> str:
    return WAKE_KEY_PREFIX + policy


class WakeStore(Protocol):
    """Where the wake-up times are kept (DynamoDB in a deployment, memory in tests)."""

    def read(self, policy: str) -> Wake: ...

    def lower(self, policy: str, at: datetime) -> None:
        """Make `wake_at` at most `at`, and count a lowering (even when it was already lower)."""

    def raise_to(self, policy: str, at: datetime | None, version: int) -> bool:
        """Set `wake_at` to `at` (None: nothing can become claimable) only if no lowering was
        counted since `version` was read; True when it was set."""


def may_skip(wake: Wake, now: datetime) -> bool:
    """Whether a producer run at `now` may return without connecting: the item says nothing
    can be claimable before a time later than now. An absent item never skips."""
    return wake.at is not None and wake.at > now


#: A time later than any obligation: what "nothing can become claimable" is stored as.
NEVER = datetime.max.replace(tzinfo=UTC)


class MemoryWakeStore:
    """The wake items in a dict: for tests and the property test's model."""

    def __init__(self) -> None:
        self.items: dict[str, Wake] = {}
        self.reads = 0

    def read(self, policy: str) -> Wake:
        self.reads += 1
        return self.items.get(policy, Wake(at=None, version=0))

    def lower(self, policy: str, at: datetime) -> None:
        current = self.items.get(policy, Wake(at=None, version=0))
        lowered = at if current.at is None or current.at > at else current.at
        self.items[policy] = Wake(at=lowered, version=current.version + 1)

    def raise_to(self, policy: str, at: datetime | None, version: int) -> bool:
        current = self.items.get(policy, Wake(at=None, version=0))
        if current.version != version:
            return False
        self.items[policy] = Wake(at=NEVER if at is None else at, version=version)
        return True


class DynamoWakeStore:
    """The wake items in the limiter table (`pk = wake#POLICY`), written with conditions."""

    def __init__(self, client: DynamoDBClient, table: str) -> None:
        self._client = client
        self._table = table

    def _key(self, policy: str) -> dict[str, Any]:
        return {"pk": {"S": wake_key(policy)}}

    def read(self, policy: str) -> Wake:
        try:
            item = self._client.get_item(
                TableName=self._table, Key=self._key(policy), ConsistentRead=True
            ).get("Item")
        except (ClientError, BotoCoreError) as exc:
            raise WakeError(f"cannot read the wake item of policy {policy!r}") from exc
        if not item or "wake_at" not in item:
            return Wake(at=None, version=int(item["version"]["N"]) if item else 0)
        return Wake(at=_from_epoch(item["wake_at"]["N"]), version=int(item["version"]["N"]))

    def lower(self, policy: str, at: datetime) -> None:
        """Two conditional writes: lower the time if it is later (or absent), else only count
        the lowering; either way the version moves, so a raise read before fails."""
        key = self._key(policy)
        try:
            try:
                self._client.update_item(
                    TableName=self._table,
                    Key=key,
                    UpdateExpression="SET wake_at = :t ADD version :one",
                    ConditionExpression="attribute_not_exists(wake_at) OR wake_at > :t",
                    ExpressionAttributeValues={":t": _epoch(at), ":one": {"N": "1"}},
                )
            except ClientError as exc:
                if not _failed_condition(exc):
                    raise
                self._client.update_item(
                    TableName=self._table,
                    Key=key,
                    UpdateExpression="ADD version :one",
                    ExpressionAttributeValues={":one": {"N": "1"}},
                )
        except (ClientError, BotoCoreError) as exc:
            raise WakeError(f"cannot lower the wake item of policy {policy!r}") from exc

    def raise_to(self, policy: str, at: datetime | None, version: int) -> bool:
        condition = "version = :v" if version else "attribute_not_exists(version) OR version = :v"
        try:
            self._client.update_item(
                TableName=self._table,
                Key=self._key(policy),
                UpdateExpression="SET wake_at = :t",
                ConditionExpression=condition,
                ExpressionAttributeValues={
                    ":t": _epoch(NEVER if at is None else at),
                    ":v": {"N": str(version)},
                },
            )
        except ClientError as exc:
            if _failed_condition(exc):
                return False
            raise WakeError(f"cannot raise the wake item of policy {policy!r}") from exc
        except BotoCoreError as exc:
            raise WakeError(f"cannot raise the wake item of policy {policy!r}") from exc
        return True


def _epoch(at: datetime) -> dict[str, str]:
    """Microseconds since the epoch, exact (a float would round)."""
    delta = at - datetime(1970, 1, 1, tzinfo=UTC)
    return {"N": str((delta.days * 86400 + delta.seconds) * 1_000_000 + delta.microseconds)}


def _from_epoch(value: str) -> datetime:
    return datetime(1970, 1, 1, tzinfo=UTC) + timedelta(microseconds=int(value))


def _failed_condition(exc: ClientError) -> bool:
    return exc.response.get("Error", {}).get("Code") == "ConditionalCheckFailedException"

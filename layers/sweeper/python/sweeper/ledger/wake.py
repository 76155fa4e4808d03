"""The wake-up time: when a policy's ledger may next hold claimable work, kept beside it.

One item per policy (`wake#POLICY` in the limiter table) holds `wake_at`, a time no later than
the earliest moment any row can become claimable (a pending row's next attempt, a leased row's
lease expiry); `version`, which every lowering increments; `writer`, the highest ledger
transaction id (xid8) that lowered it; and `checked_at`, when a producer last read the whole
ledger. The ledger stays the truth; the item may only err early, and is trusted for at most
the policy's `producer_idle_check_seconds`. No lock is held across a DynamoDB call:

- a write that can make work claimable earlier opens its transaction, takes its xid (which
  locks nothing), LOWERS the item (`wake_at` to at most its time, `version + 1`, `writer` to at
  least its xid), then writes and commits (`sweeper.ledger.executor`);
- a producer run reads the item first and returns without connecting while `wake_at` is later
  than now and `checked_at` is within the trust bound;
- after a run that connected, the producer reads the ledger's next claimable time in one
  statement, with whether every transaction up to `writer` had ended before that statement's
  snapshot (`writer < xmin`), and RAISES the item to that time only then, and only if the
  `version` it read before the run is unchanged.

docs/architecture.md ("An idle ledger is not woken") says why no obligation can be missed.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, Final, Protocol

from botocore.exceptions import BotoCoreError, ClientError

from sweeper.errors import SweeperError

if TYPE_CHECKING:
    import psycopg
    from mypy_boto3_dynamodb import DynamoDBClient
    from psycopg.rows import TupleRow

#: The wake item's key in the limiter table, one per policy.
WAKE_KEY_PREFIX = "wake#"
#: How much earlier than the write's own time the item is lowered: the writer's clock and the
#: producer's may differ by this much without a run skipping work (early costs a connection).
WAKE_EARLY: Final = timedelta(seconds=60)
#: A lowering re-reads and retries this often when concurrent lowerings keep changing the item.
LOWER_ATTEMPTS: Final = 8

#: The writing transaction's id, taken before its lowering: it assigns an xid and locks nothing.
CURRENT_WRITER: Final = "SELECT pg_current_xact_id()::text::bigint"

#: The earliest time any of the policy's rows can become claimable (a pending row's next
#: attempt, a leased row's lease expiry; NULL: none can), through the two partial indexes
#: (sweeper_jobs_pending_due, sweeper_jobs_leased_expiry); and whether the transaction
#: %(writer)s and every one before it had ended when this statement's snapshot was taken (then
#: every write that lowered the item before the producer read it is in that snapshot).
NEXT_CLAIMABLE: Final = """
SELECT LEAST(
    (SELECT min(next_attempt_at) FROM sweeper_jobs
      WHERE policy = %(policy)s AND status = 'pending'),
    (SELECT min(lease_expires_at) FROM sweeper_jobs
      WHERE policy = %(policy)s AND status = 'leased')),
    (%(writer)s::bigint)::text::xid8 < pg_snapshot_xmin(pg_current_snapshot())
"""


class WakeError(SweeperError):
    """The wake item could not be read or written: a producer then connects to the ledger, and
    a write that needed a lowering is not made."""


@dataclass(frozen=True, slots=True)
class Wake:
    """The item as read. No `at` or no `checked_at`: nothing is known, the ledger is read."""

    at: datetime | None
    version: int = 0
    writer: int = 0
    checked_at: datetime | None = None


def wake_key(policy: str) -> str:
    return WAKE_KEY_PREFIX + policy


def may_skip(wake: Wake, now: datetime, trusted_for: timedelta) -> bool:
    """Whether a producer run at `now` may return without connecting: the item says nothing
    can be claimable before a later time, and a producer read the whole ledger less than
    `trusted_for` ago (what no lowering told the item is found within that bound)."""
    if wake.at is None or wake.checked_at is None:
        return False
    return wake.at > now and now < wake.checked_at + trusted_for


class WakeStore(Protocol):
    """Where the wake items are kept (DynamoDB in a deployment and on the local stack)."""

    def read(self, policy: str) -> Wake: ...

    def lower(self, policy: str, at: datetime, writer: int) -> None:
        """Make `wake_at` at most `at` and `writer` at least `writer`, and count a lowering
        (even when `wake_at` was already lower)."""

    def raise_to(
        self, policy: str, at: datetime | None, version: int, checked_at: datetime
    ) -> bool:
        """Set `wake_at` to `at` (None: nothing can become claimable) and `checked_at`, only if
        `version` is still the item's; True when it was set."""


def lower_in(
    conn: psycopg.Connection[TupleRow], store: WakeStore, policy: str, at: datetime
) -> None:
    """Inside a write's transaction, before its first statement that changes a row: take the
    transaction's id (which locks nothing) and lower the policy's item to `at` less WAKE_EARLY
    with it. A failed lowering raises, so the write rolls back: nothing commits that the item
    does not cover. The DynamoDB call holds no lock another session waits on."""
    found = conn.execute(CURRENT_WRITER).fetchone()
    assert found is not None  # a SELECT of one value answers one row
    store.lower(policy, at - WAKE_EARLY, int(found[0]))


#: A time later than any obligation: what "nothing can become claimable" is stored as.
NEVER = datetime.max.replace(tzinfo=UTC)


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
            ).get("Item", {})
        except (ClientError, BotoCoreError) as exc:
            raise WakeError(f"cannot read the wake item of policy {policy!r}") from exc
        return _wake_of(item)

    def lower(self, policy: str, at: datetime, writer: int) -> None:
        """One conditional write when the item is already as low and its writer older (a busy
        policy's usual case); else read, compute and write on the version read, again until no
        other lowering came between."""
        try:
            if self._count(policy, at, writer):
                return
            for _attempt in range(LOWER_ATTEMPTS):
                if self._lower_read(policy, at, writer):
                    return
        except (ClientError, BotoCoreError) as exc:
            raise WakeError(f"cannot lower the wake item of policy {policy!r}") from exc
        raise WakeError(f"cannot lower the wake item of policy {policy!r}: it kept changing")

    def _count(self, policy: str, at: datetime, writer: int) -> bool:
        return _conditional(
            lambda: self._client.update_item(
                TableName=self._table,
                Key=self._key(policy),
                UpdateExpression="SET writer = :w ADD version :one",
                ConditionExpression="wake_at <= :t AND writer < :w",
                ExpressionAttributeValues={
                    ":t": _epoch(at),
                    ":w": {"N": str(writer)},
                    ":one": {"N": "1"},
                },
            )
        )

    def _lower_read(self, policy: str, at: datetime, writer: int) -> bool:
        current = self.read(policy)
        lowest = at if current.at is None else min(current.at, at)
        return _conditional(
            lambda: self._client.update_item(
                TableName=self._table,
                Key=self._key(policy),
                UpdateExpression="SET wake_at = :t, writer = :w, version = :next",
                ConditionExpression=_version_is(current.version),
                ExpressionAttributeValues={
                    ":t": _epoch(lowest),
                    ":w": {"N": str(max(current.writer, writer))},
                    ":next": {"N": str(current.version + 1)},
                    ":v": {"N": str(current.version)},
                },
            )
        )

    def raise_to(
        self, policy: str, at: datetime | None, version: int, checked_at: datetime
    ) -> bool:
        try:
            return _conditional(
                lambda: self._client.update_item(
                    TableName=self._table,
                    Key=self._key(policy),
                    UpdateExpression="SET wake_at = :t, checked_at = :c",
                    ConditionExpression=_version_is(version),
                    ExpressionAttributeValues={
                        ":t": _epoch(NEVER if at is None else at),
                        ":c": _epoch(checked_at),
                        ":v": {"N": str(version)},
                    },
                )
            )
        except (ClientError, BotoCoreError) as exc:
            raise WakeError(f"cannot raise the wake item of policy {policy!r}") from exc


def _version_is(version: int) -> str:
    """The condition that the item's version is `version` (an absent version is 0: an item
    the first raise created has none until a lowering)."""
    return "attribute_not_exists(version) OR version = :v" if version == 0 else "version = :v"


def _conditional(write: Any) -> bool:
    """Run a conditional write: True when it was made, False when its condition failed."""
    try:
        write()
    except ClientError as exc:
        if exc.response.get("Error", {}).get("Code") == "ConditionalCheckFailedException":
            return False
        raise
    return True


def _wake_of(item: dict[str, Any]) -> Wake:
    """The item's attributes, each absent one at its default (a new item has none)."""

    def number(name: str) -> int | None:
        return int(item[name]["N"]) if name in item else None

    at, checked = number("wake_at"), number("checked_at")
    return Wake(
        at=None if at is None else _from_epoch(at),
        version=number("version") or 0,
        writer=number("writer") or 0,
        checked_at=None if checked is None else _from_epoch(checked),
    )


def _epoch(at: datetime) -> dict[str, str]:
    """Microseconds since the epoch, exact (a float would round)."""
    delta = at - datetime(1970, 1, 1, tzinfo=UTC)
    return {"N": str((delta.days * 86400 + delta.seconds) * 1_000_000 + delta.microseconds)}


def _from_epoch(value: int) -> datetime:
    return datetime(1970, 1, 1, tzinfo=UTC) + timedelta(microseconds=value)

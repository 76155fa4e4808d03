"""Sweeper's own calls under a scope, counted fleet-wide on the scope's limiter item.

A vendor's Remaining counts every client of a key; to tell sweeper's part of it from the
others' (sweeper.vendor_limits.share), sweeper counts its own calls where all its consumers
count them: the scope's limiter item (sweeper.limiter.dynamodb) holds `sp`, the calls every
consumer made under the scope, added up (ADD). Each environment adds the calls it made since
its last write at most once per `flush_seconds(window)` (a twentieth of the vendor's window,
between 0.05 s and 1 s: at most 20 writes a second per environment and scope), and keeps the
totals its writes found, with their times. Sweeper's calls in the last `window` seconds are
the latest total, plus what this environment has not written yet, less the total before its
first write within the window.

What it means with several consumers: the total is the fleet's, so each consumer counts every
consumer's calls, not only its own. What one environment misses is what the others have not
written yet (at most `flush_seconds` of their calls) and, in an environment younger than the
window, the calls before its first write: both count as the others' spend, so an environment
paces a little slower than it could, never faster.

The same write carries the split the environment last worked out (`sh_own`, `sh_oth`, `sh_q`,
`sh_at`), which `sweeper status` and the console show (`items.share_seen`, on `ScopeState.share`).
"""

from __future__ import annotations

import threading
from collections import deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from sweeper.limiter.base import ShareSeen
from sweeper.limiter.items import ITEM_TTL_SECONDS, US, scope_key, update_item

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

#: An environment writes its calls at most once per this share of the vendor's window ...
FLUSH_SHARE_OF_WINDOW = 0.05
#: ... and never more often than this, nor less often than once a second.
MIN_FLUSH_SECONDS = 0.05
MAX_FLUSH_SECONDS = 1.0

#: Adds an environment's calls to the fleet's total and leaves its latest split beside it.
ADD_SPEND = "ADD sp :n SET expires_at = :ttl"
ADD_SPEND_AND_SHARE = ADD_SPEND + ", sh_own = :own, sh_oth = :oth, sh_q = :q, sh_at = :at"


def flush_seconds(window_seconds: float) -> float:
    """How often an environment writes its calls under a window of `window_seconds`."""
    share = window_seconds * FLUSH_SHARE_OF_WINDOW
    return min(MAX_FLUSH_SECONDS, max(MIN_FLUSH_SECONDS, share))


@dataclass
class _Scope:
    pending: int = 0  # calls made here and not written yet
    writing: bool = False
    written_at: float = float("-inf")
    #: (written at, the fleet's total before that write): oldest first
    totals: deque[tuple[float, int]] = field(default_factory=deque)
    latest: int = 0  # the fleet's total after this environment's last write
    share: ShareSeen | None = None  # to be written with the next calls


class SpendTally:
    """Sweeper's calls per scope, counted on the scopes' items (see the module docstring)."""

    def __init__(self, client: DynamoDBClient, table: str) -> None:
        self._client = client
        self._table = table
        self._lock = threading.Lock()
        self._scopes: dict[str, _Scope] = {}
        self.writes = 0

    def add(self, scope: str, calls: int, now: float, window_seconds: float) -> ShareSeen | None:
        """Count `calls` made under `scope`; write them, and the split last seen, when this
        environment's last write is `flush_seconds` old. The split written (None: nothing
        written, or no split yet); LimiterError when the write failed (the calls go with the
        next)."""
        with self._lock:
            state = self._scopes.setdefault(scope, _Scope())
            state.pending += calls
            if state.writing or now - state.written_at < flush_seconds(window_seconds):
                return None
            state.writing, written, share = True, state.pending, state.share
            state.pending, state.written_at = 0, now
        total: int | None = None
        try:
            total = self._write(scope, written, share, now)
        finally:
            with self._lock:
                state.writing = False
                if total is None:
                    state.pending += written
                else:
                    state.totals.append((now, total - written))
                    state.latest = total
                    horizon = now - window_seconds - 2 * MAX_FLUSH_SECONDS
                    while len(state.totals) > 1 and state.totals[0][0] < horizon:
                        state.totals.popleft()
        return share

    def own_in(self, scope: str, window_seconds: float, now: float) -> int:
        """Sweeper's calls under `scope` in the last `window_seconds`, fleet-wide as this
        environment knows them (never more than were made)."""
        with self._lock:
            state = self._scopes.get(scope)
            if state is None:
                return 0
            since = now - window_seconds + flush_seconds(window_seconds)
            base = next((total for at, total in state.totals if at >= since), state.latest)
            return state.latest - base + state.pending

    def seen(self, scope: str, share: ShareSeen) -> None:
        """Keep `share` to be written with this environment's next calls."""
        with self._lock:
            self._scopes.setdefault(scope, _Scope()).share = share

    def _write(self, scope: str, calls: int, share: ShareSeen | None, now: float) -> int:
        values: dict[str, Any] = {
            ":n": {"N": str(calls)},
            ":ttl": {"N": str(int(now) + ITEM_TTL_SECONDS)},
        }
        if share is not None:
            values.update(
                {
                    ":own": {"N": str(share.own)},
                    ":oth": {"N": str(share.others)},
                    ":q": {"N": str(share.quota)},
                    ":at": {"N": str(int(share.seen_at * US))},
                }
            )
        self.writes += 1
        _, answer = update_item(
            self._client,
            f"spend count failed for scope {scope!r}",
            TableName=self._table,
            Key=scope_key(scope),
            UpdateExpression=ADD_SPEND if share is None else ADD_SPEND_AND_SHARE,
            ExpressionAttributeValues=values,
            ReturnValues="UPDATED_NEW",
        )
        return int(answer["sp"]["N"])


@runtime_checkable
class SpendSource(Protocol):
    """A limiter that counts sweeper's own calls fleet-wide (the DynamoDB limiter)."""

    def spend(self) -> SpendTally: ...

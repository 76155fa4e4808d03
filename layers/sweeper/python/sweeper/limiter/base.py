"""What every limiter speaks: the answers to a reservation, and the `Limiter` protocol.

Before it calls the vendor a consumer asks a limiter for slots of a scope and gets a `Grant`
(slots, each at its own exact time) or a `Denial` (come back at `retry_at`, and why: the rate, a
vendor's throttle, an auth failure); `ScopeState` is what a limiter tells of a scope (its next
slot, its gate's closure). The protocol has three implementations: the shared DynamoDB limiter
(`dynamodb.py`, production) and the benchmark's two baselines (`sweeper_bench.baselines`, never
shipped); the consumer's admission (sweeper.admission), the redrive and the operator commands
know only these types. A limiter that can read several gates in one request is also a
`GateReader` (the DynamoDB limiter); without it, admission reads them one at a time.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, Protocol, runtime_checkable

from sweeper.adaptive_rate import Adaptive

#: Why a gate is closed, or a reservation refused: "throttled" is a vendor's 429 with its
#: Retry-After, "backoff" a 429 without one (sweeper's own doubling delay, backoff.close_delay),
#: "paused" an operator's live pause of the limit (sweeper.limiter.live), "budget" a budget's
#: next unit not yet due, or its window spent (sweeper.limiter.budget).
Reason = Literal["rate", "throttled", "backoff", "auth", "paused", "budget"]


@dataclass(frozen=True, slots=True)
class Grant:
    """Reserved slots: the first at `slot_at` (epoch seconds), then one every `interval`.

    Each slot is for one call, at its time, not before.
    """

    slot_at: float
    count: int = 1
    interval: float = 0.0

    @property
    def slots(self) -> tuple[float, ...]:
        return tuple(self.slot_at + i * self.interval for i in range(self.count))


@dataclass(frozen=True, slots=True)
class Denial:
    """No slot within the horizon, or the gate is closed: come back at `retry_at`."""

    retry_at: float
    reason: Reason


@dataclass(frozen=True, slots=True)
class ShareSeen:
    """A shared quota's split as a consumer last worked it out (sweeper.limiter.spend): of
    `quota`, sweeper's `own` calls and the `others'` in the vendor's window, at `seen_at`."""

    quota: int
    own: int
    others: int
    seen_at: float  # epoch seconds

    @property
    def own_percent(self) -> float:
        """Sweeper's share of the quota in the window, in percent."""
        return 100.0 * self.own / self.quota if self.quota else 0.0

    @property
    def others_percent(self) -> float:
        """The others' share of the quota in the window, in percent."""
        return 100.0 * self.others / self.quota if self.quota else 0.0


@dataclass(frozen=True, slots=True)
class ScopeState:
    scope: str
    next_slot_at: float | None
    closed_until: float | None
    reason: str | None
    last_close_seconds: float | None
    share: ShareSeen | None = None  # a shared quota's split, when a consumer wrote one

    def closed(self, now: float) -> bool:
        return self.closed_until is not None and self.closed_until > now


class Limiter(Protocol):
    """What a consumer asks before calling the vendor (implemented in `dynamodb`)."""

    def reserve(
        self,
        scope: str,
        interval: float,
        horizon: float,
        count: int = 1,
        adaptive: Adaptive | None = None,
        *,
        slack: float = 0.0,
        tolerance: float = 0.0,
    ) -> Grant | Denial: ...

    def close(self, scope: str, until: float, reason: Reason) -> float: ...

    def cut(self, scope: str, adaptive: Adaptive) -> float: ...

    def state(self, scope: str) -> ScopeState: ...


class SlotReserver(Protocol):
    """A limiter whose reservation takes every option (`DynamoLimiter`, gcra.py
    `Reservations.reserve`): a first slot no earlier than `not_before`, a lead cut by a
    `slack`, a burst `tolerance`, slots weighing `units` intervals."""

    def reserve(
        self,
        scope: str,
        interval: float,
        horizon: float,
        count: int = 1,
        adaptive: Adaptive | None = None,
        not_before: float | None = None,
        slack: float = 0.0,
        tolerance: float = 0.0,
        units: int = 1,
    ) -> Grant | Denial: ...


#: The most gates one `GateReader.states` request reads (DynamoDB's BatchGetItem takes 100 keys).
MAX_GATES_PER_READ = 100


@runtime_checkable
class GateReader(Protocol):
    """A limiter that reads the gates of several scopes in one request."""

    def states(self, scopes: Sequence[str]) -> dict[str, ScopeState]:
        """The state of each of `scopes` (at most MAX_GATES_PER_READ), read consistently; a
        scope the store left unread is missing from the answer, never reported open."""
        ...

"""Two rate limits on one item: each narrow key's slots kept inside the wide limit's item.

A policy whose calls are held by a narrow limit per scope (2/s per store) and one wide limit
with a constant key (40/s for the app) can reserve both in one conditional write, because the
wide limit's item is one item: it holds its own GCRA `tat` and, beside it, each narrow key's
next free time (`n#KEY`, epoch µs) and gate (`c#KEY`, a closure's end). A batch reserves a
block of the wide limit's slots in that one write and gives each to a scope of its records
whose own next free time has come: the slot is then both limits' slot, at one time, so no call
holds a slot in one limit that the other cannot honour, and nothing is given back.

The write is a compare-and-set: the consumer plans the block from the item as it last saw it
(its last write, a failed condition's returned item, or a gate read) and conditions the write
on the item's version `v` and `tat` being what it saw, and on both gates being open. A stale
view costs one failed write, which returns the item, and the block is planned again. Every
value the plan depends on only grows (a `tat`, a next free time, a closure's end), or is removed
once it means the same as nothing (below), so a denial planned from a stale view is still right,
with one exception that is safe: the wide limit's holes (below) appear and shrink. A hole that
appeared after the view was taken may hold a slot that a denial planned without it (no write
made) did not see: such a denial is pessimistic (the key asks again later than it needed to).
That costs time, never a limit; a plan with slots is written only on the current version.

The wide limit books inside its own gaps. Its `tat` only moves forward, and a block moves on
to the earliest time one of its keys is due (up to the span), so while the wide limit is slack
each such jump would leave wide slots unbooked for good while other keys were free then
(measured in scenario (b) of issue 25, docs/decisions.md). So a jump from `at` to `soonest` on
the wide timeline is kept on the item as a hole `[at, soonest - step]` (the `h` attribute, a
flat list of bounds): every time in a hole is at least the wide step from every wide slot
booked, because a hole lies between two booked slots (or the `tat`) with a step kept at each
end. A later plan may place a wide slot inside a hole (at or after its `now` and the key's
next free time), which splits the hole around that slot by a step each side; everything else
about a slot (gates, horizon, the key's spacing) is as for a slot at the `tat`. At most
MAX_HOLES are kept (those that hold the fewest wide slots go first: losing one only leaves
slots unused), and a hole that ends before the planner's real time is dropped (no plan can
use it: every slot lies at or after its planner's real time plus its lead). The holes are
written in the same compare-and-set, whose version condition covers them. A slot taken on the
wide item by `reserve_all` (when the item is full) or given back there lies at or after the
`tat`, so never in a hole.

`plan_block` is the arithmetic, with no I/O: every slot lies at or after the real time plus
the lead, and at or after the wide limit's `tat` or inside one of its holes; the wide limit's
slots are at least its step apart (whatever the blocks that booked them), each
narrow key's slots at least its step apart and at or after its next free time, and none lies
beyond the horizon, so the bounds of each limit's headroom hold as for single reservations.

The item is kept small: a narrow key whose next free time and gate both lie before `cut` (the
real time less PRUNE_MARGIN_SECONDS) holds nothing a missing key would not (a missing key is
free from 0 and open; every plan reads a next free time through `max(slot, free)` with each slot
at or after its real time, and a gate through `closed > now`), so a block's write removes up to
PRUNE_PER_WRITE such keys, chosen from the item as read (`stale_keys`): the item holds the keys
active within about one of their periods, and the closed ones. The margin covers a planner
whose clock or lead is behind the pruner's. A write that would still grow the item beyond
SAFE_ITEM_BYTES (estimated from its attributes and holes, `item_bytes`) is not made: the call
takes `reserve_all` instead (`PairedItemFull`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from sweeper.errors import LimiterError
from sweeper.limiter.base import Denial, Reason, ScopeState
from sweeper.limiter.items import US

#: The item's attributes for a narrow key: its next free time and its gate's closure.
NEXT_PREFIX = "n#"
CLOSED_PREFIX = "c#"
#: A narrow key is removed from the item once its next free time and gate are this far in the
#: past (beyond any planner's clock skew or lead), and at most this many keys per write.
PRUNE_MARGIN_SECONDS = 1.0
PRUNE_PER_WRITE = 8
#: A write that would grow the item beyond this estimate is not made (DynamoDB's item limit is
#: 400 KB). A number attribute is counted at its largest (21 bytes) beside its name.
SAFE_ITEM_BYTES = 300_000
NUMBER_BYTES = 21
#: The item's own attributes (key, tat, v, gate, reason, expiry), generously.
BASE_ITEM_BYTES = 256
#: The wide limit's holes (intervals of its timeline no slot was booked in, [start, end] in epoch
#: µs) kept on the item, at most this many. Scenario (b) (10 stores) makes a few per second.
MAX_HOLES = 12
HOLES_ATTRIBUTE = "h"
#: A list attribute's own bytes, and each element's beside its number.
LIST_BYTES = 3
ELEMENT_BYTES = 1


class PairedItemFull(LimiterError):
    """The wide limit's item would grow beyond SAFE_ITEM_BYTES: reserve the limits one by one."""


@dataclass(frozen=True, slots=True)
class SharedItem:
    """The wide limit's item as a consumer last saw it (times in epoch µs; 0: none)."""

    version: int = 0
    tat: int = 0
    closed_until: int = 0
    reason: str | None = None
    next_free: Mapping[str, int] = field(default_factory=dict)
    closed: Mapping[str, int] = field(default_factory=dict)
    has_tat: bool = False
    holes: tuple[tuple[int, int], ...] = ()

    @classmethod
    def parse(cls, item: Mapping[str, Any]) -> SharedItem:
        """From DynamoDB's attribute-value form."""

        def num(name: str) -> int:
            return int(item[name]["N"]) if name in item else 0

        return cls(
            version=num("v"),
            tat=num("tat"),
            closed_until=num("closed_until"),
            reason=item.get("reason", {}).get("S"),
            next_free={
                name.removeprefix(NEXT_PREFIX): int(value["N"])
                for name, value in item.items()
                if name.startswith(NEXT_PREFIX)
            },
            closed={
                name.removeprefix(CLOSED_PREFIX): int(value["N"])
                for name, value in item.items()
                if name.startswith(CLOSED_PREFIX)
            },
            has_tat="tat" in item,
            holes=_parse_holes(item.get(HOLES_ATTRIBUTE)),
        )

    def wide_gate(self, wide: str) -> ScopeState:
        """The wide limit's own gate (`wide`, its limiter key) as the item holds it."""
        closed = self.closed_until
        return ScopeState(
            wide,
            self.tat / US if self.has_tat else None,
            closed / US if closed else None,
            self.reason if closed else None,
            None,
        )

    def gate(self, key: str) -> ScopeState:
        """Both gates a paired call of the narrow key `key` is under, as the item holds them:
        closed while the wide limit is (every narrow key is then) or while its own closure
        here lasts (`close_narrow`), until the later of the two. Only this item is consulted:
        a closure kept on the narrow key's own item alone (`close(key)`) is not seen here."""
        closed = max(self.closed_until, self.closed.get(key, 0))
        reason = self.reason if closed == self.closed_until and closed else "throttled"
        return ScopeState(
            key,
            self.next_free.get(key, 0) / US or None,
            closed / US if closed else None,
            reason if closed else None,
            None,
        )


def _parse_holes(value: Mapping[str, Any] | None) -> tuple[tuple[int, int], ...]:
    bounds = [int(element["N"]) for element in (value or {}).get("L", [])]
    return tuple(zip(bounds[::2], bounds[1::2], strict=True))


def holes_value(holes: Sequence[tuple[int, int]]) -> dict[str, Any]:
    """The holes in DynamoDB's attribute-value form (a flat list of bounds)."""
    return {"L": [{"N": str(bound)} for hole in holes for bound in hole]}


def holes_bytes(holes: Sequence[tuple[int, int]]) -> int:
    """The bytes the holes attribute takes (an estimate, never low; 0 when there is none)."""
    if not holes:
        return 0
    return len(HOLES_ATTRIBUTE) + LIST_BYTES + 2 * len(holes) * (NUMBER_BYTES + ELEMENT_BYTES)


def _key_bytes(key: str, item: SharedItem) -> int:
    """The bytes `key`'s attributes take in the item (an estimate, never low)."""
    size = len(key.encode())
    return sum(
        len(prefix) + size + NUMBER_BYTES
        for prefix, held in ((NEXT_PREFIX, item.next_free), (CLOSED_PREFIX, item.closed))
        if key in held
    )


def item_bytes(item: SharedItem) -> int:
    """The item's size as DynamoDB counts it, estimated from its attributes (never low)."""
    keys = set(item.next_free) | set(item.closed)
    return BASE_ITEM_BYTES + holes_bytes(item.holes) + sum(_key_bytes(key, item) for key in keys)


def stale_keys(item: SharedItem, cut: int, keep: set[str], most: int) -> list[str]:
    """Up to `most` narrow keys of `item`, none in `keep`, whose next free time and gate both
    lie at or before `cut` (epoch µs): removing them changes no plan made at or after `cut`."""
    stale = [
        key
        for key in sorted(set(item.next_free) | set(item.closed))
        if key not in keep and item.next_free.get(key, 0) <= cut and item.closed.get(key, 0) <= cut
    ]
    return stale[:most]


def grown_bytes(
    item: SharedItem,
    new_keys: set[str],
    removed: Sequence[str],
    holes: Sequence[tuple[int, int]] | None = None,
) -> int:
    """The item's estimated size after a write that sets `new_keys`' next free times, removes
    the `removed` keys and writes `holes` (None: the item's holes are left as they are)."""
    added = sum(
        len(NEXT_PREFIX) + len(key.encode()) + NUMBER_BYTES
        for key in new_keys
        if key not in item.next_free
    )
    if holes is not None:
        added += holes_bytes(holes) - holes_bytes(item.holes)
    return item_bytes(item) + added - sum(_key_bytes(key, item) for key in removed)


@dataclass(frozen=True, slots=True)
class Want:
    """Slots a batch would use for one narrow key: how many, and that key's spacing (µs)."""

    key: str
    step: int
    count: int


@dataclass(frozen=True, slots=True)
class Block:
    """A planned block: (narrow key, slot µs) in time order, and the item's values after it.

    `asker` is None when the asking key got a slot; else the denial it gets (its key's slots
    are not due within the block, or it is closed), while the others' slots are still taken.
    `holes` are the wide limit's holes after the block (all of them, in time order).
    """

    slots: tuple[tuple[str, int], ...]
    tat: int
    next_free: dict[str, int]
    asker: Denial | None = None
    holes: tuple[tuple[int, int], ...] = ()


def _gate(item: SharedItem, key: str, now: int) -> Denial | None:
    if item.closed_until > now:
        reason: Reason = "auth" if item.reason == "auth" else "throttled"
        return Denial(item.closed_until / US, reason)
    closed = item.closed.get(key, 0)
    if closed > now:
        return Denial(closed / US, "throttled")
    return None


class _WideTimeline:
    """The wide limit's free times as a plan walks them: its holes, then everything from
    `main` on (the `tat`, or the plan's `now` when later). Booking a slot in a hole splits the
    hole a step each side of it; booking one at or after `main` moves `main` a step past it and
    keeps what was skipped as a new hole."""

    def __init__(self, item: SharedItem, step: int, now: int) -> None:
        self.step = step
        self.holes = sorted(item.holes)
        self.start = max(now, item.tat)
        self.main = self.start
        self.tat = item.tat

    def first_free(self, t: int) -> int:
        """The earliest time at or after `t` a wide slot may take."""
        for start, end in self.holes:
            if max(t, start) <= end:
                return max(t, start)
        return max(t, self.main)

    def book(self, t: int) -> None:
        """Take the wide slot at `t` (a time `first_free` gave)."""
        step = self.step
        for i, (start, end) in enumerate(self.holes):
            if start <= t <= end:
                parts = [(start, t - step), (t + step, end)]
                self.holes[i : i + 1] = [(a, b) for a, b in parts if a <= b]
                return
        if t - step >= self.main:
            self.holes.append((self.main, t - step))
        self.main = self.tat = t + step

    def kept(self, real: int) -> tuple[tuple[int, int], ...]:
        """The holes to write: none ending before `real`, at most MAX_HOLES (those that hold
        the most slots; of equals, the later), in time order."""
        live = [(a, b) for a, b in self.holes if b >= real]
        live.sort(key=lambda hole: ((hole[1] - max(hole[0], real)) // self.step, hole[0]))
        return tuple(sorted(live[-MAX_HOLES:]))


def plan_block(
    item: SharedItem,
    wide_step: int,
    wants: Sequence[Want],
    *,
    real: int,
    now: int,
    horizon: int,
    span: int,
    most: int,
) -> Block | Denial:
    """Plan up to `most` slots for the `wants` (the asking key first), all within `span` of
    the block's first slot and within `horizon` of `real` (epoch µs); `now` is the earliest
    slot a reservation can still use (the real time plus the lead).

    In time order, each wide slot (in a hole of the wide limit, or from its `tat` on) goes to
    a key whose next free time has come by then: the asker's, else the one with the most slots
    still wanted, then the one free the longest; when none has, the block moves on to the
    earliest that comes, if that is within the span (of the block's first slot, or for the
    first, of the wide limit's first free time from its `tat`). A Denial: the wide gate is
    closed, the asker's gate is closed, or the wide limit has no slot within the horizon; no
    write is due then.
    """
    if not wants:
        raise ValueError("a block is planned for at least the asking key")
    asker = wants[0].key
    shut = _gate(item, asker, now)
    if shut is not None:
        return shut
    reach = real + horizon
    wide = _WideTimeline(item, wide_step, now)
    earliest = wide.first_free(now)
    if earliest > reach:
        return Denial(max(real, earliest - horizon) / US, "rate")
    steps = {want.key: want.step for want in wants}
    left = {
        want.key: want.count
        for want in wants
        if want.count > 0 and _gate(item, want.key, now) is None
    }
    free = {key: item.next_free.get(key, 0) for key in left}
    # Which due key takes a slot, when several could: not the first of the wants' order. Each
    # batch lists its stores in the producer's order, so every batch would call the same first
    # stores and end on the same last ones, at their 2/s each while the wide limit's slots go
    # unused (measured, docs/decisions.md). The key with the most slots still wanted keeps a
    # batch's records spread over its stores to its end; of those, the one free the longest
    # (whichever batch took its last slot) spreads the batches over the stores. Free times
    # before `idle` count as `idle`: a key pruned from the item (free from 0) and a stale one
    # kept compare alike, so pruning changes no plan.
    idle = real - int(PRUNE_MARGIN_SECONDS * US)
    slots: list[tuple[str, int]] = []
    at = now
    first: int | None = None
    while len(slots) < most:
        ready = {key: wide.first_free(max(at, free[key])) for key, n in left.items() if n > 0}
        if not ready:
            break
        soonest = min(ready.values())
        # A hole lies before the `tat`, so a slot in one is always within the first's bound.
        if soonest > reach or soonest > (wide.start if first is None else first) + span:
            break
        come = [key for key, t in ready.items() if t == soonest]
        key = asker if asker in come else max(come, key=lambda k: (left[k], -max(free[k], idle)))
        slots.append((key, soonest))
        wide.book(soonest)
        first = soonest if first is None else first
        free[key] = soonest + steps[key]
        left[key] -= 1
        at = soonest + wide_step
    given = {key for key, _ in slots}
    denial = None
    if asker not in given:
        due = wide.first_free(max(at, free.get(asker, item.next_free.get(asker, 0))))
        # Ask again when the slot would be the lead away, or when it comes within the horizon.
        again = due - horizon if due > reach else due - (now - real)
        denial = Denial(max(real, again) / US, "rate")
    if not slots:
        assert denial is not None
        return denial
    return Block(tuple(slots), wide.tat, {key: free[key] for key in given}, denial, wide.kept(real))


@runtime_checkable
class PairedSource(Protocol):
    """What reserving two limits in one write needs of a limiter (`DynamoLimiter`)."""

    def reserve_paired(
        self,
        wide: str,
        wide_interval: float,
        wants: list[Want],
        horizon: float,
        span: float,
        most: int,
    ) -> tuple[dict[str, list[float]], Denial | None]: ...

    def close_narrow(self, wide: str, key: str, until: float) -> None: ...

    def paired_states(self, wide: str, keys: Sequence[str]) -> dict[str, ScopeState]: ...

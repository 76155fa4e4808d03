"""Several limits on one call: a slot in each, all usable at the one time the call is sent.

A call held by several limits (2/s per store and 40/s for the app) is sent at one time T, and
must hold, in every one of its limits, a slot at or before T and no more than `spread` before
it: sent later than that after a slot, the call could arrive within the next slot's window, so
the limit's bound (the headroom of `sweeper.config.quota`) would no longer hold.
`reserve_all` takes the slots one limit after another, each no earlier than the latest slot
held so far (`not_before`), starting from a time far enough ahead that every limit's write is
back before it (the limiter's lead, once per limit: else each write's round trip would move an
idle limit's first slot on past the others', and the call would chase its own slots). A slot
that ends up too early for T is given back if it is still its limit's last one, or else spent
without a call, and that limit is asked again from T. A slot is thus only ever used by one
call, at its own time or up to `spread` after it, never early, and no limit's spacing is
broken. A denial (a closed gate, or no slot within the horizon) in any limit gives back what
the others hold and refuses the call.

"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from sweeper.adaptive_rate import Adaptive
from sweeper.limiter.base import Denial, SlotReserver
from sweeper.limiter.leases import LeaseCap

#: How many times the limits are gone over before a call is refused for now: each pass moves
#: the call's time on to a slot some limit had free, so under contention it settles in a few.
MAX_PASSES = 4


@runtime_checkable
class SlotSource(SlotReserver, Protocol):
    """What `reserve_all` needs of a limiter (implemented by `DynamoLimiter`)."""

    def give_back(self, scope: str, slot_at: float, interval: float) -> bool: ...

    @property
    def lead(self) -> float:
        """How long a reservation's write takes to come back (its slowest recent round trip)."""
        ...


@dataclass(frozen=True, slots=True)
class LimitAsk:
    """One limit a call is held by: the key of its limiter item, its slots' spacing and their
    burst tolerance (`Quota.pacing`; 0: spacing only)."""

    key: str
    interval: float
    tolerance: float = 0.0
    #: A rate held in the limit's item (a learned one): `interval` is then not used.
    adaptive: Adaptive | None = None


@dataclass(frozen=True, slots=True)
class CallSlots:
    """A slot in each limit (`slots`, by key), all within `spread` before `send_at`."""

    send_at: float
    slots: dict[str, float]

    @property
    def earliest(self) -> float:
        """The earliest of the call's slots: the call is late once `spread` past it."""
        return min(self.slots.values())


@dataclass(frozen=True, slots=True)
class Spent:
    """A slot taken and not called in: given back, or spent without a call."""

    key: str
    slot_at: float
    given_back: bool


def reserve_all(
    limiter: SlotSource,
    asks: Sequence[LimitAsk],
    horizon: float,
    spread: float,
    now: float,
    spent: list[Spent] | None = None,
) -> CallSlots | Denial:
    """A slot in every limit of `asks` for one call, all within `spread` before its time
    (`now`: epoch seconds, the limiter's clock).

    Slots that could not be used are appended to `spent` (if given), with whether each was
    given back.
    """
    if not asks:
        raise ValueError("a call is held by at least one limit")
    held: dict[str, float] = {}
    by_key = {ask.key: ask for ask in asks}
    send_at = now + limiter.lead * len(asks)

    def let_go(key: str) -> None:
        slot = held.pop(key)
        returned = limiter.give_back(key, slot, by_key[key].interval)
        if spent is not None:
            spent.append(Spent(key, slot, returned))

    for _ in range(MAX_PASSES):
        for ask in asks:
            if ask.key in held and held[ask.key] >= send_at - spread:
                continue  # its slot still fits the call's time
            if ask.key in held:
                let_go(ask.key)
            decision = limiter.reserve(
                ask.key, ask.interval, horizon, 1, ask.adaptive, send_at, tolerance=ask.tolerance
            )
            if isinstance(decision, Denial):
                for key in list(held):
                    let_go(key)
                return decision
            held[ask.key] = decision.slot_at
            send_at = max(send_at, decision.slot_at)
        if all(slot >= send_at - spread for slot in held.values()):
            return CallSlots(send_at, dict(held))
    for key in list(held):
        let_go(key)
    return Denial(send_at, "rate")


@runtime_checkable
class ThrottleNotes(Protocol):
    """What routing a throttle to a wider limit needs of a limiter (`DynamoLimiter`)."""

    def note_throttle(self, scope: str, source: str, within: float) -> bool: ...


@runtime_checkable
class LeaseSource(Protocol):
    """What a call under a concurrency cap needs of a limiter (`DynamoLimiter`)."""

    def leases(self) -> LeaseCap: ...

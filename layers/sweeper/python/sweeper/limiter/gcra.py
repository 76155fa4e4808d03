"""The GCRA reservation writes on a scope's item (`tat`), the unused slot's return, and the hints of
which write to try first (sweeper.limiter.dynamodb's docstring has the algorithm and its cost)."""

from __future__ import annotations

from typing import Any

from sweeper.adaptive_rate import Adaptive
from sweeper.limiter.base import Denial, Grant
from sweeper.limiter.held import HeldRates, RateGuard
from sweeper.limiter.items import ITEM_TTL_SECONDS, MAX_RACES, US, ScopeItems, n, step_us


def _grant(first_us: int, count: int, step_us: int) -> Grant:
    if count == 1:
        return Grant(first_us / US)
    return Grant(first_us / US, count, step_us / US)


class Reservations:
    """A process's reservations of the scopes' slots, and what it last saw of their regimes."""

    def __init__(self, items: ScopeItems, rates: HeldRates) -> None:
        self._items = items
        self._rates = rates
        self._last_tat: dict[str, int] = {}  # per scope: which path to try first (a hint only)
        self._busy_seen: dict[str, bool] = {}  # per scope: was it busy at the last write (a hint)
        # per scope: the last slot this process was granted, and the tat its write left
        self._last_grant: dict[str, tuple[int, int]] = {}

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
    ) -> Grant | Denial:
        """Reserve the next `count` slots of `scope` (fewer if not all fall within `horizon`).

        With `units` each slot weighs that many intervals (a call that costs that many units
        of the rate, sweeper.admission.costs): the next slot is `units` intervals after it, so
        what the call costs is taken in the same write as its slot, never after it.

        With `tolerance` (tau, seconds: the rate's `Quota.pacing().tolerance_seconds`) the first
        slot is `max(tat - tau, now)`: slots that went unused up to tau ago are granted now, a
        burst; a block's later slots keep the interval from its first. 0 is spacing only.

        With `slack` (the rate's `slack_seconds`: the caller may use a slot that long after its
        time) the lead is cut by it: a slot at the time of asking is still usable when the
        answer is back, so an idle scope's first call need not wait for the lead.

        With `not_before` (epoch seconds) no slot is earlier than it: the idle path's "now" is
        moved on to it, so a call that holds a later slot of another limit gets this limit's
        first free slot at or after that one (sweeper.limiter.several).

        Two conditional writes exist: the busy path (the bucket is ahead of now: take the next
        slots, `tat += n * interval`) and the idle path (behind now: the first slot is now, where
        "now" is the real time plus the lead, as with every comparison here).
        Which one to try first is guessed from the last `tat` this process saw and the regime
        its last write found, so that one write is usual in either regime; a wrong guess costs
        one failed write, which returns the item and so corrects the guess. The guess only
        picks the order: it never decides a slot. Every slot granted lies within `horizon`:
        when fewer than `count` do, fewer are taken, and the first slot alone decides a denial.

        With `adaptive`, `interval` is ignored: the spacing is that of the rate held in the item,
        and the write is conditional on the rate's version this process knows, so that no slot
        is taken at a rate another consumer has cut (a stale version costs one failed write,
        which returns the item, and a reservation at the current rate).
        """
        horizon_us = int(horizon * US)
        tau = max(0, int(tolerance * US))
        fits = max(1, count)
        for _ in range(MAX_RACES):
            # "now" is the earliest slot this reservation can still use: the time its answer is
            # back (sweeper.limiter.dynamodb's docstring). The horizon stays counted from the
            # real now.
            real = int(self._items.clock() * US)
            lead = max(0.0, self._items.lead - slack)
            now = real + min(int(lead * US), horizon_us)
            if not_before is not None:
                now = max(now, int(not_before * US))
            reach = real + horizon_us
            guard = self._rates.guard(scope, adaptive, real) if adaptive else None
            step = (guard.step if guard else step_us(interval)) * max(1, units)
            want = max(1, min(fits, horizon_us // step + 1))
            # Busy if the last tat seen is still ahead, or if the last write found the bucket
            # busy: other consumers moved it on since (a backlog several consumers share), which
            # this process cannot see, and a bucket with a backlog stays busy.
            busy_first = self._last_tat.get(scope, 0) > now or self._busy_seen.get(scope, False)
            for busy in (busy_first, not busy_first):
                outcome = (
                    self._busy(scope, step, now, reach, want, guard, tau)
                    if busy
                    else self._idle(scope, step, now, want, guard)
                )
                if isinstance(outcome, Grant):
                    return outcome
                # A failed condition returned the item: remember its tat, maybe refuse.
                tat = int(outcome["tat"]["N"]) if "tat" in outcome else 0
                self._last_tat[scope] = tat
                self._busy_seen[scope] = tat > now
                denial = self._denial(outcome, tat, now, reach, horizon_us, tau)
                if denial is not None:
                    return denial
                if guard and self._rates.learn(scope, outcome) != guard.version:
                    break  # another consumer changed the rate: reserve again at the new one
                if tat > now:  # busy, first slot within reach: take what fits before it ends
                    fits = want = max(1, min(want, (reach - max(tat - tau, now)) // step + 1))
                    if busy:
                        break  # the busy path again, with fewer slots (not the idle path)
        return Denial(self._items.clock() + interval, "rate")  # lost every race: try again shortly

    def _busy(
        self,
        scope: str,
        step: int,
        now: int,
        reach: int,
        want: int,
        guard: RateGuard | None,
        tau: int,
    ) -> Grant | dict[str, Any]:
        update, condition, values = self._rates.guarded(
            "SET tat = tat + :i, expires_at = :ttl",
            "tat > :now AND tat <= :h AND "
            "(attribute_not_exists(closed_until) OR closed_until <= :now)",
            {
                ":i": n(want * step),
                ":now": n(now),
                # the last of the slots taken, the first at tat - tau or later, lies within the
                # horizon (`reach`: epoch µs); later than that only by the lead, as when idle
                ":h": n(reach - (want - 1) * step + tau),
                ":ttl": n(now // US + ITEM_TTL_SECONDS),
            },
            guard,
        )
        result = self._items.update(scope, update, condition, values, returns="UPDATED_NEW")
        if isinstance(result, int):
            self._last_tat[scope] = result
            self._busy_seen[scope] = True
            self._rates.settle(scope, guard)
            first = max(result - want * step - tau, now)
            self._last_grant[scope] = (first + (want - 1) * step, result)
            return _grant(first, want, step)
        return result

    def _idle(
        self, scope: str, step: int, now: int, want: int, guard: RateGuard | None
    ) -> Grant | dict[str, Any]:
        update, condition, values = self._rates.guarded(
            "SET tat = :t, expires_at = :ttl",
            "(attribute_not_exists(tat) OR tat <= :now) AND "
            "(attribute_not_exists(closed_until) OR closed_until <= :now)",
            {
                ":t": n(now + want * step),
                ":now": n(now),
                ":ttl": n(now // US + ITEM_TTL_SECONDS),
            },
            guard,
        )
        result = self._items.update(scope, update, condition, values, returns="NONE")
        if isinstance(result, int):
            self._last_tat[scope] = now + want * step
            self._busy_seen[scope] = False
            self._rates.settle(scope, guard)
            self._last_grant[scope] = (now + (want - 1) * step, now + want * step)
            return _grant(now, want, step)
        return result

    @staticmethod
    def _denial(
        item: dict[str, Any], tat: int, now: int, reach: int, horizon: int, tau: int
    ) -> Denial | None:
        """A refusal, if the returned item (its `tat`, epoch µs) closes the gate or holds no
        slot before `reach` (epoch µs: its next slot is `tat - tau`); `horizon` (µs) says when
        its slots come within reach."""
        closed = int(item["closed_until"]["N"]) if "closed_until" in item else 0
        if closed > now:
            reason = item.get("reason", {}).get("S", "throttled")
            return Denial(closed / US, "auth" if reason == "auth" else "throttled")
        if tat - tau > reach:
            return Denial((tat - tau - horizon) / US, "rate")
        return None

    def give_back(self, scope: str, slot_at: float, interval: float) -> bool:
        """Return an unused slot, if it is still the scope's last one taken: `tat` goes back an
        interval (to the slot itself without a tolerance), so the next reservation gets it at
        its own time (never earlier). One conditional write; when another slot was taken since,
        nothing changes and the slot is spent without a call. Returns whether it was given
        back."""
        slot_us = int(slot_at * US)
        step = step_us(interval)
        after = self._last_tat.get(scope)
        # without a tolerance the tat after a slot is the slot's next; with one, the tat the
        # slot's write left, if it is still the last this process knows of
        if after is None or (
            after != slot_us + step and self._last_grant.get(scope) != (slot_us, after)
        ):
            return False  # not ours to return (or not known to be): spent without a call
        result = self._items.update(
            scope,
            "SET tat = :slot",
            "tat = :after",
            {":slot": n(after - step), ":after": n(after)},
            returns="NONE",
        )
        if isinstance(result, int):
            self._last_tat[scope] = after - step
            self._last_grant.pop(scope, None)
            return True
        if result:
            self._last_tat[scope] = int(result["tat"]["N"]) if "tat" in result else 0
        return False

    def refund(
        self, scope: str, units: int, interval: float, adaptive: Adaptive | None = None
    ) -> bool:
        """Give back `units` intervals a call reserved and the vendor did not charge (its
        actual cost was lower): `tat` moves back by them, never before now, so every consumer's
        next slot comes that much earlier. A scope already idle (`tat` at or before now) has
        nothing ahead to give back. One write, two when the refund reaches now. Returns whether
        anything was given back."""
        if units <= 0:
            return False
        for _ in range(MAX_RACES):
            real = int(self._items.clock() * US)
            guard = self._rates.guard(scope, adaptive, real) if adaptive else None
            if guard is not None and guard.version == 0:
                return False  # a rate this process has not reserved at: nothing of it to give
            back = units * (guard.step if guard else step_us(interval))
            result = self._items.update(
                scope,
                "SET tat = tat - :d",
                "tat >= :floor",
                {":d": n(back), ":floor": n(real + back)},
                returns="UPDATED_NEW",
            )
            if isinstance(result, int):
                self._last_tat[scope] = result
                self._last_grant.pop(scope, None)
                return True
            if "tat" not in result:
                return False  # no slot taken yet: nothing to give back
            seen = int(result["tat"]["N"])
            if seen <= real:
                return False  # idle: the units are back already
            # less than the refund ahead of now: the scope is idle from now
            result = self._items.update(
                scope, "SET tat = :now", "tat = :seen", {":now": n(real), ":seen": n(seen)}, "NONE"
            )
            if isinstance(result, int):
                self._last_tat[scope] = real
                self._last_grant.pop(scope, None)
                return True
        return False

    def hint(self, scope: str, item: dict[str, Any], asked: float) -> None:
        """A read of a scope's item (a look at its gate) is the freshest word this process has
        of the scope's regime, fresher than its own last write (other consumers write between
        them): remember its tat for `reserve`'s guess of which write to try first. A hint
        only, as the writes' are: it never decides a slot. Measured in scenario (d) (ten
        scopes at 10/s, four environments): half the failed reservations were an idle write
        tried on a scope that another consumer had made busy since this one's last write,
        0.4-1.3 s before."""
        self._rates.seen(scope, item)  # and of its rate, when another consumer changed it
        if "tat" not in item:
            return
        tat = int(item["tat"]["N"])
        self._last_tat[scope] = tat
        self._busy_seen[scope] = tat > int((asked + self._items.lead) * US)

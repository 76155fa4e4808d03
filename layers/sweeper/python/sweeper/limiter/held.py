"""The shared rate a scope's item holds: adaptive (cut on a 429, climbing back) or held as a vendor
stated it. Attributes `ar`, `ar_at`, `ar_v`, `ar_peak`, `ar_cut_at` (the arithmetic is
`sweeper.adaptive_rate`'s); a reservation at it is conditional on `ar_v`, the version this
process knows, so that no slot is taken at a rate another consumer has changed. Beside a held
rate, `ar_stated`: what the vendor's own statement allowed when the rate was written (on the
same write), so that a reader can tell a vendor's lowering from a shared quota's pace that
moved with the others' spend (the rate held, below it).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sweeper.adaptive_rate import Adaptive
from sweeper.limiter.items import ITEM_TTL_SECONDS, MAX_RACES, US, ScopeItems, n

#: The adaptive rate is stored in thousandths of a call per second.
MILLI = 1000
#: The end of a held rate's write: the vendor's statement recorded beside it, or none kept.
WITH_STATED = ", ar_stated = :stated REMOVE ar_peak, ar_cut_at"
WITHOUT_STATED = " REMOVE ar_peak, ar_cut_at, ar_stated"


@dataclass(frozen=True, slots=True)
class _KnownRate:
    """The adaptive rate of a scope as its item held it when this process last saw it."""

    rate: float  # calls per second
    since: int  # set at, epoch µs
    version: int
    peak: float | None  # the rate that drew the last 429 (None: no cut yet)
    stated: float | None = None  # what the vendor's statement allowed (None: not recorded)


@dataclass(frozen=True, slots=True)
class HeldRate:
    """A scope's shared rate as this process last saw its item hold it: calls per second, and
    the rate's version there (it grows with every change, by any consumer), and what the
    vendor's own statement allowed when it was written (None: that write recorded none); the
    rate is below it when a shared quota's pace, the others' spend, held it lower."""

    rate: float
    version: int
    stated: float | None = None


@dataclass(frozen=True, slots=True)
class RateGuard:
    """A reservation at the adaptive rate: its spacing (µs) and the rate's known version."""

    step: int
    version: int
    floor: float
    now: int


class HeldRates:
    """The scopes' shared rates as this process last saw them, and the writes that change them."""

    def __init__(self, items: ScopeItems) -> None:
        self._items = items
        self._rates: dict[str, _KnownRate] = {}  # per scope, the adaptive rate last seen

    def guard(self, scope: str, adaptive: Adaptive, now: int) -> RateGuard:
        """The spacing at the scope's shared rate as this process knows it, and its version."""
        known = self._rates.get(scope)
        if known is None:  # not seen yet: the first reservation ever sets the floor
            return RateGuard(max(1, round(US / adaptive.floor)), 0, adaptive.floor, now)
        current = adaptive.rate_at(known.rate, known.since / US, now / US, known.peak)
        return RateGuard(max(1, round(US / current)), known.version, adaptive.floor, now)

    @staticmethod
    def guarded(
        update: str, condition: str, values: dict[str, Any], guard: RateGuard | None
    ) -> tuple[str, str, dict[str, Any]]:
        """A reservation's write, made conditional on the rate's version (or setting it)."""
        if guard is None:
            return update, condition, values
        if guard.version == 0:  # the first to use the scope adaptively sets its starting rate
            return (
                update + ", ar = :ar, ar_at = :ar_at, ar_v = :ar_v",
                condition + " AND attribute_not_exists(ar_v)",
                {
                    **values,
                    ":ar": n(guard.floor * MILLI),
                    ":ar_at": n(guard.now),
                    ":ar_v": n(1),
                },
            )
        return update, condition + " AND ar_v = :ar_v", {**values, ":ar_v": n(guard.version)}

    def held(self, scope: str) -> HeldRate | None:
        """The scope's rate and version as this process last saw them (no request); None
        before it has seen any."""
        known = self._rates.get(scope)
        return None if known is None else HeldRate(known.rate, known.version, known.stated)

    def settle(self, scope: str, guard: RateGuard | None) -> None:
        """A guarded reservation was written: a first one set the scope's rate."""
        if guard is not None and guard.version == 0:
            self._rates[scope] = _KnownRate(guard.floor, guard.now, 1, None)

    def learn(self, scope: str, item: dict[str, Any]) -> int:
        """Remember the rate an item holds; returns its version (0: none yet)."""
        if "ar_v" not in item:
            self._rates.pop(scope, None)
            return 0
        version = int(item["ar_v"]["N"])
        peak = int(item["ar_peak"]["N"]) / MILLI if "ar_peak" in item else None
        rate = int(item["ar"]["N"]) / MILLI
        stated = int(item["ar_stated"]["N"]) / MILLI if "ar_stated" in item else None
        self._rates[scope] = _KnownRate(rate, int(item["ar_at"]["N"]), version, peak, stated)
        return version

    def seen(self, scope: str, item: dict[str, Any]) -> None:
        """A read of the scope's item (a look at its gate): a rate newer than the one this
        process knows is learned, so that a lowering another consumer held is known here
        before this process's next write (sweeper.admission.learned drops the slots banked
        at the old rate). An item no newer changes nothing."""
        known = self._rates.get(scope)
        if "ar_v" in item and (known is None or int(item["ar_v"]["N"]) > known.version):
            self.learn(scope, item)

    def cut(self, scope: str, adaptive: Adaptive) -> float:
        """A 429 arrived: cut the scope's shared rate (once per cooldown); returns the rate now.

        Conditional on the version this process knows and on no cut within the cooldown: of
        several consumers throttled by one overshoot, one cuts; the others learn the new rate.
        The rate it cut from is kept as the peak the climb back slows down near.
        """
        for _ in range(MAX_RACES):
            now = int(self._items.clock() * US)
            known = self._rates.get(scope) or _KnownRate(adaptive.floor, now, 0, None)
            version = known.version
            peak = adaptive.rate_at(known.rate, known.since / US, now / US, known.peak)
            new = adaptive.after_cut(peak)
            failed = self._items.update(
                scope,
                "SET ar = :ar, ar_at = :now, ar_v = :next, ar_cut_at = :now, ar_peak = :peak, "
                "expires_at = :ttl",
                ("attribute_not_exists(ar_v)" if version == 0 else "ar_v = :v")
                + " AND (attribute_not_exists(ar_cut_at) OR ar_cut_at <= :recent)",
                {
                    ":ar": n(new * MILLI),
                    ":peak": n(peak * MILLI),
                    ":now": n(now),
                    ":next": n(version + 1),
                    ":recent": n(now - adaptive.cooldown * US),
                    ":ttl": n(now // US + ITEM_TTL_SECONDS),
                    **({":v": n(version)} if version else {}),
                },
                returns="NONE",
            )
            if isinstance(failed, dict):  # the condition failed: the item as it is
                self.learn(scope, failed)
                cut_at = int(failed["ar_cut_at"]["N"]) if "ar_cut_at" in failed else 0
                if cut_at > now - adaptive.cooldown * US:
                    # cut by another consumer for this same overshoot: follow it
                    learned = self._rates.get(scope)
                    return learned.rate if learned else adaptive.floor
                continue  # a stale version: cut the current rate instead
            self._rates[scope] = _KnownRate(
                int(new * MILLI) / MILLI, now, version + 1, int(peak * MILLI) / MILLI
            )
            return new
        last = self._rates.get(scope)
        return last.rate if last else adaptive.floor

    def hold(
        self,
        scope: str,
        rate: float,
        *,
        unset_only: bool = False,
        within: float = 0.0,
        only_from: float | None = None,
        stated: float | None = None,
    ) -> bool:
        """Hold `rate` (calls per second, a vendor's statement: sweeper.admission.learned) as
        the scope's shared rate; every consumer reserves at it from its next reservation (its
        write, conditional on the version it knew, fails once and learns it). `stated`, what
        the vendor's statement alone allows (a shared quota's pace may be lower), rides on
        the same write (None: none recorded, and none of an earlier write kept). With
        `unset_only`, only when the scope holds no rate yet; with `only_from`, only while it
        holds that rate (a start no answer has moved yet: the write is conditional on the
        version). No write when this process knows the scope at that rate already (within a
        `within` share). Its next slot moves to the new interval after the last. True when it
        changed the rate."""
        for _ in range(MAX_RACES):
            known = self._rates.get(scope)
            if known is not None and (unset_only or abs(known.rate - rate) <= within * rate):
                return False
            moved = known is not None and round(known.rate * MILLI) != int((only_from or 0) * MILLI)
            if only_from is not None and moved:
                return False  # moved from the start already (an answer stated a rate)
            now = int(self._items.clock() * US)
            version = 0 if known is None else known.version
            # the next slot is the new interval after the last, not the old one: later when
            # slowed down, earlier when sped up (a scope started at the floor)
            shift = 0 if known is None else round(US / rate) - round(US / known.rate)
            failed = self._items.update(
                scope,
                "SET ar = :ar, ar_at = :now, ar_v = :next, expires_at = :ttl, "
                "tat = if_not_exists(tat, :zero) + :shift"
                + (WITHOUT_STATED if stated is None else WITH_STATED),
                "attribute_not_exists(ar_v)" if version == 0 else "ar_v = :v",
                {
                    **({} if stated is None else {":stated": n(stated * MILLI)}),
                    ":ar": n(rate * MILLI),
                    ":now": n(now),
                    ":next": n(version + 1),
                    ":ttl": n(now // US + ITEM_TTL_SECONDS),
                    ":zero": n(0),
                    ":shift": n(shift),
                    **({":v": n(version)} if version else {}),
                },
                returns="NONE",
            )
            if isinstance(failed, dict):  # another consumer changed it: learn, then decide
                self.learn(scope, failed)
                continue
            said = None if stated is None else int(stated * MILLI) / MILLI
            self._rates[scope] = _KnownRate(int(rate * MILLI) / MILLI, now, version + 1, None, said)
            return True
        return False  # lost every race: other consumers are writing the rate meanwhile

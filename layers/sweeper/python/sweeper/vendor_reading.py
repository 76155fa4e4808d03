"""What a vendor said of its limits in one answer, as one value (`VendorReading`).

Every number in a reading has been checked: finite, not negative, within a bound no real
vendor reaches. A source that sent something else contributes nothing, and says so in
`diagnostics`: short fixed phrases naming the field and what was wrong with it, never the
field's value or the body (they may hold an account's identifiers).

It imports nothing of sweeper (as `sweeper.adaptive_rate`), so that `sweeper.models` carries a
reading on an `ActionResult`; `sweeper.vendor_limits` reads one from an answer.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Final

#: The largest count (quota, remaining, used, a cost) a reading keeps; larger is nonsense.
MAX_COUNT: Final = 1_000_000_000
#: The longest window or wait a reading keeps: a month (Salesforce's day, a monthly quota).
MAX_SECONDS: Final = 31 * 86_400.0
#: The longest a vendor's stated wait (a Retry-After, a reset) closes a gate: a later one is
#: read as this. A vendor's window is at most an hour (GitHub's); a longer throttle is asked
#: again once an hour (one call), and a wrong clock or a buggy answer cannot hold a scope for
#: a day, or for good.
MAX_WAIT_SECONDS: Final = 3600.0
#: The longest name (a policy's, a resource's) a reading keeps.
MAX_NAME_CHARS: Final = 64


@dataclass(frozen=True, slots=True)
class LimitReading:
    """One limit as the vendor stated it: `quota` units per `window_seconds`, `remaining` of
    them now, the window resetting in `reset_seconds`. Any field may be unknown (None).

    `name` is the vendor's policy name (IETF), resource (GitHub's `x-ratelimit-resource`) or
    the name the configuration gave the source; `unit` is the IETF `qu` when not requests.
    """

    name: str
    quota: int | None = None
    window_seconds: float | None = None
    remaining: int | None = None
    reset_seconds: float | None = None
    unit: str | None = None

    @property
    def used(self) -> int | None:
        """Units spent in the window so far, when both quota and remaining are known."""
        if self.quota is None or self.remaining is None:
            return None
        return max(0, self.quota - self.remaining)


@dataclass(frozen=True, slots=True)
class BucketReading:
    """A points bucket (Shopify's `throttleStatus`): its `level` now, `maximum`, and the
    points it regains per second (`restore_rate`)."""

    level: float | None = None
    maximum: float | None = None
    restore_rate: float | None = None


@dataclass(frozen=True, slots=True)
class CostReading:
    """What one call cost: what was asked for (`requested`), what was charged (`actual`),
    and the bucket it was charged to, when the answer says."""

    requested: float | None = None
    actual: float | None = None
    bucket: BucketReading | None = None


@dataclass(frozen=True, slots=True)
class VendorReading:
    """Everything one answer taught: its limits, its cost, and why anything was left aside."""

    limits: tuple[LimitReading, ...] = ()
    cost: CostReading | None = None
    diagnostics: tuple[str, ...] = ()

    @property
    def learned(self) -> bool:
        """Whether the answer taught anything at all."""
        return bool(self.limits) or self.cost is not None

    def limit(self, name: str) -> LimitReading | None:
        """The limit the vendor calls `name`, if it spoke of one."""
        return next((limit for limit in self.limits if limit.name == name), None)

    def merged(self, other: VendorReading) -> VendorReading:
        """This reading and another's of the same answer (another source), side by side."""
        return VendorReading(
            self.limits + other.limits,
            self.cost if other.cost is None else other.cost,
            self.diagnostics + other.diagnostics,
        )


NOTHING: Final = VendorReading()


def _number(value: object, largest: float) -> float | None:
    """A JSON or header number in [0, largest] as a float; None for anything else (a boolean,
    NaN, an infinity, an integer too large for a float)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if isinstance(value, int) and not 0 <= value <= largest:
        return None  # before float(): 10**400 has no float
    number = float(value)
    return number if math.isfinite(number) and 0 <= number <= largest else None


def count(value: object) -> int | None:
    """A count as a reading keeps it: a whole number in [0, MAX_COUNT], else None. A number
    with a zero fraction (`100.0`) is whole."""
    number = _number(value, MAX_COUNT)
    return None if number is None or not number.is_integer() else int(number)


def amount(value: object) -> float | None:
    """A number that may have a fraction (a cost, a restore rate), in [0, MAX_COUNT]."""
    return _number(value, MAX_COUNT)


def seconds(value: object) -> float | None:
    """A duration in [0, MAX_SECONDS], else None."""
    return _number(value, MAX_SECONDS)


def name(value: object) -> str | None:
    """A short printable ASCII name (a policy, a resource), else None."""
    if not isinstance(value, str) or not 0 < len(value) <= MAX_NAME_CHARS:
        return None
    return value if value.isascii() and value.isprintable() else None

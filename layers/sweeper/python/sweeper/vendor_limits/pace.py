"""The arithmetic a limiter needs from what a vendor said: pure functions of numbers.

A reading may only ever lower a pace. Every function here answers at most the rate it was
told (`ceiling`), and a rate it derives from a reading follows that reading at once: nothing
is remembered from the answer before, so a vendor that lowers its limit is followed from its
next answer, and one that raises it is followed no further than the ceiling.

Rates are units (calls, or points for a cost) per second.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from sweeper.vendor_reading import BucketReading, LimitReading

BudgetWindow = Literal["fixed", "rolling"]


@dataclass(frozen=True, slots=True)
class LearnedPace:
    """The rate to pace at, and how long to wait first (the window is spent until its reset)."""

    rate_per_second: float
    wait_seconds: float = 0.0


def learned_pace(
    ceiling_per_second: float | None,
    reading: LimitReading,
    told_window_seconds: float | None = None,
) -> LearnedPace | None:
    """The rate a limit is paced at once the vendor has stated it.

    Rule: the steady rate is the lower of the ceiling (a told quota, if any) and the stated
    `quota / window` (the window as stated, else the told one), so a lowering applies at once
    and a raise never passes the ceiling. Until the window resets the pace is also at most
    `remaining / reset`, what is left spread over the time left; with `remaining = 0` and a
    reset stated the window is spent: wait the reset, then go on at the steady rate. Without
    any rate (no ceiling, no quota, no reset) there is nothing to pace by: None. A rate of 0
    after a wait means the answer said only when its window turns.
    """
    window = reading.window_seconds or told_window_seconds
    stated = None if reading.quota is None or not window else reading.quota / window
    steady = [rate for rate in (ceiling_per_second, stated) if rate is not None]
    remaining, reset = reading.remaining, reading.reset_seconds
    if remaining == 0 and reset is not None:
        return LearnedPace(min(steady, default=0.0), reset)
    if remaining is not None and reset:
        return LearnedPace(min([*steady, remaining / reset]))
    return LearnedPace(min(steady)) if steady else None


def bucket_pace(ceiling_per_second: float | None, bucket: BucketReading) -> float | None:
    """The steady rate of a points bucket (Shopify's `throttleStatus`): what it restores a
    second, never above the ceiling; None when the answer states no restore rate."""
    if not bucket.restore_rate:
        return None
    if ceiling_per_second is None:
        return bucket.restore_rate
    return min(ceiling_per_second, bucket.restore_rate)


@dataclass(frozen=True, slots=True)
class Share:
    """A quota shared with others, as one answer shows it: what sweeper and the others spent
    in the window so far, what sweeper may still spend in it, and the pace to spend that."""

    own_spent: int
    others_spent: int
    allowance: float
    rate_per_second: float


def shared_pace(
    *,
    quota: int,
    window_seconds: float,
    remaining: int,
    reset_seconds: float,
    own_spent: int,
    reserve: float,
    ceiling_per_second: float | None = None,
) -> Share:
    """What sweeper may spend of a quota others spend too, keeping `reserve` untouched.

    Rule: the vendor counts `quota - remaining` spent this window; what sweeper did not spend
    of it, the others did (`others = max(0, quota - remaining - own_spent)`). The others are
    expected to go on at the rate they spent so far (`others / elapsed`, elapsed being
    `window - reset`), so of what remains sweeper may take
    `allowance = max(0, remaining - reserve - others' expected spend until the reset)`,
    spread evenly until the reset: `rate = allowance / reset`, never above the ceiling.
    A reset of 0 (the window turns now) gives the steady pace of a fresh window:
    `(quota - reserve - others' rate x window) / window`.
    """
    remaining = min(max(remaining, 0), quota)
    others = max(0, quota - remaining - own_spent)
    elapsed = max(window_seconds - reset_seconds, 0.0)
    others_rate = others / elapsed if elapsed > 0 else 0.0
    if reset_seconds > 0:
        allowance = max(0.0, remaining - reserve - others_rate * reset_seconds)
        rate = allowance / reset_seconds
    else:
        allowance = max(0.0, quota - reserve - others_rate * window_seconds)
        rate = allowance / window_seconds
    if ceiling_per_second is not None:
        rate = min(rate, ceiling_per_second)
    return Share(own_spent, others, allowance, rate)


def window_start(now_epoch: float, window_seconds: float, offset_seconds: float = 0.0) -> float:
    """The start of the fixed window holding `now_epoch`: windows begin at whole multiples of
    their length from the epoch, shifted by `offset_seconds` (a day that starts at 00:00 UTC has
    offset 0; one that starts at 08:00 UTC, 28,800)."""
    return (
        math.floor((now_epoch - offset_seconds) / window_seconds) * window_seconds + offset_seconds
    )


def budget_pace(
    *,
    budget: int,
    reserve: float,
    spent: int,
    own_spent: int,
    window_seconds: float,
    seconds_left: float,
    kind: BudgetWindow,
) -> Share:
    """The even pace of a budget per window (a day, a rolling 24 hours), keeping `reserve`.

    Rules. A fixed window (it resets at a known time, `seconds_left` from now) is a shared
    quota whose reset is that time: `shared_pace` with `remaining = budget - spent`, so what
    is left, less the reserve and the others' expected spend, is spread evenly over the time
    left. A rolling window has no reset: each call leaves it `window` after it was made, so
    the even pace that keeps the window's sum at `budget - reserve` is that amount, less what
    the others spend in a window, divided by the window:
    `rate = max(0, budget - reserve - others) / window`, `others = max(0, spent - own_spent)`.
    """
    if kind == "fixed":
        return shared_pace(
            quota=budget,
            window_seconds=window_seconds,
            remaining=budget - spent,
            reset_seconds=seconds_left,
            own_spent=own_spent,
            reserve=reserve,
        )
    others = max(0, spent - own_spent)
    allowance = max(0.0, budget - reserve - others)
    return Share(own_spent, others, allowance, allowance / window_seconds)


@dataclass(frozen=True, slots=True)
class Drain:
    """When a backlog drains under a budget: within the current window or not, and after how
    long (None: never, the others leave sweeper nothing)."""

    within_window: bool
    seconds: float | None


def budget_drain(
    *,
    backlog: int,
    budget: int,
    reserve: float,
    others_per_window: float,
    window_seconds: float,
    allowance_now: float,
    seconds_left: float,
) -> Drain:
    """When `backlog` calls are done, paced by the budget (for `sweeper plan`).

    Rule: this window sweeper may still make `allowance_now` calls, spread evenly over the
    `seconds_left` of it; each later window `per_window = budget - reserve - others` calls,
    spread evenly over the window. A backlog within `allowance_now` drains at
    `backlog / allowance_now` of the time left; a larger one takes the rest of this window,
    the whole windows it fills, and the share of the last one it needs. With nothing left
    per window for sweeper, a backlog past this window's allowance never drains.
    """
    if backlog <= 0:
        return Drain(True, 0.0)
    if backlog <= allowance_now:
        return Drain(True, seconds_left * backlog / allowance_now)
    per_window = budget - reserve - others_per_window
    if per_window <= 0:
        return Drain(False, None)
    later = (backlog - allowance_now) / per_window  # windows after this one, in fractions
    return Drain(False, seconds_left + later * window_seconds)

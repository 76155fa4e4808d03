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

from sweeper.vendor_reading import BucketReading, LimitReading


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


def window_start(now_epoch: float, window_seconds: float, offset_seconds: float = 0.0) -> float:
    """The start of the fixed window holding `now_epoch`: windows begin at whole multiples of
    their length from the epoch, shifted by `offset_seconds` (a day that starts at 00:00 UTC has
    offset 0; one that starts at 08:00 UTC, 28,800)."""
    return (
        math.floor((now_epoch - offset_seconds) / window_seconds) * window_seconds + offset_seconds
    )

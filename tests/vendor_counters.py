"""The vendors' counters, each modelled from its definition: a sliding window log, a fixed window
counter with any offset of the vendor's clock, a GCRA bucket as nginx's limit_req keeps it. Each
returns the indices (in arrival order) of the arrivals it refuses."""

from __future__ import annotations

import bisect
import math

from sweeper.config import Quota
from sweeper.pacing_rule import US, Pacing, step_us


def refused_by_sliding_window(arrivals: list[float], limit: int, period: float) -> list[int]:
    """Arrivals refused by a sliding window log: more than `limit` accepted within `period`."""
    accepted: list[float] = []
    refused = []
    for index, at in enumerate(sorted(arrivals)):
        # accepted calls in (at - period, at]
        inside = len(accepted) - bisect.bisect_right(accepted, at - period)
        if inside >= limit:
            refused.append(index)
        else:
            accepted.append(at)
    return refused


def refused_by_fixed_window(
    arrivals: list[float], limit: int, period: float, offset: float
) -> list[int]:
    """Arrivals refused by a fixed window whose boundaries are at `offset + k * period`."""
    counts: dict[int, int] = {}
    refused = []
    for index, at in enumerate(sorted(arrivals)):
        window = math.floor((at - offset) / period)
        if counts.get(window, 0) >= limit:
            refused.append(index)
        else:
            counts[window] = counts.get(window, 0) + 1
    return refused


def refused_by_bucket(arrivals: list[float], rate: float, capacity: int) -> list[int]:
    """Arrivals refused by a bucket of `capacity` calls refilled at `rate` per second (as
    nginx's limit_req with burst = capacity - 1: a refused call does not fill it)."""
    excess = 0.0  # calls in the bucket beyond the one being let through
    last: float | None = None
    refused = []
    for index, at in enumerate(sorted(arrivals)):
        drained = 0.0 if last is None else rate * (at - last)
        candidate = max(0.0, excess - drained + 1.0) if last is not None else 0.0
        if candidate > capacity - 1 + 1e-9:
            refused.append(index)
            continue
        excess, last = candidate, at
    return refused


def refused(quota: Quota, arrivals: list[float], offset: float) -> list[int]:
    if quota.algorithm == "sliding_window":
        return refused_by_sliding_window(arrivals, quota.limit, quota.period_seconds)
    if quota.algorithm == "fixed_window":
        return refused_by_fixed_window(arrivals, quota.limit, quota.period_seconds, offset)
    return refused_by_bucket(arrivals, quota.limit / quota.period_seconds, quota.capacity)


def burst_calls(pacing: Pacing) -> int:
    """How many calls beyond the first the limiter grants an idle scope at once at `pacing`:
    its tolerance in whole slots (GCRA's tau over the emission interval)."""
    return int(pacing.tolerance_seconds * US + 0.5) // step_us(pacing.interval_seconds)

"""The pacing rule: from how a vendor counts, the spacing of sweeper's slots and their burst.

sweeper's limiter is a GCRA with emission interval I and burst tolerance tau: a reservation at
`now` gets the slot `max(tat - tau, now)` and moves `tat` to `max(tat, now) + I`, so any k + 1
of its slots, whoever took them and in whatever order, span at least `k * I - tau` (the GCRA's
own guarantee; tau = 0 is spacing). A call reaches the vendor between 0 and the arrival spread
`a` after its slot (the rate's slack, the consumer's late-slot tolerance and the arrival
jitter: `Quota.arrival_budget_seconds`), so any k + 1 arrivals span at least
`k * I - (tau + a)`: the jitter spends tolerance just as the burst does. Each rule below is the
largest tau for which no arrival stream of that form is refused; both are exact (one
microsecond more and some stream is refused: tests/unit/test_pacing_rule.py).

- **Window of N calls per T** (sliding, or fixed with boundaries sweeper does not know):
  k + 1 arrivals fit in a window of length T only if `k * I - (tau + a) < T`, so at most
  `ceil((T + tau + a) / I)` of them do, which is at most N exactly when
  `tau <= N * I - T - a`. In calls per second: `rate * T + burst <= N - rate * a`, the burst
  being `tau / I` calls beyond the first and `rate * a` the jitter's share. A window's burst
  is paid call for call in rate: a burst of k calls leaves the headroom
  `T (N - k) / (N (T + a))` (`window_headroom`).
- **Bucket of capacity B refilled at R = N / T** (nginx's `limit_req` with burst = B - 1, a
  GCRA of interval 1/R and tolerance (B - 1)/R): it refuses none exactly when any k + 1
  arrivals span at least `k / R - (B - 1) / R` for every k, which binds only for k >= B. With
  `I >= 1/R` (sweeper never paces above the refill rate: at most MAX_BUCKET_HEADROOM of it)
  the worst k is B, so `tau <= B * I - 1/R - a`: a burst of at most `B - 1` calls less the
  jitter's share. A burst of k calls leaves the headroom `(B - k) / (1 + a R)`
  (`bucket_headroom`).

Everything is in whole microseconds, as the limiter keeps its item (`step_us`), and each
tolerance is rounded down, so the rounding never adds to it. Pure arithmetic: this module
imports nothing of sweeper, so the policy models and the limiter may both use it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

US = 1_000_000
#: A bucket kept exactly full would be refused at the first difference between the two clocks'
#: rates or the vendor's whole-millisecond arithmetic: sweeper uses at most this share of a
#: bucket's refill rate, however large the bucket, so the bucket drains a little between calls.
MAX_BUCKET_HEADROOM = 0.99
#: Taken off every derived tolerance: the floating-point error of the figures it comes from.
ROUNDING_MARGIN_US = 1


def step_us(interval: float) -> int:
    """The emission interval in whole microseconds, as the limiter spaces its slots."""
    return max(1, round(interval * US))


@dataclass(frozen=True, slots=True)
class Pacing:
    """How the limiter paces one rate: a slot every `interval_seconds`, and up to
    `tolerance_seconds` earlier than that when earlier slots went unused (the GCRA's tau)."""

    interval_seconds: float
    tolerance_seconds: float = 0.0


def window_tolerance(limit: int, period: float, interval: float, spread: float) -> float:
    """The most tau for N = `limit` calls in any window of `period` seconds, slots every
    `interval` arriving up to `spread` after them: `N * I - T - a`, none if negative."""
    room = limit * step_us(interval) - period * US - spread * US
    return _tolerance(room)


def bucket_tolerance(
    limit: int, period: float, capacity: int, interval: float, spread: float
) -> float:
    """The most tau for a bucket of `capacity` refilled at `limit / period`, slots every
    `interval` (at least 1/R apart) arriving up to `spread` after them: `B * I - 1/R - a`."""
    step = step_us(interval)
    refill = period * US / limit
    if step < refill:
        return 0.0  # paced above the refill rate: no tolerance is safe (the headroom's to fix)
    return _tolerance(capacity * step - refill - spread * US)


def window_headroom(limit: int, period: float, spread: float, burst: int = 0) -> float:
    """The largest share of a window's rate that leaves room for `burst` calls: at most
    `T (N - burst) / (N (T + a))`, rounded down to thousandths."""
    exact = period / (period + spread) * ((limit - burst) / limit)
    return math.floor(exact * 1000) / 1000


def bucket_headroom(
    limit: int, period: float, capacity: int, spread: float, burst: int = 0
) -> float:
    """The largest share of a bucket's refill rate that leaves room for `burst` calls: the
    bucket's tolerance less the burst absorbs what it can of the spread, the rest is paid in
    rate (`(B - k) / (1 + a R)`, at most MAX_BUCKET_HEADROOM), rounded down to thousandths."""
    rate = limit / period
    room = capacity - burst  # the calls of the bucket the burst leaves to the spread
    tolerance = (room - 1) / rate
    late = max(0.0, spread - tolerance) / room
    exact = min(MAX_BUCKET_HEADROOM, 1.0 / (1.0 + rate * late))
    return math.floor(exact * 1000) / 1000


def _tolerance(room_us: float) -> float:
    return max(0, math.floor(room_us) - ROUNDING_MARGIN_US) / US

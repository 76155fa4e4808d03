"""How much work a policy may have in flight: what its consumers complete, not only its quota.

The quota's formula (`Policy.max_in_flight`: quota rate x half a lease) assumes the consumers
keep up with the quota. When they run slower (a slow vendor, few environments, an emulator),
work published on that assumption outlives its lease, is reclaimed and published again while its
first message is still queued, and the queue deepens: a reclaim storm. So the producer also
measures what was completed recently and keeps in flight no more than that rate drains within
half a lease:

- budget = GROWTH x (jobs settled in the last `window` seconds), where window = half a lease /
  GROWTH: the achieved rate times half a lease. When the consumers keep up, each run may put
  GROWTH times more in flight than the last window settled; when they fall behind, in flight
  follows what they actually do.
- Nothing in flight (a first run, an idle policy, or consumers that drained all they had): at
  least a start of `START_FRACTION` of the quota's formula. Even consumers 8 times slower than
  the quota settle that much within one lease, so a first wave does not expire either.
- Nothing settled in the window but work in flight (consumers stopped or stuck): nothing more
  until something settles or its lease expires, so a stalled fleet is not buried.
- Never above the quota's formula.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from sweeper.config import LEASE_DRAIN_FRACTION, Policy

#: How much more than the last window settled a run may put in flight.
GROWTH = 1.5
#: A first or idle run may fill this share of the quota's formula.
START_FRACTION = 0.25


@dataclass(frozen=True, slots=True)
class Budget:
    """The in-flight budget of one producer run and why."""

    limit: int
    reason: str  # "quota", "start", "completions", "stalled"


def completion_window_seconds(policy: Policy) -> float:
    """How far back settled jobs are counted: half a lease divided by GROWTH."""
    return policy.lease_seconds * LEASE_DRAIN_FRACTION / GROWTH


def in_flight_budget(policy: Policy, *, completed_in_window: int, in_flight: int) -> Budget:
    """The most leased rows this run may leave in flight (see the module docstring)."""
    cap = policy.max_in_flight
    if in_flight > 0 and completed_in_window <= 0:
        return _capped(in_flight, cap, "stalled")
    wanted, reason = math.ceil(GROWTH * max(0, completed_in_window)), "completions"
    if in_flight <= 0:
        start = math.ceil(cap * START_FRACTION)
        if start > wanted:
            wanted, reason = start, "start"
    return _capped(wanted, cap, reason)


def _capped(wanted: int, cap: int, reason: str) -> Budget:
    return Budget(cap, "quota") if wanted >= cap else Budget(wanted, reason)

"""The time a call holds a thread waiting for its key's slot, and the busy scopes that bind.

Little's law sizes the calls in flight as rate x the time each holds a thread. That time is the
service time plus the wait for the slot of each limit the call is under. The rule, stated so it
can be checked:

- The limit that binds costs no thread time that counts: its slots come at the planned rate
  itself, a thread waiting for one waits for the rate, and more threads would not raise it
  (a batch's wait for them is the plan's `batch_slots_seconds`). Nor does a limit with one key
  (the same for every call: `app`, `{host}`).
- A limit whose key spans several keys (a store's `{tenant_id}`) and that does not bind holds a
  call for its own key's next slot while the binding limit's slots go by. At the planned rate R
  over K keys, a key is asked R / K times a second, each call taking one interval T of its
  pacing (1 / its rate, headroom applied): the key's interval is running a share
  rho = R x T / K < 1 of the time (rho = 1: the limit binds). A record
  drawn for a random key (the keys interleaved, its arrival independent of the key's phase)
  finds the interval running with probability rho, and then waits for what is left of it,
  uniform over the interval less the key's burst tolerance tau: (T - tau)^2 / (2 T) on the
  mean. The expected wait is rho x (T - tau)^2 / (2 T): near half an interval for a key in
  use nearly every interval. A queue of several records for one key (more) and a burst that
  banks several slots (less) are not counted.
- A call under several such limits waits for the latest of its slots: the largest of their
  waits is taken (a lower bound of the latest).
- A concurrency cap or a budget has no interval: no wait is counted for it.

Listings (docs/examples/listings.toml): 2/s a store under 40/s for the app, headroom 0.881: the
app's 35.24/s over 25 stores asks each store 1.41 times a second against its 1.762/s, rho 0.8,
T 0.5675 s: a call waits 0.227 s for its store's slot, which at 35.24/s holds 8 threads beside
the 2.5 that the calls' 0.07 s (p95) take.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from sweeper.config import Policy
from sweeper_tools.planning.limits import key_span, limit_ceiling
from sweeper_tools.planning.regimes import planning_of

#: A rate's figures compared with this much tolerance (a ceiling divided by a rate that it is a
#: whole multiple of comes out a hair above the whole number in floating point).
_EPSILON = 1e-9


def wait_per_rate(policy: Policy, keys: Mapping[str, int], rate_per_second: float) -> float:
    """Seconds a call of `policy` waits for its keys' slots per call a second the policy makes,
    of the limits that do not bind at `rate_per_second` over the planned `keys` (busy keys by
    limit name): the wait at a rate X is X times it (rho is X x T / K; the module docstring)."""
    per_rate = [0.0]
    for limit in policy.limits:
        count = keys[limit.name]
        pacing = planning_of(limit).pacing()
        if count <= 1 or pacing is None:
            continue
        interval = pacing.interval_seconds
        if rate_per_second * interval / count >= 1 - _EPSILON:
            continue  # the limit binds: its slots are the rate itself
        left = max(0.0, interval - pacing.tolerance_seconds)
        per_rate.append(left * left / (2 * count))
    return max(per_rate)


def slot_wait_seconds(policy: Policy, keys: Mapping[str, int], rate_per_second: float) -> float:
    """The mean time a call of `policy` waits for its keys' slots at `rate_per_second`."""
    return rate_per_second * wait_per_rate(policy, keys, rate_per_second)


def calls_carry(in_flight: int, mean_service: float, per_rate: float) -> float:
    """The calls per second `in_flight` threads carry when each holds its thread for
    `mean_service` plus the wait at the rate they carry (`per_rate` x it): X = N / (s + c X),
    the positive root of c X^2 + s X - N = 0."""
    if per_rate <= 0:
        return in_flight / mean_service
    root = math.sqrt(mean_service * mean_service + 4 * per_rate * in_flight)
    return (root - mean_service) / (2 * per_rate)


def fewest_binding_scopes(policy: Policy) -> int | None:
    """The fewest busy scopes at which a limit with one key binds alone, no limit keyed per
    scope with it (each of those then allows more than the one-key limit's rate, its keys the
    busiest they are while it binds); None when the policy has no one-key limit, or no limit
    keyed per scope that states a rate."""
    wide = [limit_ceiling(limit, 1, None) for limit in policy.limits if not key_span(limit)]
    narrow = [limit_ceiling(limit, 1, None) for limit in policy.limits if key_span(limit)]
    finite = [ceiling.per_key_per_second for ceiling in narrow]
    finite = [per_key for per_key in finite if math.isfinite(per_key) and per_key > 0]
    if not wide or not finite:
        return None
    rate = min(ceiling.per_key_per_second for ceiling in wide)
    if not math.isfinite(rate):
        return None
    return max(math.floor(rate / per_key + _EPSILON) + 1 for per_key in finite)

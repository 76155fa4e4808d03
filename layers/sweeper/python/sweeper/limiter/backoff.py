"""How long to wait after a throttle and before a retry: delays drawn from a random source.

`close_delay` says how long a vendor's throttle closes a scope's gate (its Retry-After plus a
bounded jitter, never earlier than asked; without one, double the last closure, capped);
`retry_delay` spaces a record's retries (exponential backoff with full jitter);
`ledger_return_delay` says how soon a record comes back after the ledger could not be reached
(exponential in its receive count, never shorter than half its ceiling). They are pure
functions of their inputs and the `rng` they are given, apart from every limiter because they
hold no state: the consumer calls them, and property tests pin their bounds.
"""

from __future__ import annotations

import math
import random


def close_delay(
    retry_after: float | None,
    last_close_seconds: float | None,
    *,
    base: float,
    cap: float,
    jitter: float,
    rng: random.Random,
) -> float:
    """How long a throttle closes the scope.

    With a Retry-After, exactly that long plus a bounded jitter (never earlier than the vendor
    asked: jitter only adds, and at most `jitter` seconds). Without one, an exponential delay:
    double the last closure, starting at `base`, capped at `cap`.
    """
    if retry_after is not None:
        return max(0.0, retry_after) + rng.uniform(0.0, jitter)
    previous = last_close_seconds or 0.0
    return min(cap, max(base, 2.0 * previous)) + rng.uniform(0.0, jitter)


def retry_delay(attempt: int, *, base: float, cap: float, rng: random.Random) -> float:
    """Exponential backoff with full jitter: uniform in [0, min(cap, base * 2^(attempt-1))]."""
    ceiling = min(cap, base * math.pow(2.0, max(0, attempt - 1)))
    return rng.uniform(0.0, ceiling)


def ledger_return_delay(receives: int, *, base: float, cap: float, rng: random.Random) -> float:
    """Exponential in the receive count, with equal jitter: uniform in [c/2, c] for the ceiling
    c = min(cap, base * 2^(receives-1)), so a restart's returns spread but none come back at once.
    """
    ceiling = min(cap, base * math.pow(2.0, max(0, receives - 1)))
    return rng.uniform(ceiling / 2.0, ceiling)

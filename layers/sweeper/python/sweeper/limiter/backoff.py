"""How long to wait after a throttle and before a retry: delays drawn from a random source.

`close_delay` says how long a vendor's throttle closes a scope's gate (its Retry-After plus a
bounded jitter, never earlier than asked; without one, double the last closure while the vendor
keeps refusing right after each reopening, and start again from the base once the scope has
been open and calling for the recovery window);
`retry_delay` spaces a record's retries (exponential backoff with full jitter);
`ledger_return_delay` says how soon a record comes back after the ledger could not be reached
(exponential in its receive count, never shorter than half its ceiling). They are pure
functions of their inputs and the `rng` they are given, apart from every limiter because they
hold no state: the consumer calls them, and property tests pin their bounds.
"""

from __future__ import annotations

import math
import random

from sweeper.vendor_reading import MAX_WAIT_SECONDS

#: The first calls after a reopening are sent within this long of it (plus the reopening's
#: jitter): consumers wait for the reopening in place, then reserve with a lead of at most
#: MAX_LEAD_SECONDS (0.25 s). A throttle on a call sent later says the scope was open and
#: calling, so it starts a closure afresh. A floor, for a `base` set shorter than this.
MIN_RECOVERY_SECONDS = 1.0


def recovery_seconds(base: float, jitter: float) -> float:
    """How long after a reopening a bare throttle still doubles the last closure."""
    return max(base, MIN_RECOVERY_SECONDS) + jitter


def close_delay(
    retry_after: float | None,
    last_close_seconds: float | None,
    reopened_at: float | None,
    sent_at: float,
    *,
    base: float,
    cap: float,
    jitter: float,
    rng: random.Random,
) -> float:
    """How long a throttle closes the scope.

    With a Retry-After, exactly that long plus a bounded jitter (never earlier than the vendor
    asked: jitter only adds, and at most `jitter` seconds), up to MAX_WAIT_SECONDS asked: every
    action kind's wait is bounded here, a Lambda's own too (its contract allows a day). Without
    one, from the scope's last closure (`last_close_seconds` long, ending at `reopened_at`) and
    when the throttled call was sent (`sent_at`, epoch seconds), the rule is:

    - no earlier closure: `base`;
    - the call was sent before the last closure ended (it was in flight when the gate closed,
      and its 429 echoes the one that closed it): the last closure's length again, not doubled;
    - sent within `recovery_seconds(base, jitter)` of the reopening (the vendor refused the
      first calls after it): double the last closure;
    - sent later (the scope was open and calling for the recovery window): `base` again.

    Every bare closure is then held within [`base`, `cap`], plus a jitter in [0, `jitter`].
    No write per successful call is needed: the scope's item already holds the closure's end
    and length, and the consumer knows when it sent the call.
    """
    if retry_after is not None:
        return min(max(0.0, retry_after), MAX_WAIT_SECONDS) + rng.uniform(0.0, jitter)
    if last_close_seconds is None or reopened_at is None:
        length = base
    elif sent_at < reopened_at:
        length = last_close_seconds  # an echo of the throttle that closed the gate
    elif sent_at - reopened_at < recovery_seconds(base, jitter):
        length = 2.0 * last_close_seconds
    else:
        length = base  # the scope was open and calling: this throttle starts afresh
    return min(cap, max(base, length)) + rng.uniform(0.0, jitter)


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

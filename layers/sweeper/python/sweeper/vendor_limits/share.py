"""A quota sweeper shares with others: its pace from what the vendor says is used (a pure rule).

The rule, derived (issue 43 point 2). The vendor counts `quota` calls per `window` seconds; its
latest answer says `remaining` are left, so it counts `used = quota - remaining` in the window.
Sweeper's own calls in the same window (`own`, counted fleet-wide: sweeper.limiter.spend) are
part of that; the rest the others spent:

    others = max(0, used - own)

The others are expected to go on as they did: a window from now holds `others` of theirs
again. Sweeper keeps `reserve` (learn.reserve, or learn.reserve_fraction of the quota)
untouched for them, so what one window may hold of sweeper's own is
`quota - reserve - others`, spread evenly over the window:

    rate = (quota - reserve - others) / window = (remaining + own - reserve) / window

what is left less the reserve, plus sweeper's own calls (which leave the window within it),
over the window; never above `ceiling` (the told and learned rate, `learned_pace`'s steady
part: a shared pace only ever lowers it) and never below `floor` (the learned floor, a pace
too slow to matter: the gate says more). The pace is the steady bound; the gate is the hard
one: an answer with `remaining <= reserve` closes the scope until the reset it states, for
every consumer (`wait_seconds`), whatever the pace.

Why not `(remaining - reserve) / reset`: a sliding window's reset (the simulator's, and most
sliding-window vendors') is when one more call is admitted, not when the window empties; what
is left over it swings from the ceiling to nothing from one answer to the next, and ignoring
that sweeper's own calls leave the window makes it settle at half of what is left. A fixed
window (GitHub's hour) is paced by the same steady rule: its others are counted as of the
window's start, and when they spend late in it the gate keeps the reserve.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class QuotaShare:
    """One answer's split of a shared quota, and the pace and wait it gives sweeper."""

    quota: int
    own_spent: int  # sweeper's calls the vendor counts in the window (at most `used`)
    others_spent: int
    reserve: float
    rate_per_second: float
    wait_seconds: float = 0.0  # > 0: only the reserve is left; the gate closes this long


def share_of(
    *,
    quota: int,
    window_seconds: float,
    remaining: int,
    reset_seconds: float | None,
    own_spent: int,
    reserve: float,
    ceiling_per_second: float,
    floor_per_second: float,
) -> QuotaShare:
    """Sweeper's pace under a quota others spend too (the rule in the module docstring)."""
    remaining = min(max(remaining, 0), quota)
    used = quota - remaining
    own = min(max(own_spent, 0), used)  # calls the vendor no longer counts are not in it
    others = used - own
    steady = (remaining + own - reserve) / window_seconds
    rate = min(ceiling_per_second, max(floor_per_second, steady))
    wait = reset_seconds if remaining <= reserve and reset_seconds else 0.0
    return QuotaShare(quota, own, others, reserve, rate, wait)

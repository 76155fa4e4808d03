"""A learned limit's quota shared with others: sweeper paces to what they leave (for learned.py).

When the vendor's Remaining is lower than sweeper's own calls account for, others spend the
same quota (a team's application on the same key). A learned scope then counts its own calls
fleet-wide (sweeper.limiter.spend: on the scope's limiter item), splits what the answer says
is used into sweeper's and the others' share, and paces at what the others leave less the
`reserve` it keeps for them (`learn.reserve`, or `learn.reserve_fraction` of the quota), never
above the told and learned rate; with only the reserve left, the gate closes until the reset
(the rule: sweeper.vendor_limits.share). Only a limit that states a reserve (`reserve`, 0
included, or `reserve_fraction`) is paced by share: its count of its own calls trails the
vendor's by up to a twentieth of the window per environment, and what it has not counted yet
is taken for the others' (slower, never faster). On a quota sweeper has alone that cost half
its rate (benchmark (e), 0.41 / 0.72 of the quota against 0.90 / 0.97 without), so a quota no
one said is shared is paced by the vendor's statement alone, as learned.py does.

Each consumer writes the split it last worked out with its calls, for `sweeper status` and the
console, and reports it when it writes as two metrics: `SharedQuotaOwnPercent` and
`SharedQuotaOthersPercent` (of the quota, in the vendor's window).

Not paced by share: a limit with a cost (its units are points, and a bucket's level is its
remaining: learned.py closes the gate on it), and a consumer whose limiter counts no spend.
"""

from __future__ import annotations

from typing import Final, Self

from sweeper.admission.ticket import Ticket
from sweeper.config.learn import LearnConfig
from sweeper.limiter.base import ShareSeen
from sweeper.limiter.spend import SpendTally
from sweeper.observability import Metric
from sweeper.vendor_limits.share import QuotaShare, share_of
from sweeper.vendor_reading import LimitReading

#: A shared pace within this share of the rate held is not written again. The others' count
#: moves by a call or two from one answer to the next (calls in flight, the window's edge);
#: following each would cost a write per answer and drop the batch's banked slots each time.
#: Below the rate's headroom (at least 5 %), so a lowering is still followed within it.
SHARED_HOLD_WITHIN: Final = 0.03


class SharedQuota:
    """One call's part in its scope's shared quota: counted when it left, and the pace the
    answer gives (see the module docstring)."""

    @classmethod
    def of(cls, ticket: Ticket, learn: LearnConfig, window_seconds: float) -> Self | None:
        """The shared quota of a learned scope; None when not paced by share."""
        source = ticket.abilities.spend
        if source is None or learn.cost is not None or not learn.shared:
            return None
        return cls(ticket, learn, source.spend(), window_seconds)

    def __init__(
        self, ticket: Ticket, learn: LearnConfig, tally: SpendTally, window_seconds: float
    ) -> None:
        self._ticket = ticket
        self._learn = learn
        self._tally = tally
        self._window = window_seconds

    def called(self, window_seconds: float | None = None) -> None:
        """The call left: one of sweeper's own (a LimiterError leaves it for the next write)."""
        t = self._ticket
        written = self._tally.add(t.job.scope, 1, t.clocks.now(), window_seconds or self._window)
        if written is not None:
            t.clocks.metrics.add_metric(Metric.SHARED_QUOTA_OWN, "Percent", written.own_percent)
            t.clocks.metrics.add_metric(
                Metric.SHARED_QUOTA_OTHERS, "Percent", written.others_percent
            )

    def pace(
        self, stated: LimitReading, ceiling_per_second: float, floor_per_second: float
    ) -> QuotaShare | None:
        """The pace and wait the answer's split gives (None: it states no quota or no
        remaining), never above `ceiling_per_second` (the told and learned rate)."""
        if stated.quota is None or stated.remaining is None or stated.quota == 0:
            return None
        t = self._ticket
        now = t.clocks.now()
        window = stated.window_seconds or self._window
        share = share_of(
            quota=stated.quota,
            window_seconds=window,
            remaining=stated.remaining,
            reset_seconds=stated.reset_seconds,
            own_spent=self._tally.own_in(t.job.scope, window, now),
            reserve=self._learn.reserved(stated.quota),
            ceiling_per_second=ceiling_per_second,
            floor_per_second=floor_per_second,
        )
        seen = ShareSeen(share.quota, share.own_spent, share.others_spent, now)
        self._tally.seen(t.job.scope, seen)
        return share


__all__ = ["SHARED_HOLD_WITHIN", "SharedQuota"]

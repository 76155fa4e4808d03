"""How far a postponement may go: later than now, and no further than the policy's bound.

A postponement past the bound (`until 9999-12-31`) would be a cancel in disguise, with no
reason and out of `inspect`; a longer wait is a hold, which names its reason and shows.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from sweeper.errors import OperatorError


def check_postpone(until: datetime, *, now: datetime, bound: timedelta) -> None:
    """OperatorError (one line, naming the flag and the policy key) unless now < until <= now +
    bound."""
    if until <= now:
        raise OperatorError("postpone to a time in the future (--until)")
    if until - now > bound:
        days = bound.total_seconds() / 86_400
        raise OperatorError(
            f"postpone at most {days:g} days ahead (the policy's max_postpone_days): --until "
            f"{until.isoformat()} is later; hold the jobs instead to keep them out longer"
        )

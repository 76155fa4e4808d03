"""A wait an answer names: Retry-After (delay-seconds or an HTTP-date), read the one way.

The wait is the vendor's word, so it is bounded: at most `MAX_WAIT_SECONDS` (an hour, as a
reset header's), whatever was sent. A throttle closes its scope's gate for the wait
(`limiter.backoff.close_delay`) and a snooze sets the record's next attempt by it: unbounded,
one answer saying "99999999999" would hold a policy for three thousand years, and a date in
the year 9999 cannot be added to the ledger's time at all. Any number of seconds too large is
the bound, however many digits it has (400 nines, past a float, too).
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Final

from sweeper.vendor_reading import MAX_WAIT_SECONDS

#: HTTP's delay-seconds, in ASCII digits (`\d` would read `٣` as 3).
_DELAY_SECONDS_RE: Final = re.compile(r"[0-9]+(?:\.[0-9]+)?")


def parse_retry_after(
    value: str | None, now: datetime | None = None, *, unit_seconds: float = 1.0
) -> float | None:
    """Seconds to wait from a Retry-After value (delay-seconds or HTTP-date), within
    [0, MAX_WAIT_SECONDS]: a longer wait is read as the bound.

    A number counts `unit_seconds` (> 0) each (0.001: a vendor's own header in milliseconds);
    a date is a date. None when the header is missing or unreadable.
    """
    if value is None:
        return None
    text = value.strip()
    if _DELAY_SECONDS_RE.fullmatch(text):
        # digits past a float read as inf: a wait too long like any other, so the bound
        return min(float(text) * unit_seconds, MAX_WAIT_SECONDS)
    try:
        when = parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    if when.tzinfo is None:  # "-0000" in a date means UTC with no claim about local time
        when = when.replace(tzinfo=UTC)
    wait = (when - (now or datetime.now(UTC))).total_seconds()
    return min(max(0.0, wait), MAX_WAIT_SECONDS)

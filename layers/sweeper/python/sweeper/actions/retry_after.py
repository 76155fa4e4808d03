"""A wait an answer names: Retry-After (delay-seconds or an HTTP-date), read the one way."""

from __future__ import annotations

import math
import re
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Final

_DELAY_SECONDS_RE: Final = re.compile(r"\d+(?:\.\d+)?")


def parse_retry_after(value: str | None, now: datetime | None = None) -> float | None:
    """Seconds to wait from a Retry-After value (delay-seconds or HTTP-date), at least 0.

    None when the header is missing or unreadable.
    """
    if value is None:
        return None
    text = value.strip()
    if _DELAY_SECONDS_RE.fullmatch(text):
        seconds = float(text)
        return seconds if math.isfinite(seconds) else None
    try:
        when = parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    if when.tzinfo is None:  # "-0000" in a date means UTC with no claim about local time
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - (now or datetime.now(UTC))).total_seconds())

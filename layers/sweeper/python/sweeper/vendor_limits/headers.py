"""Limits stated in plain headers: the `X-RateLimit-*` family and a header read by a pattern.

`X-RateLimit-Limit / -Remaining / -Reset` (names configurable): GitHub sends the reset as epoch
seconds and names the limit in `x-ratelimit-resource`; most others send seconds to wait. Which
one a vendor sends is configuration (`reset_as`), never guessed: an epoch time read as a delay
would close a limit for fifty years, a delay read as an epoch time would open it at once.

A header with a pattern (Salesforce's `Sforce-Limit-Info: api-usage=10018/100000`): a regular
expression whose named groups (`quota`, `used`, `remaining`, `reset`) are whole numbers. Only
the header's first `MAX_PATTERN_INPUT_CHARS` characters are searched, which bounds the time a
pattern can take on what a vendor sends.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final, Literal

from sweeper.actions.answer_match import Answer, header_number
from sweeper.vendor_reading import (
    LimitReading,
    VendorReading,
    count,
    name,
    seconds,
)

ResetAs = Literal["seconds", "epoch"]
#: The named groups a pattern may use.
PATTERN_GROUPS: Final = frozenset({"quota", "used", "remaining", "reset"})
#: A header longer than this is not searched by a pattern.
MAX_PATTERN_INPUT_CHARS: Final = 1024
#: An epoch reset this far in the past is clock skew: the window has just reset.
EPOCH_SKEW_SECONDS: Final = 300.0
#: What a reset that cannot be read is said to be (an epoch time where seconds are configured
#: or the reverse, negative, sent twice): the count stands, the reset closes nothing.
UNREAD_RESET: Final = "the reset is not a wait within bounds; ignored"


def reset_wait(value: float | None, reset_as: ResetAs, now_epoch: float) -> float | None:
    """Seconds until a stated reset, from seconds to wait or an epoch time; None when unusable
    (an epoch time long past, or either kind beyond `MAX_SECONDS`)."""
    if value is None or not math.isfinite(value):
        return None
    if reset_as == "seconds":
        return seconds(value)
    wait = value - now_epoch
    if -EPOCH_SKEW_SECONDS <= wait < 0:
        return 0.0
    return seconds(wait)


@dataclass(frozen=True, slots=True)
class XRateLimitFields:
    """The header names of the `X-RateLimit-*` family (GitHub's by default)."""

    limit: str = "x-ratelimit-limit"
    remaining: str = "x-ratelimit-remaining"
    reset: str = "x-ratelimit-reset"
    resource: str | None = "x-ratelimit-resource"
    used: str | None = "x-ratelimit-used"


@dataclass(frozen=True, slots=True)
class XRateLimitSource:
    """Reads the `X-RateLimit-*` family; the limit is named by its resource header if sent,
    else `name`."""

    fields: XRateLimitFields = XRateLimitFields()
    reset_as: ResetAs = "seconds"
    name: str = "x-ratelimit"

    @property
    def reads_body(self) -> bool:
        return False

    def read(self, answer: Answer, now_epoch: float) -> VendorReading:
        fields = self.fields
        quota = _count_header(answer, fields.limit)
        remaining = _count_header(answer, fields.remaining)
        used = None if fields.used is None else _count_header(answer, fields.used)
        counts = {fields.limit: quota, fields.remaining: remaining}
        if fields.used is not None:
            counts[fields.used] = used
        bad = _unread_counts(answer, counts)  # each sent and not read, to be said
        if remaining is None and quota is not None and used is not None:
            remaining = max(0, quota - used)
        if quota is None and remaining is None:
            return VendorReading(diagnostics=bad)
        resource = None if fields.resource is None else name(answer.header(fields.resource))
        reset = reset_wait(ascii_number(answer, fields.reset), self.reset_as, now_epoch)
        unread = reset is None and answer.header(fields.reset) is not None
        return VendorReading(
            (
                LimitReading(
                    name=resource or self.name,
                    quota=quota,
                    remaining=remaining,
                    reset_seconds=reset,
                ),
            ),
            diagnostics=(*bad, *((f"{fields.reset}: {UNREAD_RESET}",) if unread else ())),
        )


def ascii_number(answer: Answer, header: str) -> float | None:
    """`header_number`, for ASCII digits only (`\\d` would read `٣` as 3)."""
    text = answer.header(header)
    return header_number(answer, header) if text is not None and text.isascii() else None


def _count_header(answer: Answer, header: str) -> int | None:
    return count(ascii_number(answer, header))


def _unread_counts(answer: Answer, counts: Mapping[str, int | None]) -> tuple[str, ...]:
    """What is said of each count header sent whose value was not read (None)."""
    return tuple(
        f"{header}: not a whole number within bounds; ignored"
        for header, value in counts.items()
        if value is None and answer.header(header) is not None
    )


def compile_pattern(text: str) -> re.Pattern[str]:
    """A limit pattern, checked: it compiles, names only known groups, and names the quota
    with the used or remaining count. ValueError (one line) otherwise."""
    try:
        pattern = re.compile(text)
    except re.error as exc:
        raise ValueError(f"learn pattern does not compile: {exc.msg}") from None
    groups = set(pattern.groupindex)
    unknown = sorted(groups - PATTERN_GROUPS)
    if unknown:
        raise ValueError(
            f"learn pattern names unknown groups {unknown}; use (?P<quota>...), (?P<used>...), "
            "(?P<remaining>...), (?P<reset>...)"
        )
    if "quota" not in groups or not groups & {"used", "remaining"}:
        raise ValueError(
            "learn pattern needs (?P<quota>\\d+) and (?P<used>\\d+) or (?P<remaining>\\d+), "
            "e.g. api-usage=(?P<used>\\d+)/(?P<quota>\\d+)"
        )
    return pattern


@dataclass(frozen=True, slots=True)
class PatternSource:
    """Reads one header with a compiled pattern (`compile_pattern`)."""

    header: str
    pattern: re.Pattern[str]
    reset_as: ResetAs = "seconds"
    name: str = "pattern"
    window_seconds: float | None = None

    @property
    def reads_body(self) -> bool:
        return False

    def read(self, answer: Answer, now_epoch: float) -> VendorReading:
        text = answer.header(self.header)
        if text is None:
            return VendorReading()
        found = self.pattern.search(text[:MAX_PATTERN_INPUT_CHARS]) if text.isascii() else None
        groups = found.groupdict() if found is not None else {}
        quota = _count_text(groups.get("quota"))
        used, remaining = _count_text(groups.get("used")), _count_text(groups.get("remaining"))
        if remaining is None and quota is not None and used is not None:
            remaining = max(0, quota - used)  # Salesforce's bursts go past the allocation
        if quota is None or remaining is None:
            return VendorReading(diagnostics=(f"{self.header}: the pattern found no counts",))
        reset = reset_wait(_digits(groups.get("reset")), self.reset_as, now_epoch)
        unread = reset is None and groups.get("reset") is not None
        return VendorReading(
            (
                LimitReading(
                    name=self.name,
                    quota=quota,
                    window_seconds=self.window_seconds,
                    remaining=remaining,
                    reset_seconds=reset,
                ),
            ),
            diagnostics=(f"{self.header}: {UNREAD_RESET}",) if unread else (),
        )


#: Digits a pattern's group may hold (an epoch time has ten).
_MAX_DIGITS: Final = 12


def _digits(text: str | None) -> float | None:
    if text is None or not (0 < len(text) <= _MAX_DIGITS and text.isascii() and text.isdigit()):
        return None
    return float(text)


def _count_text(text: str | None) -> int | None:
    return count(_digits(text))

"""Limits the vendor tells: read from its answers, checked, and turned into a pace.

- `sweeper.vendor_reading`: the value (`VendorReading`: per limit quota, window, remaining,
  reset; a call's cost and its bucket) and the bounds every number is held to (a ground-floor
  module, importing nothing of sweeper, so that an `ActionResult` carries a reading);
- `ietf`: the IETF `RateLimit-Policy` / `RateLimit` fields (over `structured`, the subset of
  Structured Fields they use);
- `headers`: `X-RateLimit-*` (reset in seconds or epoch seconds) and a header with a pattern;
- `cost`: a call's cost from a header or a JSON path (Shopify's GraphQL `extensions.cost`);
- `pace`: the arithmetic a limiter needs from a reading: a learned ceiling, a points
  bucket's restore rate, a fixed window's start;
- `share`: the admission's pace under a quota others spend too (what they leave, less the
  reserve);
- `full`: whether `remaining = 0` is the window full at sweeper's own pace, or over it.

Each source is a `Source` (`read(answer, now_epoch)`); `Reader` reads an answer with several.
Nothing here raises for what a vendor sent, and nothing keeps a header's or a body's text.
A reading may lower a pace; it never raises one past the quota sweeper was told.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from sweeper.actions.answer_match import Answer
from sweeper.vendor_limits.cost import SHOPIFY_COST, CostSource, ValueAt
from sweeper.vendor_limits.headers import (
    PatternSource,
    ResetAs,
    XRateLimitFields,
    XRateLimitSource,
    compile_pattern,
)
from sweeper.vendor_limits.ietf import policy_for, read_ratelimit
from sweeper.vendor_reading import (
    NOTHING,
    BucketReading,
    CostReading,
    LimitReading,
    VendorReading,
)


class Source(Protocol):
    """One place a vendor states its limits."""

    def read(self, answer: Answer, now_epoch: float) -> VendorReading: ...

    @property
    def reads_body(self) -> bool:
        """Whether it looks into the body (then the body is read for it)."""
        ...


@dataclass(frozen=True, slots=True)
class RateLimitSource:
    """The IETF RateLimit fields."""

    @property
    def reads_body(self) -> bool:
        return False

    def read(self, answer: Answer, now_epoch: float) -> VendorReading:
        del now_epoch  # the fields state seconds to wait, never a time
        return read_ratelimit(answer)


@dataclass(frozen=True, slots=True)
class Reader:
    """Reads an answer with each of its sources, side by side."""

    sources: tuple[Source, ...]

    @property
    def reads_body(self) -> bool:
        """Whether a source looks into the body (then the body is read for it)."""
        return any(source.reads_body for source in self.sources)

    def read(self, answer: Answer, now_epoch: float) -> VendorReading:
        reading = NOTHING
        for source in self.sources:
            reading = reading.merged(source.read(answer, now_epoch))
        return reading


__all__ = [
    "NOTHING",
    "SHOPIFY_COST",
    "BucketReading",
    "CostReading",
    "CostSource",
    "LimitReading",
    "PatternSource",
    "RateLimitSource",
    "Reader",
    "ResetAs",
    "Source",
    "ValueAt",
    "VendorReading",
    "XRateLimitFields",
    "XRateLimitSource",
    "compile_pattern",
    "policy_for",
]

"""The vendor's quota for one scope (`Quota`), its `N/PERIOD` text form, and the headroom maths.

`Quota` holds the documented rate (`limit` calls per `period_seconds`), the algorithm the vendor
counts them by (a sliding window, a fixed window, or a bucket of `capacity` calls refilled at
the rate), the headroom sweeper keeps below it (by default the largest that arrival jitter
cannot push over the vendor's algorithm), the slack (how long after its time a slot may still
be used, paid for in headroom) and, for a vendor whose quota is not known, the
adaptive controller's settings; `Quota.parse` reads the `40/1s` form (`15/1s bucket`,
`15/1s bucket:6`, `100/1m fixed`) the CLI and the local stack accept. The controller's
arithmetic (`Adaptive`) is on the ground floor (`sweeper.adaptive_rate`), so that this module
does not import the limiter.
"""

from __future__ import annotations

import math
import re
from typing import Literal, Self

from pydantic import Field, ValidationError, model_validator

from sweeper.adaptive_rate import Adaptive
from sweeper.config.base import _Strict
from sweeper.errors import ConfigError

#: A consumer sends its call at most this long after its slot, or lets the slot go unused.
LATE_SLOT_TOLERANCE_SECONDS = 0.035
#: The default of `quota.arrival_jitter_seconds`: how much the time from a call's send to its
#: arrival at the vendor varies (connection, network, the vendor's accept). The docs quote this
#: figure; tests/unit/test_config.py checks that they do.
DEFAULT_ARRIVAL_JITTER_SECONDS = 0.025

#: A bucket kept exactly full would be refused at the first difference between the two clocks'
#: rates or the vendor's whole-millisecond arithmetic: sweeper uses at most this share of a
#: bucket's refill rate, however large the bucket, so the bucket drains a little between calls.
MAX_BUCKET_HEADROOM = 0.99

Algorithm = Literal["sliding_window", "fixed_window", "bucket"]

_RATE_RE = re.compile(
    r"^\s*(\d+)\s*/\s*(\d*(?:\.\d+)?)\s*(ms|s|m|h)?"
    r"(?:\s+(sliding|fixed|fixed-aligned|bucket)(?::(\d+))?)?\s*$"
)
_ALGORITHMS: dict[str, tuple[Algorithm, bool]] = {
    "sliding": ("sliding_window", False),
    "fixed": ("fixed_window", False),
    "fixed-aligned": ("fixed_window", True),
    "bucket": ("bucket", False),
}
_PERIOD_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


class Quota(_Strict):
    """The vendor's documented rate for one scope: `limit` calls per `period_seconds`, counted
    by `algorithm` (for a bucket, `limit / period_seconds` is its refill rate)."""

    limit: int = Field(gt=0)
    period_seconds: float = Field(gt=0)
    algorithm: Algorithm = Field(
        default="sliding_window",
        description="how the vendor counts: at most `limit` in any window of the period "
        "(sliding_window), in each window between period boundaries (fixed_window), or a "
        "bucket of `capacity` calls refilled at limit/period (bucket; nginx's limit_req is one "
        "of capacity burst + 1)",
    )
    capacity: int = Field(
        default=1, ge=1, le=1_000_000, description="bucket: how many calls it holds (B)"
    )
    aligned: bool = Field(
        default=False,
        description="fixed_window: the windows start at multiples of the period on the clock",
    )
    headroom: float | None = Field(
        default=None, gt=0, le=1, description="fraction of the quota used; default: safe_headroom"
    )
    arrival_jitter_seconds: float = Field(
        default=DEFAULT_ARRIVAL_JITTER_SECONDS,
        ge=0,
        le=10,
        description="spread of send-to-arrival latency at the vendor (p99 - min); sets the "
        "default headroom",
    )
    slack_seconds: float = Field(
        default=0.0,
        ge=0,
        description="how long after its time a reserved slot may still be used (at most the "
        "period): a batch keeps its banked slots that long for calls that wait for something "
        "else (a concurrency cap's lease), and pays for it in headroom (safe_headroom)",
    )
    adaptive: bool = Field(
        default=False,
        description="the vendor's quota is not known: find it (AIMD); limit/period is the cap",
    )
    adaptive_floor: float = Field(
        default=0.1, gt=0, le=1, description="adaptive: starting and lowest rate, share of the cap"
    )
    adaptive_increase: float = Field(
        default=0.02,
        gt=0,
        le=1,
        description="adaptive: rate added per second without a 429, share of the cap",
    )
    adaptive_cut: float = Field(
        default=0.7, gt=0, lt=1, description="adaptive: the rate is multiplied by this on a 429"
    )

    @model_validator(mode="after")
    def _fields_of_the_algorithm(self) -> Self:
        if self.capacity != 1 and self.algorithm != "bucket":
            raise ValueError("capacity is a bucket's: set algorithm = 'bucket' or drop it")
        if self.aligned and self.algorithm != "fixed_window":
            raise ValueError("aligned is a fixed window's: set algorithm = 'fixed_window'")
        if self.slack_seconds > self.period_seconds:
            raise ValueError(
                f"slack_seconds {self.slack_seconds:g} is longer than the period "
                f"({self.period_seconds:g} s): set it at most period_seconds (0.3 to 0.6 s "
                "suits calls that wait for a concurrency lease)"
            )
        if self.slack_seconds and self.headroom is not None and self.headroom > self.safe_headroom:
            raise ValueError(
                f"headroom {self.headroom:g} is above {self.safe_headroom:g}, the most that "
                f"slack_seconds {self.slack_seconds:g} allows: calls sent up to the slack after "
                "their slots would exceed the quota; leave headroom out or lower it"
            )
        return self

    @classmethod
    def parse(cls, text: str, headroom: float | None = None) -> Quota:
        """Parse `N/PERIOD [ALGORITHM[:CAPACITY]]`, e.g. `40/1s`, `100/m fixed`, `5/500ms`,
        `15/1s bucket` (capacity 1: spacing), `15/1s bucket:6` (nginx's burst=5)."""
        match = _RATE_RE.match(text)
        if not match:
            raise ConfigError(
                f"rate {text!r} is not N/PERIOD [sliding|fixed|fixed-aligned|bucket[:B]] "
                "(e.g. 40/1s, 600/1m fixed, 15/1s bucket:6)"
            )
        count, amount, unit, name, capacity = match.groups()
        seconds = (float(amount) if amount else 1.0) * _PERIOD_UNITS[unit or "s"]
        algorithm, aligned = _ALGORITHMS[name or "sliding"]
        if capacity is not None and algorithm != "bucket":
            raise ConfigError(f"rate {text!r}: only a bucket has a capacity (bucket:B)")
        try:
            return cls(
                limit=int(count),
                period_seconds=seconds,
                headroom=headroom,
                algorithm=algorithm,
                aligned=aligned,
                capacity=int(capacity) if capacity is not None else 1,
            )
        except ValidationError as exc:
            raise ConfigError(f"rate {text!r}: {_first_error(exc)}") from exc

    @property
    def arrival_budget_seconds(self) -> float:
        """How late after its slot's time a call may reach the vendor: used within the slack,
        sent late, then delayed (W + d, W = `slack_seconds`, d = tolerance + jitter)."""
        return self.slack_seconds + LATE_SLOT_TOLERANCE_SECONDS + self.arrival_jitter_seconds

    @property
    def safe_headroom(self) -> float:
        """The largest headroom at which no call arrives earlier than the vendor's algorithm
        allows, given that each call arrives between 0 and a = `arrival_budget_seconds` after
        its slot's time (sweeper's slots are a zero-burst GCRA: one every I = T / (h * N)
        seconds, each used at most once, in any order). a = W + d: a slot is used up to the
        slack W = `slack_seconds` after its time, sent up to the late-slot tolerance after
        that, and reaches the vendor up to the arrival jitter later (d = tolerance + jitter).

        - Sliding window of T = period: the calls arriving in a window [x, x + T] come from
          slots in [x - a, x + T], at most `floor((T + a) / I) + 1` of them, which is at most N
          exactly when `h < T / (T + a)`, whatever N is: T / (T + W + d).
        - Fixed window (aligned to the clock or not): each of its windows is one of the sliding
          windows, so the same rule; sweeper does not know the vendor's boundaries within a, so
          it does not use the burst a window's start allows.
        - Bucket of capacity B refilled at R = N / T (GCRA with tolerance t = (B - 1) / R): with
          the arrivals in the order they arrive, the bucket refuses none exactly when any k + 1
          of them in a row span at least `k / R - t`, which only binds for k >= B. Any k + 1
          arrivals come from k + 1 distinct slots, so they span at least `k * I - a`. Hence none
          is refused when `k * (I - 1 / R) >= a - t` for every k >= B: `I >= 1 / R` and
          `I - 1 / R >= (a - t) / B`, that is `h <= 1 / (1 + R * (W + d - t) / B)`, at most
          MAX_BUCKET_HEADROOM. B = 1 (nginx's limit_req without burst) is spacing: every call
          at least 1 / R after the last however the jitter falls, so the jitter costs R * d
          and the slack R * W besides: a bucket of one with a slack gets much slower, rightly,
          as calls on neighbouring slots may arrive as little as I - W - d apart.

        Each bound uses only that every call arrives within an interval of length a placed
        alike around its slot, not where: a consumer that calls on a slot from B before its
        time to W - B after (sweeper.consumer.slots EARLY_SHARE_OF_SLACK) keeps them all.
        """
        a = self.arrival_budget_seconds
        if self.algorithm == "bucket":
            rate = self.limit / self.period_seconds
            tolerance = (self.capacity - 1) / rate
            late = max(0.0, a - tolerance) / self.capacity
            exact = min(MAX_BUCKET_HEADROOM, 1.0 / (1.0 + rate * late))
        else:
            exact = self.period_seconds / (self.period_seconds + a)
        return math.floor(exact * 1000) / 1000

    @property
    def effective_headroom(self) -> float:
        return self.headroom if self.headroom is not None else self.safe_headroom

    @property
    def rate_per_second(self) -> float:
        """The rate sweeper aims for, headroom applied."""
        return self.limit * self.effective_headroom / self.period_seconds

    @property
    def interval_seconds(self) -> float:
        """The spacing of calls in one scope (the GCRA emission interval)."""
        return 1.0 / self.rate_per_second

    @property
    def adaptive_spec(self) -> Adaptive | None:
        """The rate controller when the quota is to be found, else None (a known quota).

        The cap is the rate above (limit, headroom applied); several 429s of one overshoot
        arrive within about a window, so one cut per two windows.
        """
        if not self.adaptive:
            return None
        cap = self.rate_per_second
        return Adaptive(
            floor=cap * self.adaptive_floor,
            cap=cap,
            increase=cap * self.adaptive_increase,
            cut=self.adaptive_cut,
            cooldown=2 * self.period_seconds,
        )


def _first_error(exc: ValidationError) -> str:
    err = exc.errors()[0]
    where = ".".join(str(part) for part in err["loc"]) or "(root)"
    return f"{where}: {err['msg']}"

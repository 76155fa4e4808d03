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

import re
from typing import Annotated, Literal, Self

from pydantic import Field, ValidationError, model_validator

from sweeper.adaptive_rate import Adaptive
from sweeper.config.base import _Strict
from sweeper.errors import ConfigError
from sweeper.pacing_rule import MAX_BUCKET_HEADROOM as MAX_BUCKET_HEADROOM  # re-exported
from sweeper.pacing_rule import (
    US,
    Pacing,
    bucket_headroom,
    bucket_tolerance,
    step_us,
    window_headroom,
    window_tolerance,
)

#: A consumer sends its call at most this long after its slot, or lets the slot go unused.
LATE_SLOT_TOLERANCE_SECONDS = 0.035
#: The default of `quota.arrival_jitter_seconds`: how much the time from a call's send to its
#: arrival at the vendor varies (connection, network, the vendor's accept). The docs quote this
#: figure; tests/unit/test_config.py checks that they do.
DEFAULT_ARRIVAL_JITTER_SECONDS = 0.025

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
    burst: Literal["derived"] | Annotated[int, Field(ge=0)] = Field(
        default="derived",
        description="calls beyond the first the limiter may grant at once after unused slots "
        "(its GCRA's burst tolerance, `pacing`): 'derived', what the vendor's rule leaves at "
        "the headroom (a bucket's capacity; a window's rounding only, unless the headroom is "
        "set lower); K, room for K calls made in the default headroom; 0, none (spacing only)",
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
        if isinstance(self.burst, int) and self.burst:
            self._check_burst(self.burst)
        if self.slack_seconds and self.headroom is not None and self.headroom > self.safe_headroom:
            raise ValueError(
                f"headroom {self.headroom:g} is above {self.safe_headroom:g}, the most that "
                f"slack_seconds {self.slack_seconds:g} allows: calls sent up to the slack after "
                "their slots would exceed the quota; leave headroom out or lower it"
            )
        return self

    def _check_burst(self, burst: int) -> None:
        """A burst of `burst` calls must leave a rate, and a headroom set beside it room."""
        if self.adaptive:
            raise ValueError("burst needs a known quota: leave it out of an adaptive one")
        room = self.capacity if self.algorithm == "bucket" else self.limit
        if burst >= room or self.safe_headroom <= 0:
            raise ValueError(
                f"burst {burst} leaves no rate within {room} calls: set it below {room}"
            )
        if self.headroom is not None and self.headroom > self.safe_headroom:
            raise ValueError(
                f"headroom {self.headroom:g} is above {self.safe_headroom:g}, the most that "
                f"burst {burst} allows: leave headroom out or lower it (or the burst)"
            )

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
        its slot's time, and that the limiter may grant a burst of K = `burst` calls (0 when
        'derived': the burst is then what this headroom leaves, `pacing`). a = W + d: a slot
        is used up to the slack W = `slack_seconds` after its time, sent up to the late-slot
        tolerance after that, and reaches the vendor up to the arrival jitter later
        (d = tolerance + jitter). The rule per algorithm is sweeper.pacing_rule's:

        - Window of N per T (sliding, or fixed with any boundaries): `T (N - K) / (N (T + a))`;
          with K = 0, `T / (T + W + d)` whatever N is.
        - Bucket of capacity B refilled at R = N / T: `(B - K) / (1 + R a)`, at most
          MAX_BUCKET_HEADROOM (the bucket's own tolerance (B - K - 1) / R absorbs the spread
          first). B = 1 (nginx's limit_req without burst) is spacing: the jitter costs R * d
          and the slack R * W besides, as calls on neighbouring slots may arrive as little as
          I - W - d apart.

        Each bound uses only that every call arrives within an interval of length a placed
        alike around its slot, not where.
        """
        a = self.arrival_budget_seconds
        burst = self.burst if isinstance(self.burst, int) else 0
        if self.algorithm == "bucket":
            return bucket_headroom(self.limit, self.period_seconds, self.capacity, a, burst)
        return window_headroom(self.limit, self.period_seconds, a, burst)

    def pacing(self) -> Pacing:
        """The interval and burst tolerance the limiter paces this rate at (sweeper.pacing_rule
        states the rule per algorithm and proves it exact).

        The interval is `interval_seconds` (the headroom's rate). The tolerance is the most the
        vendor's rule leaves at that rate given the arrival budget (burst 'derived'), the room
        for K calls (burst K, which the default headroom made), or none (burst 0, and an
        adaptive quota, whose rate moves). Never more than the rule allows, whatever is set.
        """
        interval = self.interval_seconds
        if self.adaptive or self.burst == 0:
            return Pacing(interval)
        a = self.arrival_budget_seconds
        if self.algorithm == "bucket":
            most = bucket_tolerance(self.limit, self.period_seconds, self.capacity, interval, a)
        else:
            most = window_tolerance(self.limit, self.period_seconds, interval, a)
        if self.burst == "derived":
            return Pacing(interval, most)
        return Pacing(interval, min(self.burst * step_us(interval) / US, most))

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

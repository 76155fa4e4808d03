"""The vendor's quota for one scope (`Quota`), its `N/PERIOD` text form, and the headroom maths.

`Quota` holds the documented rate (`limit` calls per `period_seconds`), the headroom sweeper
keeps below it (by default the largest that arrival jitter cannot push over the quota) and, for
a vendor whose quota is not known, the adaptive controller's settings; `Quota.parse` reads the
`40/1s` form the CLI and the local stack accept. The controller's arithmetic (`Adaptive`) is on
the ground floor (`sweeper.adaptive_rate`), so that this module does not import the limiter.
"""

from __future__ import annotations

import math
import re

from pydantic import Field, ValidationError

from sweeper.adaptive_rate import Adaptive
from sweeper.config.base import _Strict
from sweeper.errors import ConfigError

#: A consumer sends its call at most this long after its slot, or lets the slot go unused.
LATE_SLOT_TOLERANCE_SECONDS = 0.035
#: The default of `quota.arrival_jitter_seconds`: how much the time from a call's send to its
#: arrival at the vendor varies (connection, network, the vendor's accept). The docs quote this
#: figure; tests/unit/test_config.py checks that they do.
DEFAULT_ARRIVAL_JITTER_SECONDS = 0.025

_RATE_RE = re.compile(r"^\s*(\d+)\s*/\s*(\d*(?:\.\d+)?)\s*(ms|s|m|h)?\s*$")
_PERIOD_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


class Quota(_Strict):
    """The vendor's documented rate for one scope: `limit` calls per `period_seconds`."""

    limit: int = Field(gt=0)
    period_seconds: float = Field(gt=0)
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

    @classmethod
    def parse(cls, text: str, headroom: float | None = None) -> Quota:
        """Parse `N/PERIOD`, e.g. `40/1s`, `100/m`, `5/500ms`."""
        match = _RATE_RE.match(text)
        if not match:
            raise ConfigError(f"rate {text!r} is not N/PERIOD (e.g. 40/1s, 600/1m)")
        count, amount, unit = match.groups()
        seconds = (float(amount) if amount else 1.0) * _PERIOD_UNITS[unit or "s"]
        try:
            return cls(limit=int(count), period_seconds=seconds, headroom=headroom)
        except ValidationError as exc:
            raise ConfigError(f"rate {text!r}: {_first_error(exc)}") from exc

    @property
    def arrival_budget_seconds(self) -> float:
        """How late after its slot a call may reach the vendor: sent late, then delayed."""
        return LATE_SLOT_TOLERANCE_SECONDS + self.arrival_jitter_seconds

    @property
    def safe_headroom(self) -> float:
        """The largest headroom that never exceeds the quota, given arrival jitter.

        Slots of a zero-burst GCRA at `h * limit / period` put at most `floor((T + d) * h * N / T)
        + 1` calls in any window of T = period seconds when each call arrives up to d seconds
        after its slot; that is at most N exactly when `h < T / (T + d)`, whatever N is.
        """
        exact = self.period_seconds / (self.period_seconds + self.arrival_budget_seconds)
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

"""The rate regime's config arm: `rate` calls a period per key, each costing `cost_per_call`.

Spelled on a limit's table as `rate = { limit = 2, period_seconds = 1 }` (sweeper.config.quota),
and `cost_per_call = 5` beside it when the vendor counts points. Its admission is
sweeper.admission.rate (its slots on the key's `scope#` item), its terms
sweeper.admission.rate_terms.
"""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field

from sweeper.config.quota import Quota
from sweeper.config.regimes.base import Arm


class RateArm(Arm):
    """A limit's rate; a call takes `cost_per_call` of its points (GitHub's secondary limit:
    900 points a minute, a mutation 5). A further limit's only (the first limit's cost varies
    by call: `learn.cost`)."""

    regime: Literal["rate"] = "rate"
    rate: Quota
    cost_per_call: int = Field(default=1, ge=1, le=1_000_000)

    ORPHAN_HINTS: ClassVar[dict[str, str]] = {
        "cost_per_call": "cost_per_call counts points of its rate: give a rate of at least "
        "{value} points"
    }

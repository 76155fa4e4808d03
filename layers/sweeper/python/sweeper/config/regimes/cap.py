"""The concurrency cap's config arm: `max_in_flight` calls at the vendor at once per key.

Spelled on a limit's table as `max_in_flight = 20`. Its admission is
sweeper.admission.concurrency (leases on the key's `lease#` item), its terms
sweeper.admission.cap_terms.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from sweeper.config.regimes.base import Arm


class CapArm(Arm):
    """A limit's concurrency cap, fleet-wide, per key."""

    regime: Literal["max_in_flight"] = "max_in_flight"
    max_in_flight: int = Field(
        ge=1, le=1000, description="calls at the vendor at once, fleet-wide, per key"
    )

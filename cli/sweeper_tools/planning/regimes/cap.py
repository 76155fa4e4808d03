"""The concurrency cap's planning (see sweeper_tools.planning.regimes.base): a cap of N allows
N / the mean service time calls per second a key (Little's law), known only where it is; a
further limit's cap costs the looks at its leases (sweeper_tools.planning.reads)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, Final

from sweeper.admission.cap_terms import CapTerm
from sweeper.admission.handoff import LEASE_POLL_HOLDING_SECONDS, LOOK_KEPT_FRESH_SECONDS
from sweeper_tools.planning.regimes.base import Looks, PlanTerm, RegimePlanning

#: A look at a cap's leases: an eventually consistent GetItem, half a read unit.
LEASE_LOOK_READS = 0.5
#: A plan's name for a cap when it binds (`PlanTerm.bound`; sweeper_tools.planning.reads).
CAP_BINDS: Final = "in flight"


class CapPlanning(RegimePlanning[CapTerm]):
    """A limit's cap, to `sweeper plan`."""

    BINDS: ClassVar[str] = CAP_BINDS
    FIGURES: ClassVar[tuple[str, ...]] = ("max_in_flight", "in_flight_per_second")

    def plan(self, mean_service: float | None) -> PlanTerm:
        calls = self.term.calls
        per_second = None if mean_service is None else calls / mean_service
        shown = None if per_second is None else round(per_second, 2)
        figures = {"max_in_flight": calls, "in_flight_per_second": shown}
        return PlanTerm(per_second, self.BINDS, f" ({calls} in flight)", figures)

    @staticmethod
    def plan_line(figures: Mapping[str, Any], mean_service: float) -> str | None:
        calls = figures.get("max_in_flight")
        if calls is None:
            return None
        flight = figures.get("in_flight_per_second")
        return f"{calls} in flight" + (
            "" if flight is None else f" / {mean_service} s = {flight}/s"
        )

    def look_reads(self, looks: Looks) -> float:
        """A call not handed a lease looks at the cap's item before taking one; while the cap
        binds, its batch looks every LEASE_POLL_HOLDING_SECONDS, and one waiter keeps the
        gate's look fresh every LOOK_KEPT_FRESH_SECONDS when the rate has a slack (`fresh`).
        (A cap is a further limit's: the job's scope, listed first, has none.)"""
        if not looks.binds(CapPlanning):
            return LEASE_LOOK_READS
        reads = LEASE_LOOK_READS / LEASE_POLL_HOLDING_SECONDS
        reads += 1.0 / LOOK_KEPT_FRESH_SECONDS if looks.fresh else 0.0
        return reads / max(looks.per_environment, 1e-9)

"""The concurrency cap's planning (see sweeper_tools.planning.regimes.base): a cap of N allows
N / the mean service time calls per second a key (Little's law), known only where it is."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from sweeper.admission.cap_terms import CapTerm
from sweeper_tools.planning.regimes.base import PlanTerm, RegimePlanning


class CapPlanning(RegimePlanning[CapTerm]):
    """A limit's cap, to `sweeper plan`."""

    FIGURES: ClassVar[tuple[str, ...]] = ("max_in_flight", "in_flight_per_second")

    def plan(self, mean_service: float | None) -> PlanTerm:
        calls = self.term.calls
        per_second = None if mean_service is None else calls / mean_service
        shown = None if per_second is None else round(per_second, 2)
        figures = {"max_in_flight": calls, "in_flight_per_second": shown}
        return PlanTerm(per_second, "in flight", f" ({calls} in flight)", figures)

    @staticmethod
    def plan_line(figures: Mapping[str, Any], mean_service: float) -> str | None:
        calls = figures.get("max_in_flight")
        if calls is None:
            return None
        flight = figures.get("in_flight_per_second")
        return f"{calls} in flight" + (
            "" if flight is None else f" / {mean_service} s = {flight}/s"
        )

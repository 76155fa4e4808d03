"""Each limit regime's planning provider, keyed by its config arm's name (`Arm.tag()`).

`sweeper plan` asks `planning_of(limit)` for what the limit's regimes allow, say and cost
(sweeper_tools.planning.regimes.base) and never which kind a limit is; adding a regime adds its
module here and one line of `PLANNING`, in the config's union order (a test fails while an arm
of `sweeper.config.limit.ARMS` has none).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from sweeper.admission.regimes import regime_of
from sweeper.admission.terms import LimitTerm
from sweeper.config import LimitConfig
from sweeper.pacing_rule import Pacing
from sweeper_tools.planning.regimes.base import Looks, PlanTerm, RegimePlanning, Slack
from sweeper_tools.planning.regimes.budget import BudgetPlanning
from sweeper_tools.planning.regimes.cap import CapPlanning
from sweeper_tools.planning.regimes.rate import RatePlanning

#: Each regime's arm name -> its planning provider, in the order a plan shows their figures.
PLANNING: Final[dict[str, type[RegimePlanning[Any]]]] = {
    "rate": RatePlanning,
    "max_in_flight": CapPlanning,
    "budget": BudgetPlanning,
}


def planning_for(term: LimitTerm) -> RegimePlanning[Any]:
    """The planning provider of one regime's term of a limit."""
    return PLANNING[term.ARM.tag()](term)


@dataclass(frozen=True, slots=True)
class LimitPlanning:
    """One limit's regimes together, as `sweeper plan` counts them."""

    limit: LimitConfig
    terms: tuple[RegimePlanning[Any], ...]

    def plan(self, mean_service: float | None) -> PlanTerm:
        """What one key allows in a plan: the tightest known term binds (the first stated when
        none is known), and the figures of every regime (None where the limit states none)."""
        planned = [term.plan(mean_service) for term in self.terms]
        known = [term for term in planned if term.per_second is not None]
        binding = min(known, key=_per_second) if known else planned[0]
        figures: dict[str, Any] = {key: None for kind in PLANNING.values() for key in kind.FIGURES}
        for term in planned:
            figures.update(term.figures)
        return PlanTerm(binding.per_second, binding.bound, binding.note, figures)

    def drains(self, backlog_per_key: int) -> list[str]:
        """What the plan says of a backlog of one key's calls, by each term that bounds it."""
        found = (term.drain(self.limit.name, backlog_per_key) for term in self.terms)
        return [line for line in found if line is not None]

    def pacing(self) -> Pacing | None:
        """The spacing of one key's slots, by the first term that spaces them (None: none)."""
        return next((p for term in self.terms if (p := term.pacing()) is not None), None)

    def look_reads(self, looks: Looks) -> float:
        """Read units a call's own looks at the limit's items cost, each term's (see
        `RegimePlanning.look_reads`)."""
        return sum(term.look_reads(looks) for term in self.terms)

    def slacks(self) -> list[Slack]:
        """What a slack costs each of its terms in rate."""
        found = (term.slack(self.limit.name) for term in self.terms)
        return [slack for slack in found if slack is not None]


def _per_second(term: PlanTerm) -> float:
    return math.inf if term.per_second is None else term.per_second


def planning_of(limit: LimitConfig) -> LimitPlanning:
    """The planning of each regime `limit` states (sweeper.admission.regimes.regime_of)."""
    return LimitPlanning(limit, tuple(planning_for(term) for term in regime_of(limit).terms))


def plan_allows(figures: Mapping[str, Any], mean_service: float) -> str:
    """What one key allows, in a plan's limit line, read from the plan's figures of the limit."""
    parts = (kind.plan_line(figures, mean_service) for kind in PLANNING.values())
    return " and ".join(part for part in parts if part is not None)


__all__ = [
    "PLANNING",
    "LimitPlanning",
    "Looks",
    "PlanTerm",
    "RegimePlanning",
    "Slack",
    "plan_allows",
    "planning_for",
    "planning_of",
]

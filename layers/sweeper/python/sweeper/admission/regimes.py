"""A limit's regimes, picked from its config: what the producer, `status` and the plan ask of it.

`REGIMES` is the union: each regime's terms (sweeper.admission.terms) pick themselves from a
`LimitConfig` (`of`: the limit's arm of the regime). It lists the same regimes, in the same
order, as the config's union of arms (`sweeper.config.limit.RegimeArm`): a new regime is its
arm, its terms, and one line in each. `regime_of` gives a
limit's `LimitRegime`, which puts its terms together: a limit with a rate and a cap allows the
smaller of the two. Callers iterate the limits and ask the regime; none asks which kind it is.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sweeper.admission.budget_terms import BudgetTerm
from sweeper.admission.cap_terms import CapTerm
from sweeper.admission.rate_terms import RateTerm
from sweeper.admission.terms import LimitTerm, PlanTerm, Slack
from sweeper.config import LimitConfig
from sweeper.pacing_rule import Pacing

#: Every regime a limit may state, in the order a plan shows their figures: one line each, as
#: in the config's union (`RegimeArm`), each term naming its arm.
REGIMES: tuple[type[LimitTerm], ...] = (
    RateTerm,
    CapTerm,
    BudgetTerm,
)


@dataclass(frozen=True, slots=True)
class ClaimShare:
    """What one key of a limit lets the producer claim within a horizon."""

    #: Rows one key's calls take within the horizon (at least 1); None: no term can say.
    rows: int | None
    #: A term the claim cannot count (a cap without a planned latency): the consumers hold it.
    to_consumers: bool


@dataclass(frozen=True, slots=True)
class LimitRegime:
    """One limit's regimes together (a rate, a cap, or both on one key)."""

    limit: LimitConfig
    terms: tuple[LimitTerm, ...]

    def claim_share(self, horizon: float, latency_p50: float | None) -> ClaimShare:
        """The rows one key takes within `horizon` seconds: the tightest term's (see
        sweeper.producer.claim_bounds); a cap counts only with a planned latency (p50)."""
        figures = [term.claim_per_second(latency_p50) for term in self.terms]
        rows = [max(1, math.floor(fig * horizon)) for fig in figures if fig is not None]
        return ClaimShare(min(rows) if rows else None, None in figures)

    def allows(self) -> str:
        """What one key allows, as `status` and the console show it."""
        return " and ".join(term.allows() for term in self.terms)

    def plan(self, mean_service: float | None) -> PlanTerm:
        """What one key allows in a plan: the tightest known term binds (the first stated when
        none is known), and the figures of every regime (None where the limit states none)."""
        planned = [term.plan(mean_service) for term in self.terms]
        known = [term for term in planned if term.per_second is not None]
        binding = min(known, key=_per_second) if known else planned[0]
        figures: dict[str, Any] = {key: None for kind in REGIMES for key in kind.FIGURES}
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

    def slacks(self) -> list[Slack]:
        """What a slack costs each of its terms in rate."""
        found = (term.slack(self.limit.name) for term in self.terms)
        return [slack for slack in found if slack is not None]


def _per_second(term: PlanTerm) -> float:
    return math.inf if term.per_second is None else term.per_second


def regime_of(limit: LimitConfig) -> LimitRegime:
    """The regimes `limit` states (config validation makes it state one at least)."""
    found = (kind.of(limit) for kind in REGIMES)
    return LimitRegime(limit, tuple(term for term in found if term is not None))


def plan_allows(figures: Mapping[str, Any], mean_service: float) -> str:
    """What one key allows, in a plan's limit line, read from the plan's figures of the limit."""
    parts = (kind.plan_line(figures, mean_service) for kind in REGIMES)
    return " and ".join(part for part in parts if part is not None)

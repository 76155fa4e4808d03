"""A limit's regimes, picked from its config: what the producer and `status` ask of it.

`REGIMES` is the union: each regime's terms (sweeper.admission.terms) pick themselves from a
`LimitConfig` (`of`: the limit's arm of the regime). It lists the same regimes, in the same
order, as the config's union of arms (`sweeper.config.limit.RegimeArm`): a new regime is its
arm, its terms, its planning provider (sweeper_tools.planning.regimes), and one line in each.
`regime_of` gives a limit's `LimitRegime`, which puts its terms together: a limit with a rate
and a cap allows the smaller of the two. Callers iterate the limits and ask the regime; none
asks which kind it is.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from sweeper.admission.budget_terms import BudgetTerm
from sweeper.admission.cap_terms import CapTerm
from sweeper.admission.rate_terms import RateTerm
from sweeper.admission.terms import GATE_ITEM, LimiterItem, LimitTerm
from sweeper.config import LimitConfig, Policy

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

    def items(self) -> tuple[LimiterItem, ...]:
        """The limiter items one key has: each term's, in the terms' order, none twice."""
        return tuple(dict.fromkeys(item for term in self.terms for item in term.ITEMS))


def regime_of(limit: LimitConfig) -> LimitRegime:
    """The regimes `limit` states (config validation makes it state one at least)."""
    found = (kind.of(limit) for kind in REGIMES)
    return LimitRegime(limit, tuple(term for term in found if term is not None))


def has_gate(policy: Policy, index: int) -> bool:
    """Whether a 429 can close the policy's limit at `index` (its gate is `scope#KEY`): the
    job's scope (the first), a limit whose regimes keep their state on the gate's item (a
    rate: a bare 429 may implicate it), and any limit that `action.limit_header_values` names,
    whatever its regimes (sweeper.admission.limit_gates)."""
    limit = policy.limits[index]
    named = limit.name in set(policy.action.limit_values.values())
    return index == 0 or named or GATE_ITEM in regime_of(limit).items()

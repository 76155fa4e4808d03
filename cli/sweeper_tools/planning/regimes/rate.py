"""The rate's planning (see sweeper_tools.planning.regimes.base): one key's calls per second,
headroom applied; what a slack costs; the spacing of its slots; the binding rate's gate looks;
a learned rate's ceiling."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, Final

from sweeper.admission.base import GATE_READ_LEAD_SECONDS, GATE_RECHECK_LEAD_SECONDS
from sweeper.admission.learned import learned_limit
from sweeper.admission.rate_terms import RateTerm
from sweeper.config import Policy
from sweeper.pacing_rule import Pacing
from sweeper_tools.planning.regimes.base import (
    Looks,
    PlanTerm,
    RegimePlanning,
    Slack,
    per_look,
)

#: A plan's name for a rate when it binds (`PlanTerm.bound`; sweeper_tools.planning.reads).
RATE_BINDS: Final = "rate"
#: How long after a look at the binding rate's gate its slots are covered by it: the lead of
#: the recheck less that of the read (sweeper_tools.planning.reads).
RATE_LOOK_COVERS_SECONDS: Final = GATE_RECHECK_LEAD_SECONDS - GATE_READ_LEAD_SECONDS


class RatePlanning(RegimePlanning[RateTerm]):
    """A limit's rate, to `sweeper plan`."""

    BINDS: ClassVar[str] = RATE_BINDS
    FIGURES: ClassVar[tuple[str, ...]] = ("rate_per_second",)

    def plan(self, mean_service: float | None) -> PlanTerm:
        rate = self.term.quota.rate_per_second
        return PlanTerm(rate, self.BINDS, "", {"rate_per_second": round(rate, 3)})

    @staticmethod
    def plan_line(figures: Mapping[str, Any], mean_service: float) -> str | None:
        rate = figures.get("rate_per_second")
        return None if rate is None else f"{rate}/s"

    def slack(self, limit: str) -> Slack | None:
        quota = self.term.quota
        if not quota.slack_seconds:
            return None
        plain = quota.model_copy(update={"slack_seconds": 0.0})
        return Slack(limit, quota.slack_seconds, quota.rate_per_second, plain.rate_per_second)

    def pacing(self) -> Pacing | None:
        return self.term.quota.pacing()

    def look_reads(self, looks: Looks) -> float:
        """A binding rate's calls read its key's gate before their slots: one look serves the
        calls of the key within RATE_LOOK_COVERS_SECONDS after it; paired, the wide item's
        look serves the calls of every key. A rate that does not bind reads nothing: its
        slots are granted within the lead of the write that took them."""
        if not looks.binds(RatePlanning):
            return 0.0
        covered = looks.per_environment if looks.paired else looks.per_key
        return per_look(covered, RATE_LOOK_COVERS_SECONDS)


def learned_ceiling(policy: Policy) -> tuple[str, str] | None:
    """The learning limit's name and its told rate ("N/Ts"), the most it is paced at; None
    when the policy learns nothing (what `sweeper plan` says of a learned limit)."""
    limit = learned_limit(policy)
    if limit is None or limit.rate is None:
        return None
    return limit.name, f"{limit.rate.limit}/{limit.rate.period_seconds:g}s"

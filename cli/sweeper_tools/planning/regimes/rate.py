"""The rate's planning (see sweeper_tools.planning.regimes.base): one key's calls per second,
headroom applied; what a slack costs; the spacing of its slots; a learned rate's ceiling."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, Final

from sweeper.admission.learned import learned_limit
from sweeper.admission.rate_terms import RateTerm
from sweeper.config import Policy
from sweeper.pacing_rule import Pacing
from sweeper_tools.planning.regimes.base import PlanTerm, RegimePlanning, Slack

#: A plan's name for a rate when it binds (`PlanTerm.bound`; sweeper_tools.planning.reads).
RATE_BINDS: Final = "rate"


class RatePlanning(RegimePlanning[RateTerm]):
    """A limit's rate, to `sweeper plan`."""

    FIGURES: ClassVar[tuple[str, ...]] = ("rate_per_second",)

    def plan(self, mean_service: float | None) -> PlanTerm:
        rate = self.term.quota.rate_per_second
        return PlanTerm(rate, RATE_BINDS, "", {"rate_per_second": round(rate, 3)})

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


def learned_ceiling(policy: Policy) -> tuple[str, str] | None:
    """The learning limit's name and its told rate ("N/Ts"), the most it is paced at; None
    when the policy learns nothing (what `sweeper plan` says of a learned limit)."""
    limit = learned_limit(policy)
    if limit is None or limit.rate is None:
        return None
    return limit.name, f"{limit.rate.limit}/{limit.rate.period_seconds:g}s"

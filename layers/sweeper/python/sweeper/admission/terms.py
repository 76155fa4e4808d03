"""What a limit's regime says outside the consumer: the producer's share, the status view, the plan.

A limit (`sweeper.config.LimitConfig`) states one regime or several (a rate, a concurrency cap,
or both on one key). Beside what a consumer asks of it (`sweeper.admission.base.Admission`),
each regime answers three questions for the code that never calls the vendor, through a
`LimitTerm`: how many calls one of its keys lets through per second for the producer's claim
(`claim_per_second`), what one key allows as `status` and the console show it (`allows`), and
what `sweeper plan` says of it (`plan`, `plan_line`, `slack`, `drain`). One module per regime
implements it (rate_terms.py, cap_terms.py, budget_terms.py), each naming its config arm
(`ARM`, sweeper.config.regimes); sweeper.admission.regimes picks them from a limit, and its
callers (claim bounds, status, console, plan) never ask which kind a limit is.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol, Self

from sweeper.config import LimitConfig
from sweeper.config.regimes import Arm
from sweeper.pacing_rule import Pacing


@dataclass(frozen=True, slots=True)
class PlanTerm:
    """What one regime lets one key through in a plan, at the calls' mean service time."""

    #: Calls per second one key allows (None: not known, a cap without a service time).
    per_second: float | None
    #: The plan's name for it when it binds ("rate", "in flight").
    bound: str
    #: Said after the figure when it binds ("", or " (20 in flight)").
    note: str
    #: What `sweeper plan --json` shows of it (its `FIGURES`, rounded).
    figures: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class Slack:
    """A rate with a slack: one key's rate at the headroom the slack leaves, and without it.

    The slack saves a limiter write (and its wait) for a call whose slot has passed when it
    can go (it waited for a concurrency lease): it takes one its batch banked. It costs the
    headroom: a call may arrive the slack later after its slot (config/quota.py)."""

    limit: str  # the limit's name
    slack_seconds: float
    rate_per_second: float  # headroom applied, the slack counted
    without_slack_per_second: float

    def as_dict(self) -> dict[str, Any]:
        return {
            "limit": self.limit,
            "slack_seconds": self.slack_seconds,
            "rate_per_second": round(self.rate_per_second, 3),
            "without_slack_per_second": round(self.without_slack_per_second, 3),
        }


class LimitTerm(Protocol):
    """One regime of one limit, as the producer, `status` and the plan see it."""

    #: The regime's config arm (sweeper.config.regimes): a member of the config's union.
    ARM: ClassVar[type[Arm]]
    #: The keys of its plan figures (`sweeper plan --json` shows them, None where a limit does
    #: not state the regime).
    FIGURES: ClassVar[tuple[str, ...]]

    @classmethod
    def of(cls, limit: LimitConfig) -> Self | None:
        """The regime's term of `limit`, None when the limit does not state it."""
        ...

    def claim_per_second(self, latency_p50: float | None) -> float | None:
        """The calls one key lets through per second, as the claim counts them (None: the claim
        cannot tell, the consumers hold the limit alone)."""
        ...

    def allows(self) -> str:
        """What one key allows, as `status` and the console show it ("2 calls per 1 s")."""
        ...

    def plan(self, mean_service: float | None) -> PlanTerm:
        """What `sweeper plan` counts of one key at this mean service time (None: unknown)."""
        ...

    def slack(self, limit: str) -> Slack | None:
        """What a slack costs the regime in rate (None: it has none)."""
        ...

    def drain(self, limit: str, backlog_per_key: int) -> str | None:
        """What `sweeper plan` says of a backlog of one key's calls under this regime, when
        the regime bounds it by window (a budget; None: the plan's drain time says it all)."""
        ...

    def pacing(self) -> Pacing | None:
        """The slots one key's calls are spaced by (None: the regime spaces none), for the
        plan's wait for a slot."""
        ...

    @staticmethod
    def plan_line(figures: Mapping[str, Any], mean_service: float) -> str | None:
        """Its part of a plan's limit line, read from the plan's figures (None: not stated)."""
        ...

"""What a limit's regime says to `sweeper plan`: the planning half of its provider.

A regime's runtime half (its config arm, its admission, its terms for the claim and `status`)
ships in the Lambda layer (`sweeper.config.regimes`, `sweeper.admission`). What only a plan
asks of it lives here, one module per regime keyed by its arm's name
(`sweeper_tools.planning.regimes.planning_for`): what one key allows at the calls' mean service
time and the figures `sweeper plan --json` shows (`plan`, `FIGURES`), its part of a plan's
limit line read back from those figures (`plan_line`), what a slack costs it in rate, what it
says of a backlog, the spacing of its slots for the plan's wait for a slot, and the reads its
looks cost (`look_reads`, at the figures of `Looks`). The planner asks `planning_of(limit)` and
never which kind it got.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from sweeper.admission.terms import LimitTerm
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


@dataclass(frozen=True, slots=True)
class Looks:
    """What a limit's looks at its items are priced at (sweeper_tools.planning.reads)."""

    #: The calls a second one environment makes.
    per_environment: float
    #: The calls a second one environment makes to one key of the limit.
    per_key: float
    #: The plan's name of the regime by which the limit binds (`PlanTerm.bound`; None: the
    #: limit does not bind, its calls do not wait at its ceiling).
    binds_by: str | None
    #: The policy's rates are paired (sweeper.admission.pairing): every key's gate is on the
    #: one wide item, whose look covers the batch's calls of every key.
    paired: bool
    #: A waiter keeps its batch's gate look fresh while it waits (the policy's rate has a slack).
    fresh: bool

    def binds(self, regime: type[RegimePlanning[Any]]) -> bool:
        """Whether the limit binds by `regime` (its calls wait for its slots, or leases)."""
        return self.binds_by == regime.BINDS


def per_look(calls_per_second: float, covers_seconds: float) -> float:
    """Reads a call when one look serves the call that made it and the batch's calls of the
    same key within `covers_seconds` after it, at most one a call."""
    return 1.0 / (1.0 + max(0.0, calls_per_second) * covers_seconds)


class RegimePlanning[T: LimitTerm](ABC):
    """The planning contract of one regime, over its term of one limit."""

    #: The keys of its plan figures (`sweeper plan --json` shows them, None where a limit does
    #: not state the regime).
    FIGURES: ClassVar[tuple[str, ...]]
    #: The plan's name for it when it binds (`PlanTerm.bound`).
    BINDS: ClassVar[str]

    def __init__(self, term: T) -> None:
        self.term = term

    @abstractmethod
    def plan(self, mean_service: float | None) -> PlanTerm:
        """What `sweeper plan` counts of one key at this mean service time (None: unknown)."""

    @staticmethod
    @abstractmethod
    def plan_line(figures: Mapping[str, Any], mean_service: float) -> str | None:
        """Its part of a plan's limit line, read from the plan's figures (None: not stated)."""

    def slack(self, limit: str) -> Slack | None:
        """What a slack costs the regime in rate (None: it has none)."""
        return None

    def drain(self, limit: str, backlog_per_key: int) -> str | None:
        """What `sweeper plan` says of a backlog of one key's calls under this regime, when
        the regime bounds it by window (a budget; None: the plan's drain time says it all)."""
        return None

    def pacing(self) -> Pacing | None:
        """The slots one key's calls are spaced by (None: the regime spaces none), for the
        plan's wait for a slot."""
        return None

    def look_reads(self, looks: Looks) -> float:
        """Read units a call's own looks at the limit's items cost under this regime
        (sweeper_tools.planning.reads), at the figures `looks` gives; 0: none."""
        return 0.0

"""The budget's planning (see sweeper_tools.planning.regimes.base): its even pace, and when a
backlog of a key's calls drains.

Planned from the start of a window with nothing spent, one key allows `spendable / period`
calls per second on average; a backlog of a key's calls beyond one window's `spendable` waits
for the windows after it (`budget_drain`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from sweeper.admission.budget_terms import BudgetTerm
from sweeper_tools.planning.regimes.base import PlanTerm, RegimePlanning


class BudgetPlanning(RegimePlanning[BudgetTerm]):
    """A limit's budget, to `sweeper plan`."""

    BINDS: ClassVar[str] = "budget"
    FIGURES: ClassVar[tuple[str, ...]] = ("budget_per_window", "budget_window_seconds")

    def plan(self, mean_service: float | None) -> PlanTerm:
        budget = self.term.budget
        figures = {
            "budget_per_window": budget.spendable,
            "budget_window_seconds": budget.period_seconds,
        }
        note = f" ({budget.describe()})"
        return PlanTerm(budget.spendable / budget.period_seconds, self.BINDS, note, figures)

    @staticmethod
    def plan_line(figures: Mapping[str, Any], mean_service: float) -> str | None:
        calls = figures.get("budget_per_window")
        if calls is None:
            return None
        return f"{calls} per {figures.get('budget_window_seconds'):g} s budget"

    def drain(self, limit: str, backlog_per_key: int) -> str | None:
        budget = self.term.budget
        drain = budget_drain(
            backlog=backlog_per_key,
            budget=budget.limit,
            reserve=budget.limit - budget.spendable,
            others_per_window=0.0,
            window_seconds=budget.period_seconds,
            allowance_now=budget.spendable,
            seconds_left=budget.period_seconds,
        )
        assert drain.seconds is not None  # sweeper's share is at least one call a window
        windows = math.ceil(backlog_per_key / budget.spendable)
        when = f"in {_duration(drain.seconds)} at its even pace"
        if drain.within_window:
            return (
                f"budget of limit {limit}: a backlog of {backlog_per_key} calls a key drains "
                f"within one window, {when}"
            )
        return (
            f"budget of limit {limit}: a backlog of {backlog_per_key} calls a key cannot be "
            f"drained within one window ({budget.describe()}); it drains {when}, "
            f"in its {_ordinal(windows)} window"
        )


@dataclass(frozen=True, slots=True)
class Drain:
    """When a backlog drains under a budget: within the current window or not, and after how
    long (None: never, the others leave sweeper nothing)."""

    within_window: bool
    seconds: float | None


def budget_drain(
    *,
    backlog: int,
    budget: int,
    reserve: float,
    others_per_window: float,
    window_seconds: float,
    allowance_now: float,
    seconds_left: float,
) -> Drain:
    """When `backlog` calls are done, paced by the budget.

    Rule: this window sweeper may still make `allowance_now` calls, spread evenly over the
    `seconds_left` of it; each later window `per_window = budget - reserve - others` calls,
    spread evenly over the window. A backlog within `allowance_now` drains at
    `backlog / allowance_now` of the time left; a larger one takes the rest of this window,
    the whole windows it fills, and the share of the last one it needs. With nothing left
    per window for sweeper, a backlog past this window's allowance never drains.
    """
    if backlog <= 0:
        return Drain(True, 0.0)
    if backlog <= allowance_now:
        return Drain(True, seconds_left * backlog / allowance_now)
    per_window = budget - reserve - others_per_window
    if per_window <= 0:
        return Drain(False, None)
    later = (backlog - allowance_now) / per_window  # windows after this one, in fractions
    return Drain(False, seconds_left + later * window_seconds)


def _duration(seconds: float) -> str:
    if seconds >= 2 * 86_400:
        return f"{seconds / 86_400:.1f} days"
    if seconds >= 2 * 3600:
        return f"{seconds / 3600:.1f} h"
    if seconds >= 120:
        return f"{seconds / 60:.1f} min"
    return f"{seconds:.1f} s"


def _ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"

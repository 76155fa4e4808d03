"""A budget in admission: a limit's calls per window, paced evenly fleet-wide (a wrapper).

A call under limits with a `budget` (sweeper.config.budget) takes one unit of each budget's
window first (sweeper.limiter.budget: one conditional write on the window's item, counted for
the fleet), at the slot the budget's rule gives: what is left of `limit x (1 - reserve)`,
spread evenly over the time left in a fixed window (slots passed unused made up within 1 % of
the window); one every `period / spendable` in a rolling one. A slot within the throttle's
longest wait is waited for in place; one further, or a spent window, sends the record back
with the reason "budget" (the ledger's `wait_budget`), for at most BUDGET_RECHECK_SECONDS.
Then the wrapped regime admits the call (its rate slot, its leases); when it defers the call,
the units taken go back. Why a wrapper: a budget only decides when a call may start, as a
pause does; every other regime's slot and lease is taken after it, unchanged.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from sweeper.admission.around import Around
from sweeper.admission.base import Admission, Deferral, Deferring, Permit, TimeLeft
from sweeper.admission.ticket import Ticket
from sweeper.config import LimitConfig
from sweeper.errors import LimiterError
from sweeper.limiter import Denial
from sweeper.limiter.budget import BudgetBook, BudgetRule, BudgetSlot
from sweeper.limits import SQS_MAX_VISIBILITY_TIMEOUT_SECONDS
from sweeper.observability import Metric

logger = logging.getLogger(__name__)

#: A record whose budget is spent goes back until the window's end, at most the longest SQS
#: hides a message (12 h): so the message shows no earlier than the ledger's time for it, and
#: a day's exhaustion costs a record one or two receives, not one every few minutes (each
#: counts towards the queue's max_receive_count).
BUDGET_RECHECK_SECONDS = float(SQS_MAX_VISIBILITY_TIMEOUT_SECONDS)


def budget_rule(limit: LimitConfig) -> BudgetRule | None:
    """The limiter's rule for a limit's budget (None: the limit has none)."""
    budget = limit.budget
    if budget is None:
        return None
    return BudgetRule(budget.spendable, budget.period_seconds, budget.window, budget.offset_seconds)


class BudgetPaced(Around):
    """`inner`'s admission, after a unit of each of the call's budgets at its slot."""

    @classmethod
    def around(cls, inner: Admission, ticket: Ticket) -> Admission:
        """`inner` wrapped when a limit of the call has a budget, else `inner` itself."""
        budgets = [
            (key, rule)
            for limit, key in zip(ticket.policy.limits, ticket.keys, strict=True)
            if (rule := budget_rule(limit)) is not None
        ]
        if not budgets:
            return inner
        source = ticket.abilities.budgets
        if source is None:
            raise LimiterError("this limiter cannot count budgets")
        return cls(inner, ticket, source.budgets(), budgets)

    def __init__(
        self,
        inner: Admission,
        ticket: Ticket,
        book: BudgetBook,
        budgets: Sequence[tuple[str, BudgetRule]],
    ) -> None:
        super().__init__(inner)
        self._ticket = ticket
        self._book = book
        self._budgets = budgets
        self._taken: list[BudgetSlot] = []

    def admit(self, time_left: TimeLeft) -> Permit | Deferral:
        try:
            for key, rule in self._budgets:
                deferral = self._take(key, rule, time_left)
                if deferral is not None:
                    self._give_back()
                    return deferral
            admitted = self._inner.admit(time_left)
        except BaseException:
            self._give_back()
            raise
        if isinstance(admitted, Deferral):
            self._give_back()  # the call is not made now: its units are someone else's
        return admitted

    def _take(self, key: str, rule: BudgetRule, time_left: TimeLeft) -> Deferral | None:
        """A unit of `key`'s budget, waited for in place up to the throttle's longest wait;
        else the deferral until the budget's next unit (or its next window)."""
        t = self._ticket
        clocks = t.clocks
        waited = False
        while True:
            try:
                horizon = t.horizon(time_left)
            except Deferring as deferring:
                return deferring.deferral
            got = self._book.take(key, rule, horizon)
            now = clocks.now()
            if not waited:
                waited = True
                if isinstance(got, Denial) or got.slot_at > now:
                    clocks.metrics.add_metric(Metric.LIMITER_WAITS, "Count", 1)
            if isinstance(got, Denial):
                wait = got.retry_at - now
                if wait <= horizon:
                    clocks.sleep(max(0.0, wait))
                    continue
                clocks.metrics.add_metric(Metric.BUDGET_DEFERRALS, "Count", 1)
                return Deferral(min(wait, BUDGET_RECHECK_SECONDS), "budget")
            self._taken.append(got)
            if got.slot_at > now:
                clocks.sleep(got.slot_at - now)
            return None

    def _give_back(self) -> None:
        while self._taken:
            taken = self._taken.pop()
            try:
                self._book.give_back(taken)
            except LimiterError:
                logger.warning(
                    "a budget unit could not be given back", extra=dict(self._ticket.ids)
                )

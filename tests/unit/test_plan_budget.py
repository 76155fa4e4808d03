"""`sweeper plan` on a limit with a budget: its even pace binds, and a backlog's drain is said."""

from __future__ import annotations

from sweeper_cli.plan import render
from sweeper_tools.planning.plan import make_plan
from sweeper_tools.planning.regimes.budget import Drain, budget_drain
from tests.unit.test_plan import STORE, _limited, _rate, _vendor

#: Salesforce-like: 100,000 calls a rolling day, 20 % kept for the org's own integrations.
BUDGET = {"limit": 100_000, "window": "rolling", "reserve_fraction": 0.2}


def test_a_budget_binds_at_its_even_pace() -> None:
    # Given a store limit of 2/s with a budget of 100,000 a day, 0.2 kept
    plan = make_plan(_limited({**STORE, "rate": _rate(2), "budget": BUDGET}), _vendor())
    # Then one key is planned at 80,000 a day, evenly: 0.926/s, below the rate
    (limit,) = plan.limits
    assert limit["bound"] == "budget"
    assert limit["per_key_per_second"] == 0.926
    assert (limit["budget_per_window"], limit["budget_window_seconds"]) == (80_000, 86_400.0)
    assert limit["rate_per_second"] == 2.0


def test_a_backlog_within_one_window_drains_within_it_and_says_when() -> None:
    # Given a backlog of 40,000 calls over 2 stores under 80,000 a day each
    policy = _limited({**STORE, "budget": BUDGET})
    plan = make_plan(policy, _vendor(backlog=40_000, scopes=2))
    # Then the plan says each store's 20,000 drain within one window, in a quarter of a day
    assert plan.budget_drain == [
        "budget of limit store: a backlog of 20000 calls a key drains within one window, "
        "in 6.0 h at its even pace"
    ]
    assert plan.as_dict()["budget_drain"] == plan.budget_drain
    assert f"  budget           {plan.budget_drain[0]}" in render(plan.as_dict())


def test_a_backlog_past_one_window_says_it_cannot_and_in_which_window_it_will() -> None:
    # Given 200,000 calls of one store under 80,000 a day
    plan = make_plan(_limited({**STORE, "budget": BUDGET}), _vendor(backlog=200_000))
    # Then the plan says one window cannot drain it, and that the third does, in 2.5 days
    assert plan.budget_drain == [
        "budget of limit store: a backlog of 200000 calls a key cannot be drained within one "
        "window (80000 of 100000 per 86400 s budget (rolling)); it drains in 2.5 days at its "
        "even pace, in its 3rd window"
    ]


def test_a_plan_without_a_budget_or_a_backlog_says_nothing_of_one() -> None:
    assert make_plan(_limited(STORE), _vendor(backlog=1000)).budget_drain == []
    assert make_plan(_limited({**STORE, "budget": BUDGET}), _vendor()).budget_drain == []
    assert "budget_drain" not in make_plan(_limited(STORE), _vendor()).as_dict()


#: A "day" of 60 s with a budget of 6,000, 1,200 kept in reserve, 40 s of it left.
DAY = {"budget": 6000, "reserve": 1200, "window_seconds": 60, "seconds_left": 40}


def test_a_backlog_within_todays_allowance_drains_today() -> None:
    drain = budget_drain(backlog=1000, others_per_window=0, allowance_now=2000, **DAY)
    assert drain == Drain(True, 20.0)


def test_a_larger_backlog_drains_in_later_windows() -> None:
    # Given 2,000 allowed in the 40 s left, then 4,800 per 60 s window
    drain = budget_drain(backlog=9200, others_per_window=0, allowance_now=2000, **DAY)
    # Then 7,200 more take one and a half windows after this one
    assert drain == Drain(False, 40 + 90)


def test_a_backlog_the_others_leave_no_room_for_never_drains() -> None:
    drain = budget_drain(backlog=10, others_per_window=4800, allowance_now=0, **DAY)
    assert drain == Drain(False, None)

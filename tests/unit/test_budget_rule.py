"""A budget's pacing rule (sweeper.limiter.budget.next_slot): over any arrivals, a window never
holds more than the budget less its reserve; under demand beyond it, the spend is even."""

from __future__ import annotations

import bisect
import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sweeper.config.budget import BudgetConfig
from sweeper.limiter import Denial
from sweeper.limiter.budget import BudgetItem, BudgetRule, next_slot

DAY_START = 1_800_057_600.0  # a UTC midnight: a multiple of 86,400, 3,600 and 60


def rule_of(config: BudgetConfig) -> BudgetRule:
    return BudgetRule(config.spendable, config.period_seconds, config.window, config.offset_seconds)


def run(rule: BudgetRule, asks: list[float], horizon: float = 1e9) -> list[float]:
    """Each ask (epoch seconds, in order) takes a slot against one item, as one process whose
    writes never race would; a denied ask is dropped. The slots granted, in order."""
    items: dict[str, BudgetItem] = {}
    slots: list[float] = []
    for now in asks:
        key = rule.item_key("k", now)
        got = next_slot(rule, items.get(key, BudgetItem()), now, horizon)
        if isinstance(got, Denial):
            continue
        slot, items[key] = got
        slots.append(slot)
    return slots


def most_in_any_window(slots: list[float], rule: BudgetRule) -> int:
    """The most slots in one of the rule's windows: a fixed one, or any rolling P seconds."""
    ordered = sorted(slots)
    if rule.window == "fixed":
        counts: dict[float, int] = {}
        for slot in ordered:
            window = rule.window_of(slot)
            assert window is not None
            counts[window[0]] = counts.get(window[0], 0) + 1
        return max(counts.values(), default=0)
    return max(
        (bisect.bisect_left(ordered, s + rule.period_seconds) - i for i, s in enumerate(ordered)),
        default=0,
    )


budgets = st.builds(
    BudgetConfig,
    limit=st.integers(10, 5000),
    period_seconds=st.sampled_from([60.0, 3600.0, 86_400.0]),
    window=st.sampled_from(["fixed", "rolling"]),
    reserve_fraction=st.sampled_from([0.0, 0.1, 0.2, 0.5]),
)


@settings(max_examples=150, deadline=None)
@given(
    config=budgets,
    gaps=st.lists(
        st.one_of(st.just(0.0), st.floats(0.0, 5.0), st.floats(0.0, 20_000.0)),
        min_size=1,
        max_size=400,
    ),
    offset=st.floats(0.0, 1.0),
)
def test_no_window_ever_holds_more_than_the_budget_less_its_reserve(
    config: BudgetConfig, gaps: list[float], offset: float
) -> None:
    # Given a budget and any arrivals (bursts, trickles, long idle gaps), each calling at its slot
    rule = rule_of(config)
    asks, now = [], DAY_START + offset * config.period_seconds
    for gap in gaps:
        now += gap
        asks.append(now)
    # When each asks for a slot
    slots = run(rule, asks)
    # Then no window holds more than limit x (1 - reserve)
    assert most_in_any_window(slots, rule) <= config.spendable
    # And no slot is before its ask's time
    assert all(b >= a for a, b in itertools.pairwise(slots))


@settings(max_examples=100, deadline=None)
@given(
    config=budgets,
    start=st.floats(0.0, 0.5),
    lag=st.floats(0.0, 0.3),
)
def test_under_demand_beyond_it_the_spend_is_within_five_percent_of_even(
    config: BudgetConfig, start: float, lag: float
) -> None:
    # Given a budget whose demand exceeds its pace from `start` of the window on: a call is
    # always waiting, and asks again a little after each slot (up to `lag` of a step late)
    rule = rule_of(config)
    period = config.period_seconds
    first = DAY_START + start * period
    end = DAY_START + period  # the fixed window's end; a rolling one is paced throughout
    span = end - first
    even_step = span / config.spendable if config.window == "fixed" else period / config.spendable
    slots: list[float] = []
    items: dict[str, BudgetItem] = {}
    now = first
    while now < end:
        key = rule.item_key("k", now)
        got = next_slot(rule, items.get(key, BudgetItem()), now, 1e9)
        if isinstance(got, Denial):
            break
        slot, items[key] = got
        slots.append(slot)
        now = slot + lag * even_step  # the next waiting call asks once this one has gone
    # Then by any time t after the first ten steps, the calls made are within 5 % of an even
    # pace from the first ask (a fixed window: what it holds spread over the time left)
    for k, slot in enumerate(slots):
        elapsed = slot - first
        if elapsed < 10 * even_step:
            continue
        even = elapsed / even_step
        assert 0.95 * even <= k + 1 <= 1.05 * even + 1
    # And a fixed window is spent to its last unit, the reserve untouched
    if config.window == "fixed":
        assert len(slots) == config.spendable


def test_a_spent_fixed_window_refuses_until_the_next_one() -> None:
    # Given 480 of 600 per 60 s all spent
    rule = rule_of(BudgetConfig(limit=600, period_seconds=60, reserve_fraction=0.2))
    item = BudgetItem(480, int((DAY_START + 59.9) * 1e6))
    # When a call asks within the window
    got = next_slot(rule, item, DAY_START + 30, horizon=5.0)
    # Then it is refused until the window's end
    assert got == Denial(DAY_START + 60, "budget")
    # And in the next window it is granted at once
    fresh = next_slot(rule, BudgetItem(), DAY_START + 60, horizon=5.0)
    assert not isinstance(fresh, Denial)
    assert fresh[0] == DAY_START + 60


def test_a_slot_beyond_the_horizon_is_refused_unwritten_until_it_comes() -> None:
    rule = rule_of(BudgetConfig(limit=10, period_seconds=100))
    got = next_slot(rule, BudgetItem(1, int((DAY_START + 10) * 1e6)), DAY_START + 1, horizon=2.0)
    assert isinstance(got, Denial)
    assert got.retry_at == pytest.approx(DAY_START + 10)
    assert got.reason == "budget"


def test_a_reserve_that_leaves_nothing_is_refused_in_one_line() -> None:
    with pytest.raises(ValueError, match="leaves sweeper no call"):
        BudgetConfig(limit=1, reserve_fraction=0.5)

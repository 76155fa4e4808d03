"""A budget's pacing rule (sweeper.limiter.budget.next_slot): over any arrivals, a window never
holds more than the budget less its reserve; under demand beyond it, the spend is even."""

from __future__ import annotations

import bisect
import heapq
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


def takers_over_a_day(
    rule: BudgetRule, takers: int, cycle: float, join_every: float
) -> list[float]:
    """A fleet's calls over one fixed window, on a fake clock: `takers` threads join one every
    `join_every` seconds from the window's start (environments starting, batches arriving);
    each asks for a unit, calls at its slot, and asks again `cycle` seconds after it. The
    slots granted, in order."""
    start = DAY_START
    asks = [(start + i * join_every, i) for i in range(takers)]
    heapq.heapify(asks)
    item, slots = BudgetItem(), list[float]()
    while asks:
        now, taker = heapq.heappop(asks)
        got = next_slot(rule, item, now, horizon=2.0)
        if isinstance(got, Denial):
            if got.retry_at < start + rule.period_seconds:
                heapq.heappush(asks, (got.retry_at, taker))
            continue
        slot, item = got
        slots.append(slot)
        heapq.heappush(asks, (slot + cycle, taker))
    return slots


def test_a_slow_start_is_made_up_and_the_day_follows_the_even_line() -> None:
    # Given 4,800 of 6,000 a 60 s day (80/s), and 40 takers that can make 100/s once all have
    # joined, joining one every 50 ms: the first 1.6 s make fewer calls than the pace, and
    # leave the line some 47 calls behind (within 1 % of the day's 4,800, the catch-up's)
    rule = rule_of(BudgetConfig(limit=6000, period_seconds=60, reserve_fraction=0.2))
    # When the fleet calls through the day
    slots = takers_over_a_day(rule, takers=40, cycle=0.4, join_every=0.05)
    # Then the day spends its 4,800, the reserve untouched
    assert len(slots) == 4800
    # And the calls made by any time are never ahead of an even pace from the first call (one
    # call's slack), and from the first tenth of the day on within 5 % of it (the slow start
    # made up, not spread over the rest of the day)
    first, end = slots[0], DAY_START + 60
    for k, slot in enumerate(slots):
        even = 4800 * (slot - first) / (end - first)
        assert k + 1 <= even + 1.001
        if slot - first >= (end - first) / 10:
            assert k + 1 >= 0.95 * even, f"{k + 1} calls by {slot - DAY_START:.2f} s, even {even}"


def test_after_an_idle_spell_at_most_a_hundredth_of_the_window_goes_at_once() -> None:
    # Given 4,800 a 60 s day paced from its start, then nobody calling for 20 s
    rule = rule_of(BudgetConfig(limit=6000, period_seconds=60, reserve_fraction=0.2))
    item = BudgetItem()
    for _ in range(10):
        got = next_slot(rule, item, DAY_START, horizon=2.0)
        assert not isinstance(got, Denial)
        item = got[1]
    # When calls come back all at once, at 30 s
    now, at_once = DAY_START + 30, 0
    while True:
        got = next_slot(rule, item, now, horizon=2.0)
        assert not isinstance(got, Denial)
        slot, item = got
        if slot > now:
            break
        at_once += 1
    # Then what they may make up at once is 1 % of the window's time, 0.6 s at the pace of
    # what is left (4,790 over the 30.6 s from there: 94 calls), then that pace goes on
    assert abs(at_once - 0.6 * 4790 / 30.6) <= 1
    after = next_slot(rule, item, slot, horizon=2.0)
    assert not isinstance(after, Denial)
    assert after[0] - slot == pytest.approx(30.6 / 4790, rel=0.01)

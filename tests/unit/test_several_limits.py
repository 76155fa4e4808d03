"""`reserve_all`: a slot in every limit of a call, all usable at the one time it is sent."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sweeper.adaptive_rate import Adaptive
from sweeper.limiter import Denial, Grant
from sweeper.limiter.several import CallSlots, LimitAsk, Spent, reserve_all


class _Gcra:
    """An in-memory zero-burst GCRA per key, with a gate, at a clock the test moves."""

    def __init__(self, now: float = 0.0) -> None:
        self.now = now
        self.tat: dict[str, float] = {}
        self.closed: dict[str, float] = {}
        self.taken: dict[str, list[float]] = {}
        self.lead = 0.0

    def reserve(
        self,
        scope: str,
        interval: float,
        horizon: float,
        count: int = 1,
        adaptive: Adaptive | None = None,
        not_before: float | None = None,
        slack: float = 0.0,
        tolerance: float = 0.0,
        units: int = 1,
    ) -> Grant | Denial:
        assert tolerance == 0.0  # a zero-burst GCRA
        if self.closed.get(scope, 0.0) > self.now:
            return Denial(self.closed[scope], "throttled")
        slot = max(self.tat.get(scope, 0.0), self.now, not_before or 0.0)
        if slot > self.now + horizon:
            return Denial(slot - horizon, "rate")
        self.tat[scope] = slot + interval
        self.taken.setdefault(scope, []).append(slot)
        return Grant(slot)

    def give_back(self, scope: str, slot_at: float, interval: float) -> bool:
        if self.tat.get(scope) != slot_at + interval:
            return False
        self.tat[scope] = slot_at
        self.taken[scope].remove(slot_at)
        return True


STORE, APP = LimitAsk("store:1", 0.5), LimitAsk("app", 0.1)


def test_a_slot_too_early_for_a_busier_limit_goes_back_and_the_call_goes_at_the_later_one() -> None:
    # Given an idle store and an app whose next free slot is 3.0 s away
    limiter = _Gcra(now=1.0)
    limiter.tat["app"] = 4.0
    spent: list[Spent] = []
    # When a call asks for both
    got = reserve_all(limiter, [STORE, APP], horizon=5.0, spread=0.01, now=limiter.now, spent=spent)
    # Then the store's slot at 1.0 is given back (no call uses it early) and taken again at
    # the app's 4.0: the call holds both at 4.0
    assert got == CallSlots(4.0, {"store:1": 4.0, "app": 4.0})
    assert spent == [Spent("store:1", 1.0, True)]
    # And the store's next slot is one interval after the call's, not after a wasted one
    assert limiter.tat["store:1"] == 4.5


def test_a_closed_limit_refuses_the_call_and_the_other_limits_slots_go_back() -> None:
    limiter = _Gcra(now=1.0)
    limiter.closed["app"] = 7.0
    spent: list[Spent] = []
    got = reserve_all(limiter, [STORE, APP], horizon=5.0, spread=0.01, now=limiter.now, spent=spent)
    assert got == Denial(7.0, "throttled")
    assert spent == [Spent("store:1", 1.0, True)]
    assert limiter.taken["store:1"] == []  # the store's slot is free for the next call


def test_a_limit_full_beyond_the_horizon_refuses_the_call_and_nothing_stays_taken() -> None:
    limiter = _Gcra(now=1.0)
    limiter.tat["app"] = 9.0
    got = reserve_all(limiter, [STORE, APP], horizon=5.0, spread=0.01, now=limiter.now)
    assert isinstance(got, Denial)
    assert got.reason == "rate"
    assert limiter.taken["store:1"] == []


def test_a_call_needs_a_limit() -> None:
    with pytest.raises(ValueError, match="at least one limit"):
        reserve_all(_Gcra(), [], horizon=1.0, spread=0.01, now=0.0)


@settings(max_examples=200, deadline=None)
@given(
    steps=st.lists(
        st.tuples(st.integers(0, 4), st.floats(0.0, 0.3), st.booleans()), min_size=1, max_size=60
    )
)
def test_over_any_calls_every_limit_keeps_its_spacing_and_every_call_its_spread(
    steps: list[tuple[int, float, bool]],
) -> None:
    # Given calls for five stores (2/s each) under an app limit (10/s), at any times, some of
    # them taking a store's slot alone first (another policy's call sharing the store limit)
    limiter = _Gcra()
    spread = 0.01
    used: dict[str, list[float]] = {}
    for store, advance, alone in steps:
        limiter.now += advance
        key = f"store:{store}"
        if alone:
            limiter.reserve(key, 0.5, horizon=2.0)
            continue
        got = reserve_all(
            limiter, [LimitAsk(key, 0.5), APP], horizon=2.0, spread=spread, now=limiter.now
        )
        if isinstance(got, CallSlots):
            # Then each call holds a slot in each of its limits within the spread before it
            assert set(got.slots) == {key, "app"}
            assert all(got.send_at - spread <= s <= got.send_at for s in got.slots.values())
            for k, s in got.slots.items():
                used.setdefault(k, []).append(s)
    # And every slot a call holds is one the limiter granted, once, one interval apart
    for key, slots in used.items():
        assert sorted(slots) == sorted(set(slots))
        assert set(slots) <= set(limiter.taken[key])
        taken = sorted(limiter.taken[key])
        interval = 0.1 if key == "app" else 0.5
        assert all(b - a >= interval - 1e-9 for a, b in itertools.pairwise(taken))

"""The adaptive rate controller (`quota.adaptive`): its bounds hold for every input (property
tests), and the policy file sets it as documented."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sweeper.config import Quota
from sweeper.errors import ConfigError
from sweeper.limiter import Adaptive

RATES = st.floats(min_value=0.01, max_value=10_000, allow_nan=False)
SHARES = st.floats(min_value=0.001, max_value=1.0, allow_nan=False)
TIMES = st.floats(min_value=0, max_value=86_400, allow_nan=False)


@st.composite
def controllers(draw: st.DrawFn) -> Adaptive:
    cap = draw(RATES)
    return Adaptive(
        floor=cap * draw(SHARES),
        cap=cap,
        increase=cap * draw(SHARES),
        cut=draw(st.floats(min_value=0.01, max_value=0.99)),
        cooldown=draw(st.floats(min_value=0.1, max_value=120)),
    )


@given(spec=controllers(), rate=RATES, since=TIMES, elapsed=TIMES)
def test_the_rate_stays_between_floor_and_cap_whatever_it_was_and_however_long_ago(
    spec: Adaptive, rate: float, since: float, elapsed: float
) -> None:
    now = spec.rate_at(rate, since, since + elapsed)
    assert spec.floor <= now <= spec.cap
    assert spec.floor <= spec.after_cut(now) <= spec.cap


@given(spec=controllers(), rate=RATES, since=TIMES, a=TIMES, b=TIMES)
def test_without_a_429_the_rate_rises_by_the_increase_per_second_until_the_cap(
    spec: Adaptive, rate: float, since: float, a: float, b: float
) -> None:
    early, late = sorted((a, b))
    start = spec.rate_at(rate, since, since)
    at_early = spec.rate_at(rate, since, since + early)
    at_late = spec.rate_at(rate, since, since + late)
    assert at_early <= at_late  # never falls on its own
    assert at_late - at_early <= spec.increase * (late - early) + 1e-6 * spec.cap  # additive
    if spec.floor <= rate < spec.cap:  # a stored rate: it rises at exactly that slope to the cap
        expected = min(spec.cap, rate + spec.increase * late)
        assert at_late == pytest.approx(expected, rel=1e-9)
        assert start == pytest.approx(rate, rel=1e-9)


@given(spec=controllers(), rate=RATES)
def test_a_429_cuts_the_rate_by_the_factor_but_never_below_the_floor(
    spec: Adaptive, rate: float
) -> None:
    current = spec.rate_at(rate, 0.0, 0.0)
    cut = spec.after_cut(current)
    assert cut == pytest.approx(max(spec.floor, current * spec.cut), rel=1e-9)
    assert cut <= current
    # and repeated 429s bring it to the floor, where it stays
    for _ in range(2_000):
        cut = spec.after_cut(cut)
    assert cut == pytest.approx(spec.floor, rel=1e-6)


def test_a_known_quota_has_no_controller_and_an_adaptive_one_is_derived_from_the_cap() -> None:
    assert Quota(limit=100, period_seconds=1).adaptive_spec is None
    quota = Quota(limit=100, period_seconds=1, headroom=0.9, adaptive=True)
    spec = quota.adaptive_spec
    assert spec == Adaptive(floor=9.0, cap=90.0, increase=1.8, cut=0.7, cooldown=2.0)


@pytest.mark.parametrize(
    ("field", "value"),
    [("adaptive_floor", 0), ("adaptive_floor", 1.5), ("adaptive_cut", 1), ("adaptive_increase", 0)],
)
def test_a_controller_setting_out_of_range_is_refused(field: str, value: float) -> None:
    with pytest.raises((ValueError, ConfigError)):
        Quota.model_validate({"limit": 10, "period_seconds": 1, "adaptive": True, field: value})

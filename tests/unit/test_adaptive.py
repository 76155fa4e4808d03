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


# -- the climb back after a cut: slow near the rate that drew the 429 ---------------------------


@st.composite
def peaked(draw: st.DrawFn) -> tuple[Adaptive, float]:
    """A controller and a peak (a rate that drew a 429) between its floor and its cap."""
    spec = draw(controllers())
    peak = draw(st.floats(min_value=spec.floor, max_value=spec.cap, allow_nan=False))
    return spec, peak


@given(case=peaked(), rate=RATES, since=TIMES, a=TIMES, b=TIMES)
def test_with_a_peak_the_rate_still_stays_in_bounds_never_falls_and_never_rises_faster(
    case: tuple[Adaptive, float], rate: float, since: float, a: float, b: float
) -> None:
    spec, peak = case
    early, late = sorted((a, b))
    at_early = spec.rate_at(rate, since, since + early, peak)
    at_late = spec.rate_at(rate, since, since + late, peak)
    assert spec.floor <= at_early <= at_late <= spec.cap
    assert at_late - at_early <= spec.increase * (late - early) + 1e-6 * spec.cap
    # and it is never above the rate without a peak: the peak only ever slows the climb
    assert at_late <= spec.rate_at(rate, since, since + late) + 1e-9 * spec.cap


@given(
    case=peaked(),
    share=st.floats(min_value=0, max_value=1),
    part=st.floats(min_value=0, max_value=3),  # of the time through the band
)
def test_within_the_band_below_the_peak_the_rate_rises_at_the_slow_share_of_the_increase(
    case: tuple[Adaptive, float], share: float, part: float
) -> None:
    spec, peak = case
    below = peak * (1 - spec.approach_band)
    rate = below + share * (peak - below) * 0.999  # somewhere in the band, under the peak
    slow = spec.increase * spec.approach_slow
    through = (peak - rate) / slow  # seconds to the peak
    elapsed = part * through
    if rate < spec.floor:
        return  # the floor lifts it past part of the band: another case
    got = spec.rate_at(rate, 0.0, elapsed, peak)
    if elapsed <= through:
        assert got == pytest.approx(min(spec.cap, rate + slow * elapsed), rel=1e-9)
    else:  # past the peak, the usual slope again (the quota may have grown)
        expected = min(spec.cap, peak + spec.increase * (elapsed - through))
        assert got == pytest.approx(expected, rel=1e-6, abs=1e-9 * spec.cap)


@given(case=peaked())
def test_after_a_cut_the_climb_back_to_the_peak_takes_the_fast_part_plus_the_slow_band(
    case: tuple[Adaptive, float],
) -> None:
    spec, peak = case
    start = spec.after_cut(peak)
    below = peak * (1 - spec.approach_band)
    if start >= below:
        return  # a cut shallower than the band: covered by the band test
    fast = (below - start) / spec.increase
    band = (peak - below) / (spec.increase * spec.approach_slow)
    # just before the band's end it is still under the peak; at the end, at it
    assert spec.rate_at(start, 0.0, 0.999 * (fast + band), peak) < peak
    assert spec.rate_at(start, 0.0, fast + band, peak) == pytest.approx(peak, rel=1e-9)
    # and it reaches the band exactly when plain AIMD would have (the fast part is unchanged)
    assert spec.rate_at(start, 0.0, fast, peak) == pytest.approx(below, rel=1e-9)
    # past the peak, the usual slope again: a second later, one increase above it
    after = spec.rate_at(start, 0.0, fast + band + 1.0, peak)
    assert after == pytest.approx(min(spec.cap, peak + spec.increase), rel=1e-9)


def test_the_default_band_makes_the_climb_back_several_times_longer_than_plain_aimd() -> None:
    # the bench's controller: cap 30/s, a 429 at 15/s (its real quota)
    spec = Quota(limit=30, period_seconds=1, headroom=1.0, adaptive=True).adaptive_spec
    assert spec is not None
    start = spec.after_cut(15.0)
    plain = next(t / 10 for t in range(10_000) if spec.rate_at(start, 0, t / 10) >= 15.0)
    slowed = next(t / 10 for t in range(10_000) if spec.rate_at(start, 0, t / 10, 15.0) >= 15.0)
    assert plain == pytest.approx(7.5, abs=0.1)  # 4.5/s back at 0.6/s each second
    assert slowed == pytest.approx(5.0 + 25.0, abs=0.1)  # 3/s fast, then 1.5/s at 0.06/s

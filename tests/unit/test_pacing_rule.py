"""The pacing rule: a GCRA at the derived interval and burst tolerance is never refused.

The limiter's arithmetic is replayed here exactly (whole microseconds: a reservation at `now`
for `count` slots gets `max(tat - tau, now)` and the next ones a step apart, and moves `tat` to
`max(tat, now) + count * step`), driven by reservations at any moments (bursts whenever the
tolerance allows them, idle gaps of any length), and each slot's call arrives anywhere within
the arrival budget after it. The vendor's counters (tests/vendor_counters.py) must refuse
none. The worst case is also built by hand, and with one call more of tolerance it is refused:
the rule is as loose as it may be.
"""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sweeper.config import Quota
from sweeper.pacing_rule import US, Pacing, step_us
from tests.vendor_counters import burst_calls, refused

#: Reservations: (microseconds since the last one, how many slots it asks for).
Requests = list[tuple[int, int]]


def _gcra_slots(requests: Requests, step: int, tolerance: int) -> list[int]:
    """The slots (epoch µs) the limiter grants to `requests`, made in that order."""
    slots: list[int] = []
    tat: int | None = None
    now = 0
    for gap, count in requests:
        now += gap
        first = now if tat is None else max(tat - tolerance, now)
        slots += [first + i * step for i in range(count)]
        tat = (now if tat is None else max(tat, now)) + count * step
    return slots


def _arrivals(slots: list[int], delays: list[float], spread: float) -> list[float]:
    """Each slot's call arriving `delay * spread` seconds after it (delays cycle)."""
    return [slot / US + delays[i % len(delays)] * spread for i, slot in enumerate(slots)]


def _tolerance_us(pacing: Pacing) -> int:
    return round(pacing.tolerance_seconds * US)


def _refused_under(quota: Quota, pacing: Pacing, requests: Requests, delays: list[float]) -> bool:
    step = step_us(pacing.interval_seconds)
    slots = _gcra_slots(requests, step, _tolerance_us(pacing))
    arrivals = _arrivals(slots, delays, quota.arrival_budget_seconds)
    # fixed windows: every offset of the vendor's boundaries that matters (a window starting
    # at an arrival is the worst), and the aligned one
    offsets = [0.0, *arrivals] if quota.algorithm == "fixed_window" else [0.0]
    return any(refused(quota, arrivals, offset) for offset in offsets)


@st.composite
def quotas(draw: st.DrawFn) -> Quota:
    algorithm = draw(st.sampled_from(["sliding_window", "fixed_window", "bucket"]))
    period = draw(st.sampled_from([0.5, 1.0, 2.0]))
    limit = draw(st.integers(1, 30))
    capacity = draw(st.integers(1, 10)) if algorithm == "bucket" else 1
    room = capacity if algorithm == "bucket" else limit
    fields = {
        "limit": limit,
        "period_seconds": period,
        "algorithm": algorithm,
        "capacity": capacity,
        "arrival_jitter_seconds": draw(st.sampled_from([0.0, 0.025, 0.1])),
        "slack_seconds": draw(st.sampled_from([0.0, 0.0, period / 4])),
        "burst": draw(st.one_of(st.just("derived"), st.just(0), st.integers(1, room - 1)))
        if room > 1
        else draw(st.sampled_from(["derived", 0])),
    }
    default = Quota.model_validate(fields)
    # a headroom set lower than the default leaves a derived burst of its own
    share = draw(st.one_of(st.none(), st.floats(0.3, 1.0)))
    if share is None or math.floor(default.safe_headroom * share * 1000) == 0:
        return default
    return Quota.model_validate(
        {**fields, "headroom": math.floor(default.safe_headroom * share * 1000) / 1000}
    )


def _requests(step_us_hint: int) -> st.SearchStrategy[Requests]:
    """Reservations at any moments: at once (bursts), a step or so apart, or after idling."""
    gaps = st.one_of(
        st.just(0),
        st.integers(0, 2 * step_us_hint),
        st.integers(0, 20 * step_us_hint),
    )
    return st.lists(st.tuples(gaps, st.integers(1, 3)), min_size=1, max_size=60)


#: Delays as a share of the arrival budget: the extremes are where the bound is reached.
DELAYS = st.lists(
    st.one_of(st.just(0.0), st.just(1.0), st.floats(0.0, 1.0)), min_size=1, max_size=60
)


@settings(max_examples=500, deadline=None)
@given(quota=quotas(), data=st.data(), delays=DELAYS)
def test_a_gcra_at_the_derived_pacing_is_never_refused_by_the_vendors_rule(
    quota: Quota, data: st.DataObject, delays: list[float]
) -> None:
    # Given the pacing the quota derives (interval and burst tolerance)
    pacing = quota.pacing()
    # When the limiter grants slots to reservations at any moments, and each slot's call
    # arrives anywhere within the arrival budget after it
    requests = data.draw(_requests(step_us(pacing.interval_seconds)))
    # Then the vendor's counter refuses none
    assert not _refused_under(quota, pacing, requests, delays)


def _worst_case(quota: Quota, pacing: Pacing) -> tuple[Requests, list[float]]:
    """An idle scope asked for slot after slot at one moment (the burst, then the rate), each
    call arriving as late as lets it join the next ones: every slot up to the budget arrives
    at the budget (the first ones as late as they may be), the later ones on their slots."""
    count = (quota.capacity if quota.algorithm == "bucket" else quota.limit) + 2
    step = step_us(pacing.interval_seconds)
    slots = _gcra_slots([(0, 1)] * count, step, _tolerance_us(pacing))
    budget = quota.arrival_budget_seconds
    delays = [max(0.0, budget - slot / US) / budget if budget else 0.0 for slot in slots]
    return [(0, 1)] * count, delays


RULES = [
    "10/1s",
    "40/1s",
    "100/1s fixed",
    "60/5s",
    "15/1s bucket:6",
    "100/1s bucket:4",
    "2/1s bucket:40",
]


@pytest.mark.parametrize("text", RULES)
@pytest.mark.parametrize("share", [1.0, 0.8, 0.5])
def test_the_derived_tolerance_is_exact_one_call_more_is_refused(text: str, share: float) -> None:
    # Given a quota at a share of its default headroom (the rest left to the burst), its
    # derived pacing, and the worst case its GCRA lets happen
    default = Quota.parse(text).safe_headroom
    quota = Quota.parse(text, headroom=math.floor(default * share * 1000) / 1000)
    pacing = quota.pacing()
    requests, delays = _worst_case(quota, pacing)
    # Then the vendor refuses none of it
    assert not _refused_under(quota, pacing, requests, delays)
    # But a tolerance of one call more puts one call too many into a window (or the bucket)
    louder = Pacing(pacing.interval_seconds, pacing.tolerance_seconds + pacing.interval_seconds)
    assert _refused_under(quota, louder, *_worst_case(quota, louder))


def test_a_bucket_grants_its_capacity_less_the_jitters_share() -> None:
    # Given nginx's limit_req at 15/s with burst=5 (a bucket of 6) and the default 60 ms budget
    pacing = Quota.parse("15/1s bucket:6").pacing()
    # Then the limiter paces at 0.99 of the refill and grants up to 4 calls beyond the first:
    # B - 1 = 5 less the jitter's share (60 ms at 14.85/s, 0.9 of a call)
    assert pacing.interval_seconds == pytest.approx(1 / (15 * 0.99))
    assert pacing.tolerance_seconds == pytest.approx(6 / 14.85 - 1 / 15 - 0.06, abs=2e-6)
    assert burst_calls(pacing) == 4


def test_a_window_at_its_default_headroom_has_only_the_rounding_to_spare() -> None:
    # Given 10 per second at the default headroom (all the window's room spent on the jitter)
    pacing = Quota.parse("10/1s").pacing()
    # Then there is no call of burst: N * I - T - a is what the headroom's rounding left
    assert burst_calls(pacing) == 0
    assert 0 <= pacing.tolerance_seconds < 0.002


def test_a_burst_of_k_calls_is_paid_for_in_the_default_headroom() -> None:
    # Given 10 per second with room for 2 calls of burst
    quota = Quota(limit=10, period_seconds=1, burst=2)
    # Then the rate is (N - K) / (T + a) and the limiter grants those 2
    assert quota.safe_headroom == math.floor(8 / 1.06 / 10 * 1000) / 1000
    assert burst_calls(quota.pacing()) == 2
    assert Quota(limit=10, period_seconds=1).safe_headroom > quota.safe_headroom


def test_no_burst_keeps_spacing_only() -> None:
    assert burst_calls(Quota.parse("15/1s bucket:6").model_copy(update={"burst": 0}).pacing()) == 0
    assert Quota(limit=15, period_seconds=1, burst=0).pacing() == Pacing(1 / (15 * 0.943))


def test_an_adaptive_quota_has_no_burst() -> None:
    quota = Quota(limit=100, period_seconds=1, headroom=0.5, adaptive=True)
    assert quota.pacing().tolerance_seconds == 0


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"limit": 10, "period_seconds": 1, "burst": 10}, "burst 10 leaves no rate"),
        ({"limit": 15, "period_seconds": 1, "algorithm": "bucket", "burst": 1}, "below 1"),
        ({"limit": 10, "period_seconds": 1, "burst": 2, "headroom": 0.9}, "the most that burst"),
        ({"limit": 10, "period_seconds": 1, "burst": 1, "adaptive": True}, "known quota"),
    ],
)
def test_a_burst_the_rule_cannot_give_is_refused_with_the_fix(
    fields: dict[str, object], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        Quota.model_validate(fields)

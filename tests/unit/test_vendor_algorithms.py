"""The headroom rule per algorithm: no call arrives earlier than the vendor's algorithm allows.

Each vendor algorithm is modelled from its definition (tests/vendor_counters.py) and fed
the arrivals of sweeper's slots: one every `quota.interval_seconds`, each arriving anywhere
between 0 and `quota.arrival_budget_seconds` after its slot (the slack, if the quota has one,
the late tolerance and the jitter). Hypothesis chooses the quota, the
algorithm, the jitter, the slack, the clock offset and every delay.
"""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sweeper.config import MAX_BUCKET_HEADROOM, Quota
from tests.vendor_counters import refused, refused_by_bucket, refused_by_fixed_window


def _arrivals(quota: Quota, fractions: list[float], start: float) -> list[float]:
    """Slot k at `start + k * interval`, arriving `fraction * budget` after it."""
    interval = quota.interval_seconds
    budget = quota.arrival_budget_seconds
    return [start + k * interval + f * budget for k, f in enumerate(fractions)]


@st.composite
def quotas(draw: st.DrawFn) -> Quota:
    algorithm = draw(st.sampled_from(["sliding_window", "fixed_window", "bucket"]))
    period = draw(st.sampled_from([0.5, 1.0, 2.0, 5.0]))
    return Quota(
        limit=draw(st.integers(1, 60)),
        period_seconds=period,
        algorithm=algorithm,
        capacity=draw(st.integers(1, 8)) if algorithm == "bucket" else 1,
        aligned=draw(st.booleans()) if algorithm == "fixed_window" else False,
        arrival_jitter_seconds=draw(st.sampled_from([0.0, 0.005, 0.025, 0.1])),
        slack_seconds=draw(st.one_of(st.just(0.0), st.floats(0.0, period))),
    )


@settings(max_examples=400, deadline=None)
@given(
    quota=quotas(),
    fractions=st.lists(st.floats(0.0, 1.0), min_size=1, max_size=150),
    start=st.floats(0.0, 10.0),
    offset=st.floats(0.0, 10.0),
)
def test_at_the_derived_headroom_no_arrival_is_earlier_than_the_vendors_algorithm_allows(
    quota: Quota, fractions: list[float], start: float, offset: float
) -> None:
    # Given sweeper's slots at the quota's derived headroom, each arriving anywhere within the
    # arrival budget after its slot (and any offset of the vendor's window boundaries)
    arrivals = _arrivals(quota, fractions, start)
    # Then the vendor's own algorithm refuses none of them
    assert refused(quota, arrivals, offset) == []


def _bunched(quota: Quota, budget: float, count: int) -> list[float]:
    """Every slot within the budget of the first arriving as late as the budget lets it (all
    together), the later ones on their slots: the most calls one window or bucket can see."""
    interval = quota.interval_seconds
    return [max(k * interval, budget) for k in range(count)]


@pytest.mark.parametrize(
    "rate", ["100/1s", "100/1s fixed", "60/5s", "15/1s bucket", "15/1s bucket:6", "100/1s bucket:4"]
)
def test_a_slack_left_out_of_the_headroom_lets_the_vendor_refuse_calls(rate: str) -> None:
    # Given a rate whose slots may be used up to 0.4 s after their time
    slack = Quota.parse(rate).model_copy(update={"slack_seconds": 0.4})
    budget = slack.arrival_budget_seconds  # W + d: how late a call may arrive
    # When calls arrive bunched within that budget at the headroom that counts the slack
    count = math.ceil(3 * slack.period_seconds / slack.interval_seconds)
    counted = _bunched(slack, budget, count)
    # Then the vendor refuses none
    assert refused(slack, counted, offset=budget) == []
    # But at the headroom of the same rate without its slack (W left out of the budget), the
    # same bunching within W + d is refused
    left_out = Quota.parse(rate)
    assert left_out.safe_headroom > slack.safe_headroom
    assert refused(left_out, _bunched(left_out, budget, count), offset=budget) != []


def _alternating(quota: Quota, count: int) -> list[float]:
    """Every other call as late as the budget allows, the next right on its slot."""
    return _arrivals(quota, [1.0 if k % 2 == 0 else 0.0 for k in range(count)], 0.0)


def test_a_bucket_of_one_needs_its_own_rule_the_sliding_windows_would_berefused() -> None:
    # Given nginx's limit_req at 15/s without burst, and the default arrival budget (60 ms)
    bucket = Quota.parse("15/1s bucket")
    sliding = Quota.parse("15/1s")
    # Then the bucket's headroom is 1 / (1 + R d) = 1 / 1.9, not the window's T / (T + d)
    assert bucket.safe_headroom == math.floor(1000 / (1 + 15 * 0.06)) / 1000 == 0.526
    assert sliding.safe_headroom == 0.943
    # And a late call followed by a punctual one is let through at the bucket's headroom ...
    assert refused_by_bucket(_alternating(bucket, 40), 15.0, 1) == []
    # ... but refused at the sliding window's (what sweeper sent nginx before: 3.5 % refused)
    assert len(refused_by_bucket(_alternating(sliding, 40), 15.0, 1)) == 20


def test_a_bucket_whose_tolerance_covers_the_jitter_is_used_up_to_the_cap() -> None:
    # Given a bucket of 6 at 15/s (nginx's burst=5): its tolerance 5/15 s exceeds the 60 ms
    quota = Quota.parse("15/1s bucket:6")
    # Then sweeper keeps only the clocks' margin, and still nothing is refused
    assert quota.safe_headroom == MAX_BUCKET_HEADROOM
    assert refused_by_bucket(_alternating(quota, 200), 15.0, 6) == []

    # And the margin is what keeps a long busy run within the bucket when the vendor's clock
    # runs 0.5 % slower than sweeper's: at exactly the rate the drift adds up to a refusal
    def vendor_time(quota: Quota) -> list[float]:
        return [at * 0.995 for at in _alternating(quota, 1000)]

    assert refused_by_bucket(vendor_time(quota), 15.0, 6) == []
    exact = Quota.parse("15/1s bucket:6", headroom=1.0)
    assert refused_by_bucket(vendor_time(exact), 15.0, 6) != []


def _worst_run(quota: Quota) -> list[float]:
    """From an empty bucket, B + 1 slots in a row arriving as close together as the budget
    lets them: the first as late as it may be, the last right on its slot."""
    interval, budget = quota.interval_seconds, quota.arrival_budget_seconds
    last = quota.capacity * interval
    first = budget
    arrivals = [first] + [min(max(k * interval, first), last) for k in range(1, quota.capacity)]
    return [*arrivals, last]


@pytest.mark.parametrize("capacity", [2, 3, 4])
def test_a_bucket_between_one_and_the_jitter_takes_the_partial_rule(capacity: int) -> None:
    # Given a bucket of B at 100/s: its tolerance (B - 1) * 10 ms is below the 60 ms budget
    quota = Quota.parse(f"100/1s bucket:{capacity}")
    # Then h = 1 / (1 + R (d - t) / B)
    exact = 1 / (1 + 100 * (0.06 - (capacity - 1) / 100) / capacity)
    assert quota.safe_headroom == math.floor(exact * 1000) / 1000
    # And B + 1 calls squeezed as close as the budget allows are let through at it ...
    assert refused_by_bucket(_worst_run(quota), 100.0, capacity) == []
    # ... but not at a headroom a little above it: the rule is as loose as it can be
    louder = Quota.parse(f"100/1s bucket:{capacity}", headroom=quota.safe_headroom + 0.01)
    assert refused_by_bucket(_worst_run(louder), 100.0, capacity) != []


def test_a_fixed_window_takes_the_sliding_rule_whatever_its_boundaries() -> None:
    # Given 10 per fixed 1 s window, and a headroom just above the derived one
    quota = Quota.parse("10/1s fixed")
    louder = Quota.parse("10/1s fixed-aligned", headroom=quota.safe_headroom + 0.02)
    assert quota.safe_headroom == Quota.parse("10/1s").safe_headroom
    # When the first call of a run is late and the rest punctual, and a window starts with it
    late_first = _arrivals(louder, [1.0] + [0.0] * 30, 0.0)
    # Then the louder rate puts 11 calls in the window that begins at the late arrival
    assert refused_by_fixed_window(late_first, 10, 1.0, offset=late_first[0]) != []
    assert refused_by_fixed_window(_arrivals(quota, [1.0] + [0.0] * 30, 0.0), 10, 1.0, 0.06) == []


@pytest.mark.parametrize(
    ("text", "algorithm", "capacity", "aligned"),
    [
        ("15/1s", "sliding_window", 1, False),
        ("15/1s sliding", "sliding_window", 1, False),
        ("100/1m fixed", "fixed_window", 1, False),
        ("100/1m fixed-aligned", "fixed_window", 1, True),
        ("15/1s bucket", "bucket", 1, False),
        ("2/1s bucket:40", "bucket", 40, False),
    ],
)
def test_the_rate_text_names_the_algorithm(
    text: str, algorithm: str, capacity: int, aligned: bool
) -> None:
    quota = Quota.parse(text)
    assert (quota.algorithm, quota.capacity, quota.aligned) == (algorithm, capacity, aligned)


@pytest.mark.parametrize("text", ["15/1s fixed:3", "15/1s leaky", "15/1s bucket:0"])
def test_a_rate_text_with_a_wrong_algorithm_isrefused(text: str) -> None:
    from sweeper.errors import ConfigError

    with pytest.raises(ConfigError, match="rate"):
        Quota.parse(text)


def test_a_capacity_or_alignment_without_its_algorithm_isrefused() -> None:
    with pytest.raises(ValueError, match="capacity is a bucket's"):
        Quota(limit=1, period_seconds=1, capacity=3)
    with pytest.raises(ValueError, match="aligned is a fixed window's"):
        Quota(limit=1, period_seconds=1, algorithm="bucket", aligned=True)

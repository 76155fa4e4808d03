"""A quota shared with others: sweeper paces to what is left, keeping its reserve untouched."""

from __future__ import annotations

from collections import deque
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sweeper.vendor_limits.share import QuotaShare, share_of

FLOOR = 0.001
#: 600 per 10 s, told 60/s: the answers below change what they need.
TOLD = {"quota": 600, "window_seconds": 10.0, "ceiling_per_second": 60.0}


def _share(**answer: Any) -> QuotaShare:
    """The split of one answer of `TOLD`'s quota (its figures overridden by `answer`)."""
    return share_of(**{**TOLD, "floor_per_second": FLOOR, **answer})


def test_others_spend_is_what_the_vendor_counts_beyond_sweepers_own() -> None:
    # Given 600 per 10 s, sweeper's own 300 in the window, and 120 remaining
    share = _share(remaining=120, reset_seconds=1, own_spent=300, reserve=60)
    # Then the others spent 180, and sweeper may hold 600 - 60 - 180 = 360 per window
    assert (share.own_spent, share.others_spent) == (300, 180)
    assert share.rate_per_second == pytest.approx(36)
    assert share.wait_seconds == 0


def test_the_pace_never_passes_the_told_and_learned_rate() -> None:
    share = _share(remaining=600, reset_seconds=0, own_spent=0, reserve=0, ceiling_per_second=20)
    assert share.rate_per_second == 20


def test_only_the_reserve_left_closes_the_gate_until_the_reset() -> None:
    share = _share(remaining=60, reset_seconds=3, own_spent=100, reserve=60)
    assert share.wait_seconds == 3


def test_others_spending_it_all_leave_sweeper_the_floor() -> None:
    share = _share(remaining=10, reset_seconds=2, own_spent=0, reserve=60)
    assert share.rate_per_second == FLOOR
    assert share.wait_seconds == 2


ANSWERS = st.tuples(
    st.integers(1, 10_000),  # quota
    st.floats(0.01, 3600),  # window
    st.integers(-5, 12_000),  # remaining, as a vendor may send it out of range
    st.none() | st.floats(0, 3600),  # reset
    st.integers(0, 12_000),  # sweeper's own count
    st.floats(0, 0.99),  # reserve fraction
)


@given(st.floats(0.01, 10_000), st.lists(ANSWERS, min_size=1, max_size=10))
def test_after_any_answers_the_pace_is_within_what_the_latest_leaves_less_the_reserve(
    ceiling: float, answers: list[tuple[int, float, int, float | None, int, float]]
) -> None:
    for quota, window, remaining, reset, own, fraction in answers:
        reserve = quota * fraction
        share = _share(
            quota=quota,
            window_seconds=window,
            remaining=remaining,
            reset_seconds=reset,
            own_spent=own,
            reserve=reserve,
            ceiling_per_second=ceiling,
        )
        left = min(max(remaining, 0), quota)
        # Then over a window sweeper takes at most what is left less the reserve, plus its
        # own calls the vendor counts (they leave the window within it), or the floor
        own_counted = min(own, quota - left)
        allowed = max(FLOOR * window, left - reserve + own_counted)
        assert share.rate_per_second * window <= allowed * (1 + 1e-9)
        assert share.rate_per_second <= ceiling
        # And with only the reserve left, the gate closes until the stated reset
        if left <= reserve and reset:
            assert share.wait_seconds == reset
        assert share.own_spent + share.others_spent == quota - left


def test_paced_by_each_answer_sweeper_takes_what_the_others_leave_less_the_reserve() -> None:
    # Given a sliding window of 600 per 10 s, another client at 30 % of it (18 calls a second,
    # its window full already), a reserve of 60, and sweeper told 60/s, paced at 0.95 of each
    # answer's rate (the rate's headroom, as sweeper.admission.learned holds it)
    quota, window, reserve, dt, headroom = 600, 10.0, 60.0, 0.01, 0.95
    others = deque(i / 18 - window for i in range(180))
    own: deque[float] = deque()
    rate, credit, next_other, peak = 57.0, 0.0, 0.0, 0
    # When sweeper calls at its pace and paces by each answer, for a minute
    for step in range(6000):
        now = step * dt
        while others and others[0] <= now - window:
            others.popleft()
        while own and own[0] <= now - window:
            own.popleft()
        while next_other <= now:
            others.append(next_other)
            next_other += 1 / 18
        credit += rate * dt
        while credit >= 1:
            credit -= 1
            own.append(now)
            used = len(others) + len(own)
            peak = max(peak, used)
            share = _share(
                remaining=quota - used, reset_seconds=1, own_spent=len(own), reserve=reserve
            )
            rate = share.rate_per_second * headroom
    # Then the window never held more than the quota less the reserve
    assert peak <= quota - reserve
    # And sweeper's last window held at least 0.94 of what the others leave less the reserve
    assert len(own) >= 0.94 * (quota - 180 - reserve)

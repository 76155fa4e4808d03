"""The pace a vendor's statements allow: a learned ceiling, a budget's window."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from sweeper.vendor_limits.full import window_over
from sweeper.vendor_limits.pace import LearnedPace, learned_pace, window_start
from sweeper.vendor_reading import LimitReading

# --- a learned ceiling -----------------------------------------------------------------------


def test_a_quota_stated_without_a_told_one_is_the_pace() -> None:
    reading = LimitReading("burst", quota=100, window_seconds=60)
    assert learned_pace(None, reading) == LearnedPace(100 / 60)


def test_a_lowered_quota_is_followed_at_once() -> None:
    # Given a told quota of 10/s and a vendor that now says 5/s
    reading = LimitReading("default", quota=50, window_seconds=10)
    # Then the pace is the vendor's
    assert learned_pace(10.0, reading) == LearnedPace(5.0)


def test_a_raised_quota_never_passes_the_told_ceiling() -> None:
    reading = LimitReading("default", quota=1000, window_seconds=10)
    assert learned_pace(10.0, reading) == LearnedPace(10.0)


def test_a_quota_without_a_window_is_read_over_the_told_window() -> None:
    reading = LimitReading("core", quota=5000)  # GitHub states no window: its hour is told
    assert learned_pace(None, reading, told_window_seconds=3600) == LearnedPace(5000 / 3600)


def test_a_spent_window_waits_for_its_reset_then_goes_on_at_the_steady_rate() -> None:
    reading = LimitReading("core", quota=5000, remaining=0, reset_seconds=363)
    assert learned_pace(None, reading, 3600) == LearnedPace(5000 / 3600, 363)


def test_what_remains_is_spread_over_the_time_to_the_reset() -> None:
    reading = LimitReading("burst", quota=100, window_seconds=60, remaining=10, reset_seconds=30)
    assert learned_pace(None, reading) == LearnedPace(10 / 30)


def test_nothing_stated_and_nothing_told_is_no_pace() -> None:
    assert learned_pace(None, LimitReading("x")) is None


READINGS = st.builds(
    LimitReading,
    name=st.just("p"),
    quota=st.none() | st.integers(0, 10_000),
    window_seconds=st.none() | st.floats(0.001, 86_400),
    remaining=st.none() | st.just(0) | st.integers(0, 10_000),  # 0: the window spent
    reset_seconds=st.none() | st.floats(0, 86_400),
)


#: The rate's headroom a learned limit holds its pace at (a 1 s window's, as in (e) and (f)).
HEADROOM = 0.943
#: The share within which a stated rate is the one held (sweeper.admission.learned.HOLD_WITHIN).
WITHIN = 0.01


@given(st.none() | st.floats(0.001, 10_000), st.lists(READINGS, min_size=1, max_size=8))
def test_after_any_answers_the_pace_is_within_the_ceiling_and_the_latest_answer(
    ceiling: float | None, readings: list[LimitReading]
) -> None:
    # Given any sequence of answers, the pace after each is computed from that answer alone
    held: float | None = None  # the pace the limiter holds (headroom applied), none at first
    for reading in readings:
        pace = learned_pace(ceiling, reading)
        steady = learned_pace(ceiling, LimitReading("p", reading.quota, reading.window_seconds))
        stated = None if steady is None else steady.rate_per_second
        over = window_over(
            reading,
            held_per_second=held,
            stated_per_second=stated,
            headroom=HEADROOM,
            window_seconds=reading.window_seconds or 1.0,
            within=WITHIN,
        )
        # Then nothing remaining leaves the gate open only at a pace held no faster than the
        # latest answer allows (its window full at that pace, not over)
        if reading.remaining == 0 and reading.reset_seconds and not over:
            assert held is not None
            assert stated is not None
            assert held <= stated * HEADROOM * (1 + WITHIN)
        if reading.remaining != 0:
            assert not over  # what remains never closes the gate
        if stated is not None and stated > 0:
            held = stated * HEADROOM
        if pace is None:
            continue
        # Then it never passes the ceiling, nor what the latest answer allows
        if ceiling is not None:
            assert pace.rate_per_second <= ceiling
        if reading.quota is not None and reading.window_seconds:
            assert pace.rate_per_second <= reading.quota / reading.window_seconds
        if reading.remaining is not None and reading.reset_seconds:
            if reading.remaining == 0:
                assert pace.wait_seconds == reading.reset_seconds
            else:
                assert pace.rate_per_second <= reading.remaining / reading.reset_seconds


def test_nothing_remaining_at_the_pace_held_is_a_full_window_not_an_over_one() -> None:
    # Given 25 a second held at its headroom, an answer saying the 25 are in the window
    full = LimitReading("p", quota=25, window_seconds=1, remaining=0, reset_seconds=1)
    over = {"stated_per_second": 25.0, "headroom": HEADROOM, "window_seconds": 1.0}
    # Then at the pace held, the window is full: sweeper's own calls fill it
    assert not window_over(full, held_per_second=25 * HEADROOM, **over)
    # And held faster (the answer halves the limit), or far slower (others spent the 25), or
    # with no pace held yet, it is over: the gate closes until the reset
    assert window_over(full, held_per_second=50 * HEADROOM, **over)
    assert window_over(full, held_per_second=5.0, **over)
    assert window_over(full, held_per_second=None, **over)


# --- a budget per day ------------------------------------------------------------------------


def test_a_day_starts_at_its_offset_from_midnight_utc() -> None:
    day = 86_400
    assert window_start(10 * day + 5, day) == 10 * day
    assert window_start(10 * day + 5, day, offset_seconds=8 * 3600) == 9 * day + 8 * 3600

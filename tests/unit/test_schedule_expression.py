"""Schedule expressions: the times catch-up releases and the local stack fires at."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sweeper.errors import ConfigError
from sweeper.schedule_expression import occurrences


def utc(year: int, month: int, day: int, hour: int = 0, minute: int = 0) -> datetime:
    return datetime(year, month, day, hour, minute, tzinfo=UTC)


def test_a_rate_schedule_fires_every_interval_from_its_anchor() -> None:
    # Given a five-minute rate last fired at 02:02
    # When asking for 02:00-02:20
    times = occurrences(
        "rate(5 minutes)",
        "UTC",
        utc(2026, 11, 29, 2, 0),
        utc(2026, 11, 29, 2, 20),
        anchor=utc(2026, 11, 29, 1, 57),
    )
    # Then the series keeps the anchor's phase, both ends inclusive
    assert [t.minute for t in times] == [2, 7, 12, 17]


def test_a_rate_without_anchor_starts_at_the_range() -> None:
    times = occurrences("rate(1 hour)", "UTC", utc(2026, 1, 1), utc(2026, 1, 1, 3))
    assert times == [utc(2026, 1, 1, h) for h in range(4)]


@given(
    minutes=st.integers(1, 120),
    offset=st.integers(-10_000, 10_000),
    span=st.integers(0, 2_000),
)
def test_rate_occurrences_are_in_range_evenly_spaced_and_on_the_anchors_phase(
    minutes: int, offset: int, span: int
) -> None:
    since = utc(2026, 3, 1)
    until = since + timedelta(minutes=span)
    anchor = since + timedelta(minutes=offset)
    times = occurrences(f"rate({minutes} minutes)", "UTC", since, until, anchor=anchor)
    step = timedelta(minutes=minutes)
    assert all(since <= t <= until for t in times)
    assert all(b - a == step for a, b in itertools.pairwise(times))
    assert all((t - anchor) % step == timedelta(0) for t in times)
    # nothing in range is missed at either end
    assert len(times) in (span // minutes, span // minutes + 1)


def test_cron_days_of_week_count_from_sunday_in_the_policys_time_zone() -> None:
    # Given 02:00 Paris time on weekdays (MON-FRI = 2-6 in EventBridge)
    times = occurrences("cron(0 2 ? * 2-6 *)", "Europe/Paris", utc(2026, 11, 27), utc(2026, 12, 2))
    # Then Friday 27th, Monday 30th, Tuesday 1st: 01:00 UTC each (Paris is UTC+1 in winter)
    assert times == [utc(2026, 11, 27, 1), utc(2026, 11, 30, 1), utc(2026, 12, 1, 1)]


def test_cron_names_steps_and_lists() -> None:
    times = occurrences("cron(0/20 9,17 ? * MON *)", "UTC", utc(2026, 11, 30), utc(2026, 12, 1))
    assert [(t.hour, t.minute) for t in times] == [
        (9, 0),
        (9, 20),
        (9, 40),
        (17, 0),
        (17, 20),
        (17, 40),
    ]


@pytest.mark.parametrize(
    ("expression", "expected_days"),
    [
        ("cron(0 0 L * ? 2026)", [28]),  # last day of February 2026
        ("cron(0 0 LW * ? *)", [27]),  # last weekday: Friday 27th
        ("cron(0 0 1W * ? *)", [2]),  # 1st is a Sunday: Monday 2nd
        ("cron(0 0 ? * 6L *)", [27]),  # last Friday
        ("cron(0 0 ? * 2#2 *)", [9]),  # second Monday
    ],
)
def test_cron_last_nearest_weekday_and_nth_day(expression: str, expected_days: list[int]) -> None:
    times = occurrences(expression, "UTC", utc(2026, 2, 1), utc(2026, 2, 28, 23, 59))
    assert [t.day for t in times] == expected_days


def test_a_cron_year_outside_the_range_fires_never() -> None:
    assert occurrences("cron(0 0 * * ? 2030)", "UTC", utc(2026, 1, 1), utc(2026, 2, 1)) == []


def test_a_time_skipped_by_daylight_saving_fires_once_shifted() -> None:
    # 02:30 does not exist in Paris on 29 March 2026 (clocks jump 02:00 -> 03:00)
    times = occurrences("cron(30 2 * * ? *)", "Europe/Paris", utc(2026, 3, 28), utc(2026, 3, 30))
    assert len(times) == 2
    assert times[1] - times[0] == timedelta(hours=24)


@pytest.mark.parametrize(
    "expression",
    [
        "cron(0 2 * * *)",  # five fields
        "cron(0 2 * * MON *)",  # neither day field is '?'
        "cron(61 2 * * ? *)",
        "rate(0 minutes)",
        "at(2026-11-29T02:00:00)",
        "every day",
    ],
)
def test_bad_or_one_time_expressions_are_refused(expression: str) -> None:
    with pytest.raises(ConfigError):
        occurrences(expression, "UTC", utc(2026, 1, 1), utc(2026, 1, 2))


def test_a_range_without_time_zone_or_reversed_is_refused() -> None:
    with pytest.raises(ConfigError, match="time zone"):
        occurrences("rate(1 day)", "UTC", datetime(2026, 1, 1), utc(2026, 1, 2))
    with pytest.raises(ConfigError, match="before"):
        occurrences("rate(1 day)", "UTC", utc(2026, 1, 2), utc(2026, 1, 1))

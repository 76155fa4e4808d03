"""`sweeper release` and the next run in `status`: the event, and when a schedule fires next."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from sweeper.config import Policy
from sweeper.events import ScheduleEvent
from sweeper.producer.release import next_run, release_event

EVENTS = Path(__file__).resolve().parents[2] / "events"
NOW = datetime(2026, 11, 29, 2, 3, 17, 250_000, tzinfo=UTC)


def test_a_release_event_has_the_sample_events_shape_and_parses_as_a_schedule_event() -> None:
    sample = json.loads((EVENTS / "release_event.json").read_text())
    event = release_event("exports", NOW, region="eu-west-1")
    assert set(event) == set(sample)
    assert {k: v for k, v in event.items() if k != "id"} == {
        k: v for k, v in sample.items() if k != "id"
    }
    parsed = ScheduleEvent.model_validate(event)
    assert (parsed.time, parsed.detail.policy, parsed.detail.release) == (NOW, "exports", True)


def test_a_scheduled_event_is_not_a_release() -> None:
    sample = json.loads((EVENTS / "scheduler_event.json").read_text())
    assert ScheduleEvent.model_validate(sample).detail.release is False


def test_a_rate_schedule_runs_next_one_period_after_its_last_scheduled_run() -> None:
    policy = Policy(name="exports", schedule="rate(5 minutes)")
    last = datetime(2026, 11, 29, 1, 0, tzinfo=UTC)
    assert next_run(policy, NOW, last_scheduled=last) == datetime(2026, 11, 29, 2, 5, tzinfo=UTC)
    exactly = datetime(2026, 11, 29, 2, 5, tzinfo=UTC)
    assert next_run(policy, exactly, last_scheduled=last) == exactly + timedelta(minutes=5)


def test_a_rate_schedule_without_a_recorded_run_uses_the_anchor_or_says_unknown() -> None:
    policy = Policy(name="exports", schedule="rate(1 minute)")
    anchor = datetime(2026, 11, 29, 2, 0, 30, tzinfo=UTC)
    assert next_run(policy, NOW, last_scheduled=None, anchor=anchor) == anchor + timedelta(
        minutes=3
    )
    assert next_run(policy, NOW, last_scheduled=None) is None


@pytest.mark.parametrize(
    ("expression", "zone", "expected"),
    [
        ("cron(0 3 * * ? *)", "UTC", datetime(2026, 11, 29, 3, 0, tzinfo=UTC)),
        ("cron(0 2 * * ? *)", "UTC", datetime(2026, 11, 30, 2, 0, tzinfo=UTC)),
        # 02:30 in Berlin (UTC+1 in winter) is 01:30 UTC, already past today
        ("cron(30 2 * * ? *)", "Europe/Berlin", datetime(2026, 11, 30, 1, 30, tzinfo=UTC)),
        # the first Monday of next year's March
        ("cron(0 0 ? 3 2#1 2027)", "UTC", datetime(2027, 3, 1, 0, 0, tzinfo=UTC)),
    ],
)
def test_a_cron_schedule_runs_next_at_its_first_time_after_now(
    expression: str, zone: str, expected: datetime
) -> None:
    policy = Policy(name="exports", schedule=expression, timezone=zone)
    assert next_run(policy, NOW, last_scheduled=None) == expected


def test_the_local_tick_overrides_the_schedule() -> None:
    policy = Policy(name="exports", schedule="cron(0 3 * * ? *)")
    anchor = datetime(2026, 11, 29, 2, 3, 0, tzinfo=UTC)
    every = timedelta(seconds=2)
    assert next_run(policy, NOW, last_scheduled=None, every=every, anchor=anchor) == (
        anchor + timedelta(seconds=18)
    )


def test_a_one_time_schedule_has_no_next_run() -> None:
    policy = Policy(name="exports", schedule="at(2026-12-01T00:00:00)")
    assert next_run(policy, NOW, last_scheduled=None) is None

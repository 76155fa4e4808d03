"""The drill verdict: the property "every job final, one effect per object, nothing lost"."""

from __future__ import annotations

from dataclasses import replace

import pytest

from sweeper.errors import SweeperError
from sweeper_local.drills import DRILLS, Figures, property_failures, resolve

HELD = Figures(
    jobs=10,
    jobs_final=10,
    succeeded=10,
    vendor_effects=10,
    max_calls_per_key=1,
    time_to_recover_seconds=1.0,
)


def test_the_property_holds_when_every_job_succeeded_once_and_nothing_is_left() -> None:
    assert property_failures(HELD) == []


@pytest.mark.parametrize(
    ("broken", "named"),
    [
        ({"jobs_final": 9, "succeeded": 9}, "1 of 10 jobs not final"),
        ({"succeeded": 9}, "1 jobs final without succeeding"),
        ({"objects_without_effect": 1}, "1 objects without an effect"),
        ({"objects_with_several_effects": 1}, "1 objects with several effects"),
        ({"effects_on_other_objects": 2}, "2 effects on objects of no job"),
        ({"messages_left": 3}, "3 messages left on the queue or its DLQ"),
        ({"messages_left": -1}, "the queues could not be read"),
        ({"jobs": 0, "jobs_final": 0, "succeeded": 0}, "no job was seeded"),
    ],
)
def test_the_property_fails_when_any_part_of_it_breaks(broken: dict[str, int], named: str) -> None:
    assert property_failures(replace(HELD, **broken)) == [named]


def test_all_means_every_drill_and_an_unknown_name_is_refused() -> None:
    assert resolve("all") == list(DRILLS)
    assert resolve("soak") == ["soak"]
    with pytest.raises(SweeperError, match="sweeper drill --list"):
        resolve("nope")


def test_every_drill_names_the_alarm_it_exercises() -> None:
    required = {
        "duplicate-delivery",
        "poison-message",
        "forged-message",
        "throttle-storm",
        "crash-after-accept",
        "database-restart",
        "worker-kill",
        "lease-expiry",
        "pause-resume",
        "job-control",
        "dlq-redrive",
        "catch-up",
        "soak",
    }
    assert required <= set(DRILLS)
    assert all(d.description and d.alarm for d in DRILLS.values())

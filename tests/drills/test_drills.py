"""Every drill as a test: its own local stack, one fault, and the property users care about.

Each drill passes only when every job ended final, with one effect per object and nothing lost,
and when its own checks held (the fault happened and the alarm's metric moved). The soak is
`slow` (kept out of `make test`); `make drills` runs every drill, the soak included.
"""

from __future__ import annotations

import pytest

from sweeper_local.drills import DRILLS, DrillReport, run_drill

pytestmark = [pytest.mark.integration, pytest.mark.drill]


def _marks(name: str) -> list[pytest.MarkDecorator]:
    return [pytest.mark.slow] if DRILLS[name].slow else []


def _explain(report: DrillReport) -> str:
    return f"{report.failures}; figures {report.figures}"


@pytest.mark.parametrize(
    "name", [pytest.param(name, marks=_marks(name), id=name) for name in DRILLS]
)
def test_the_drill_ends_with_every_job_final_and_one_effect_per_object(
    name: str, db_url: str
) -> None:
    # Given a local stack of its own, When the drill injects its fault and the system settles
    report = run_drill(name, database_url=db_url)
    # Then every job is final and succeeded, each object had exactly one effect, nothing is
    # left on the queues, and the drill's own checks held
    assert report.passed, _explain(report)
    figures = report.figures
    assert figures.jobs > 0
    assert figures.jobs_final == figures.succeeded == figures.jobs
    assert figures.vendor_effects == figures.jobs
    assert figures.objects_with_several_keys == 0
    assert figures.messages_left == 0
    assert figures.time_to_recover_seconds is not None
    assert report.checks, "a drill shows that its fault happened"
    assert all(check.ok for check in report.checks.values())

"""Which tests share a pytest-xdist worker (tests/workers.py), and that the session marks them."""

from __future__ import annotations

import pytest

from tests.workers import group_of

THIS_MODULE = "tests/unit/test_workers.py"


@pytest.fixture(scope="module")
def once_per_module() -> str:
    return "set up once"


def test_a_module_with_a_module_fixture_runs_on_one_worker() -> None:
    scopes = ["session", "module", "function"]
    assert group_of("tests/integration/test_x.py::test_a", scopes) == "tests/integration/test_x.py"
    assert group_of("tests/integration/test_x.py::test_b[p::1]", scopes) == (
        "tests/integration/test_x.py"
    )


def test_a_class_fixture_keeps_the_module_together_too() -> None:
    assert group_of("tests/integration/test_x.py::TestX::test_a", ["class"]) == (
        "tests/integration/test_x.py"
    )


def test_the_infra_tests_share_the_worker_that_synthesized_their_variants() -> None:
    assert group_of("tests/infra/test_tables.py::test_a", ["function"]) == "infra-synth"
    assert group_of("tests/infra/test_layer.py::test_a", ["module"]) == "infra-synth"
    assert group_of("tests/infrastructure_x.py::test_a", ["function"]) is None


def test_the_drills_run_one_at_a_time_on_one_worker() -> None:
    drill = "tests/drills/test_drills.py::test_the_drill_ends_with_every_job_final[catch-up]"
    assert group_of(drill, ["function"]) == "drills"
    assert group_of("tests/drills/test_drill_command.py::test_a", ["session"]) == "drills"


def test_session_and_function_fixtures_leave_a_test_free_to_run_anywhere() -> None:
    assert group_of("tests/integration/test_x.py::test_a", ["session", "function"]) is None
    assert group_of("tests/unit/test_x.py::test_a", []) is None


def test_the_session_marks_a_test_that_uses_a_module_fixture(
    once_per_module: str, request: pytest.FixtureRequest
) -> None:
    marker = request.node.get_closest_marker("xdist_group")
    assert marker is not None
    assert marker.args == (THIS_MODULE,)


def test_the_session_leaves_a_test_without_one_unmarked(request: pytest.FixtureRequest) -> None:
    assert request.node.get_closest_marker("xdist_group") is None

"""`make test`: ruff, the format check, mypy, then pytest on several xdist workers, file by file,
then the drills two at a time."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from tests.conftest import RUN_FIRST, pytest_collection_modifyitems, work_unit
from tests.infra.conftest import REPO_ROOT

#: The install stamp is taken as done, so that `make -n` prints the test commands only.
STAMP = ".venv/.installed"


def _dry_run(*args: str) -> list[str]:
    done = subprocess.run(
        ["make", "--no-print-directory", "-C", str(REPO_ROOT), "-o", STAMP, "-n", *args],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    return done.stdout.splitlines()


def test_make_test_checks_then_runs_the_suite_on_four_workers_then_the_drills() -> None:
    lines = _dry_run("test")
    checks = [line for line in lines if line.startswith(".venv/bin/")]
    assert checks == [
        ".venv/bin/ruff check .",
        ".venv/bin/ruff format --check .",
        # mypy beside the suite (a sub-make of both goals: test_mypy_runs_beside_the_suite)
        ".venv/bin/mypy",
        # each worker starts its own services; a file's module fixtures start once, on one worker
        '.venv/bin/pytest -n 4 --dist loadfile --no-loadscope-reorder -m "not slow and not drill"',
        # the drills time their recovery: after the rest, two at a time
        '.venv/bin/pytest -n 2 --dist load -m "drill and not slow"',
    ]
    assert "make --no-print-directory typecheck suite" in lines


#: A stand-in for mypy and pytest: says it started, then waits (at most 20 s) for the other.
WAITS_FOR_THE_OTHER = """#!/bin/sh
touch "$SEEN/$(basename "$0")"
for _ in $(seq 200); do
  [ -e "$SEEN/mypy" ] && [ -e "$SEEN/pytest" ] && { echo both >> "$SEEN/log"; exit 0; }
  sleep 0.1
done
echo alone >> "$SEEN/log"
"""


def test_mypy_runs_beside_the_suite(tmp_path: Path) -> None:
    # Given stand-ins for mypy and pytest that each wait for the other to have started
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name in ("mypy", "pytest"):
        (bin_dir / name).write_text(WAITS_FOR_THE_OTHER, encoding="utf-8")
        (bin_dir / name).chmod(0o755)
    # When make runs the two goals of `make test`'s middle step (the set-up taken as done)
    done = subprocess.run(
        [
            *("make", "--no-print-directory", "-C", str(REPO_ROOT), f"BIN={bin_dir}"),
            *("-o", "install", "-o", STAMP, "-o", "postgres", "-o", "chromium"),
            *("typecheck", "suite"),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        # as from a shell: not a sub-make of a running `make test` (which shares its jobs)
        env={
            **{
                k: v for k, v in os.environ.items() if k not in {"MAKEFLAGS", "MFLAGS", "MAKELEVEL"}
            },
            "SEEN": str(tmp_path),
        },
    )
    # Then both ran at once: each saw the other start
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "log").read_text(encoding="utf-8").split() == ["both", "both"]


def test_the_worker_count_is_one_make_variable() -> None:
    lines = _dry_run("test", "TEST_WORKERS=2")
    assert (
        '.venv/bin/pytest -n 2 --dist loadfile --no-loadscope-reorder -m "not slow and not drill"'
        in lines
    )


def test_every_file_run_first_exists() -> None:
    # a renamed file would silently lose its place at the front
    missing = [path for path in RUN_FIRST if not (REPO_ROOT / path).is_file()]
    assert missing == []


def test_the_slowest_files_are_dealt_first_and_the_rest_keep_their_order() -> None:
    # Given tests collected in path order, two of them from files listed to run first
    nodeids = [
        "tests/infra/test_config.py::test_a",
        f"{RUN_FIRST[1]}::test_b",
        "tests/unit/test_plan.py::test_c",
        f"{RUN_FIRST[0]}::test_d",
        "tests/infra/test_config.py::test_e",
        f"{RUN_FIRST[1]}::test_f",
    ]
    items: list[Any] = [SimpleNamespace(nodeid=n) for n in nodeids]
    # When the suite's hook orders them
    pytest_collection_modifyitems(items)
    # Then the listed files come first, in the list's order, and everything else after, as
    # collected
    assert [i.nodeid.rsplit("::", 1)[1] for i in items] == [
        "test_d",
        "test_b",
        "test_f",
        "test_a",
        "test_c",
        "test_e",
    ]


def test_tests_infra_goes_to_one_worker_and_every_other_file_on_its_own() -> None:
    # its files share synthesized templates, made once per worker
    assert work_unit("tests/infra/test_security.py::test_x[default]") == "tests/infra/"
    assert work_unit("tests/infra/test_layer.py::test_y") == "tests/infra/"
    assert work_unit("tests/integration/test_demo.py::test_z") == "tests/integration/test_demo.py"
    assert work_unit("tests/unit/test_plan.py::test_w[a::b]") == "tests/unit/test_plan.py"

"""`make test`: ruff, the format check, mypy, then pytest on several xdist workers, file by file,
then the drills one at a time."""

from __future__ import annotations

import subprocess

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
        ".venv/bin/mypy",
        # each worker starts its own services; a file's module fixtures start once, on one worker
        '.venv/bin/pytest -n 4 --dist loadfile -m "not slow and not drill"',
        # the drills time their recovery: alone, after the rest
        '.venv/bin/pytest -m "drill and not slow"',
    ]


def test_the_worker_count_is_one_make_variable() -> None:
    lines = _dry_run("test", "TEST_WORKERS=2")
    assert '.venv/bin/pytest -n 2 --dist loadfile -m "not slow and not drill"' in lines

"""The operator CLI installed without the local stack (`pip install 'sweeper[cli]'`).

Each run is a real process whose import system hides the harness packages, as on a laptop
where only the product and the CLI are installed: the operator commands and every `--help`
work, and a command that needs the local stack says so in one line, exit 1, no traceback.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from sweeper_cli.base import HARNESS_PACKAGES, LOCAL_STACK_MISSING
from sweeper_cli.demo import DOOR_NAMES
from sweeper_local.doors import DOORS

#: Runs `sweeper ARGS` with the harness packages missing.
_WITHOUT_HARNESS = """
import importlib.abc, sys
hidden = set(sys.argv[1].split(","))

class Hide(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path, target=None):
        if fullname.partition(".")[0] in hidden:
            raise ModuleNotFoundError(f"No module named {fullname!r}", name=fullname)
        return None

sys.meta_path.insert(0, Hide())
from sweeper_cli import main
main(sys.argv[2:], prog_name="sweeper")
"""

#: One command of each CLI module that imports the harness (a process each: kept short).
NEEDS_THE_LOCAL_STACK = [
    ["demo", "--jobs", "10"],
    ["local", "up"],
    ["drill", "--list"],
    ["bench", "ledger"],
    ["bench", "webhook"],
]


def sweeper_without_harness(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(  # our interpreter, fixed script
        [sys.executable, "-c", _WITHOUT_HARNESS, ",".join(sorted(HARNESS_PACKAGES)), *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.mark.parametrize("args", NEEDS_THE_LOCAL_STACK, ids=" ".join)
def test_a_command_that_needs_the_local_stack_says_so_in_one_line(args: list[str]) -> None:
    done = sweeper_without_harness(*args)

    assert done.returncode == 1
    assert done.stderr.splitlines() == [f"Error: {LOCAL_STACK_MISSING}"]
    assert done.stdout == ""


@pytest.mark.parametrize("args", [["--help"], ["demo", "--help"]], ids=" ".join)
def test_help_works_without_the_local_stack(args: list[str]) -> None:
    done = sweeper_without_harness(*args)

    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("Usage: sweeper")


def test_the_cli_names_the_demo_doors_the_local_stack_has() -> None:
    assert tuple(DOORS) == DOOR_NAMES

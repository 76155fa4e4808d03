"""`sweeper drill`: the list, one-line errors, and the exit code that carries the verdict."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from sweeper_cli import main
from sweeper_local import drills
from sweeper_local.drills import DRILLS, Drill, DrillRun

pytestmark = [pytest.mark.integration, pytest.mark.drill]


def test_the_list_names_every_drill_with_its_alarm() -> None:
    human = CliRunner().invoke(main, ["drill", "--list"])
    machine = CliRunner().invoke(main, ["drill", "--list", "--json"])
    assert human.exit_code == machine.exit_code == 0, human.output + machine.output
    for name, drill in DRILLS.items():
        assert name in human.output
        assert f"[alarm: {drill.alarm}]" in human.output
    listed = json.loads(machine.output)["drills"]
    assert [d["name"] for d in listed] == list(DRILLS)
    assert all(d["alarm"] and d["description"] for d in listed)


def test_an_unknown_drill_is_one_line_naming_the_fix() -> None:
    result = CliRunner().invoke(main, ["drill", "no-such-drill"])
    assert result.exit_code == 1
    assert result.output.strip().splitlines() == [
        "Error: DrillError: no drill named 'no-such-drill'; `sweeper drill --list` shows them"
    ]


def test_no_name_is_a_usage_error() -> None:
    result = CliRunner().invoke(main, ["drill"])
    assert result.exit_code == 2
    assert "name a drill, or `all`" in result.output
    assert "Traceback" not in result.output


def test_a_passing_drill_exits_0_with_its_figures() -> None:
    result = CliRunner().invoke(main, ["drill", "forged-message", "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert report["passed"] is True
    (forged,) = report["drills"]
    assert forged["verdict"] == "pass"
    assert forged["figures"]["jobs_final"] == forged["figures"]["jobs"] == 6
    assert forged["checks"]["MismatchedMessages"]["value"] == 2


def _nothing(run: DrillRun) -> None:
    """A drill that seeds nothing: nothing can be shown to hold."""


def test_a_failing_drill_exits_1_and_says_why(monkeypatch: pytest.MonkeyPatch) -> None:
    # Given a drill whose property cannot hold (no job was seeded)
    empty = Drill("empty", "seeds nothing", "none", _nothing)
    monkeypatch.setitem(drills.DRILLS, "empty", empty)
    # When it runs
    result = CliRunner().invoke(main, ["drill", "empty"])
    # Then the verdict is fail, with the reason, and the exit code says so
    assert result.exit_code == 1, result.output
    assert "failure: no job was seeded" in result.output
    assert "verdict: fail" in result.output

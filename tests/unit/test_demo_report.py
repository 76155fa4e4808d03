"""The demo's human report: one summary line first, and the per-door counts as a table."""

from __future__ import annotations

from typing import Any

from sweeper_cli.demo import door_table, render_report, summary_line


def _report(**changes: Any) -> dict[str, Any]:
    report: dict[str, Any] = {
        "jobs": 500,
        "succeeded": 498,
        "terminal": 2,
        "pending": 0,
        "duplicates": 0,
        "vendor_calls": 503,
        "vendor_429s": 0,
        "elapsed_seconds": 42.06,
        "all_final": True,
        "doors": [],
    }
    report.update(changes)
    return report


def test_the_summary_line_says_whether_every_obligation_is_final_and_the_once_each_counts() -> None:
    # Given a demo whose obligations all settled
    line = summary_line(_report())
    # Then the one line says so with the counts that show it
    assert line == (
        "every obligation final: 498 succeeded, 2 terminal, 0 pending of 500, 0 duplicates, "
        "503 vendor calls, 0 answered 429, in 42.1 s"
    )


def test_an_unfinished_demo_says_not_final_and_an_outside_vendor_has_no_call_counts() -> None:
    line = summary_line(_report(all_final=False, pending=7, vendor_calls=None))
    assert line.startswith("NOT every obligation final: ")
    assert "7 pending of 500" in line
    assert "vendor calls" not in line


def test_the_report_leads_with_the_summary_and_prints_doors_as_a_table() -> None:
    # Given a report with two doors
    doors = [
        {"door": "sql", "seeded": 250, "brought_in": 250, "rejected": 0, "not_due": 3, "runs": 2},
        {
            "door": "webhook",
            "seeded": 250,
            "brought_in": 249,
            "rejected": 1,
            "not_due": 0,
            "runs": 1,
        },
    ]
    lines = render_report(_report(doors=doors))
    # Then the first line is the summary, no line holds a Python list of dicts,
    assert lines[0] == summary_line(_report())
    assert not any("{" in line or "[" in line for line in lines)
    # and the doors close the report as an aligned table, one row per door
    assert lines[-3:] == [
        "door     seeded  brought in  rejected  not due  runs",
        "sql         250         250         0        3     2",
        "webhook     250         249         1        0     1",
    ]


def test_a_report_without_doors_has_no_door_table() -> None:
    lines = render_report(_report())
    assert "obligations by door:" not in lines
    assert door_table([]) == ["door  seeded  brought in  rejected  not due  runs"]


def test_a_demo_falls_short_when_jobs_were_refused_or_never_reached_the_ledger() -> None:
    # Given the counts of a demo whose doors refused some jobs, or lost some
    from sweeper_local.demo_report import demo_problem, refused_at_doors
    from sweeper_local.doors import DoorReport

    doors = [DoorReport("sql", 5, 0, 5, 0, 1), DoorReport("s3", 5, 5, 2, 0, 1)]
    # Then the strays of a door's source are no refusals, its seeded jobs not brought in are
    assert refused_at_doors(doors) == 5
    refused = demo_problem(10, 5, 5, 0, "demo.log")
    assert (refused or "").startswith("5 of 10 obligations were refused")
    short = demo_problem(10, 0, 7, 0, "demo.log")
    assert (short or "").startswith("only 7 of 10 obligations reached the ledger")
    assert demo_problem(10, 0, 10, 3, "demo.log") is not None
    # and a demo whose every job reached the ledger and settled has no problem
    assert demo_problem(10, 0, 10, 0, "demo.log") is None

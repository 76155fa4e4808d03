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

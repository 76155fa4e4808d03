"""Target (j)'s figures: each dead letter's last return after the reopening, read from the
redrive's lines."""

from __future__ import annotations

import json
from pathlib import Path

from sweeper_bench.vendor_redrive import MOVED_MESSAGE, back_figures, moves


def test_a_letter_moved_twice_counts_once_at_its_last_return(tmp_path: Path) -> None:
    # Given the redrive's log: one letter moved before the reopening and again after it,
    # another after it only, and lines that are not moves
    log = tmp_path / "redrive.log"
    lines = [
        {
            "message": MOVED_MESSAGE,
            "timestamp": "2026-12-07 14:00:05,000+0000",
            "operation_key": "a",
        },
        {"message": "redrive run", "timestamp": "2026-12-07 14:00:06,000+0000"},
        {
            "message": MOVED_MESSAGE,
            "timestamp": "2026-12-07 14:01:03,250+0000",
            "operation_key": "a",
        },
        {
            "message": MOVED_MESSAGE,
            "timestamp": "2026-12-07 14:01:01,500+0000",
            "operation_key": "b",
        },
    ]
    log.write_text("\n".join(json.dumps(line) for line in lines) + "\nnot json\n")
    moved = list(moves(str(log)))
    reopening = moved[1][1] - 3.25  # 14:01:00
    # When the figures are read
    figures = back_figures(moved, set(), reopening)
    # Then two dead letters; the last return 3.25 s after the reopening
    assert figures["dead_letters"] == 2
    assert (figures["moves"], figures["moved_more_than_once"]) == (3, 1)
    assert figures["back_after_reopening_seconds_max"] == 3.25
    assert figures["moved_before_reopening"] == 0


def test_a_letter_left_in_the_dlq_is_not_back() -> None:
    # Given a letter moved during the throttle that died again, still in the DLQ at the end
    figures = back_figures([("a", 100.0)], {"a", "b"}, 160.0)
    # Then two dead letters, not every one back, and no return time to state
    assert (figures["dead_letters"], figures["left_in_dlq"]) == (2, 2)
    assert not figures["every_dead_letter_back"]
    assert figures["back_after_reopening_seconds_max"] is None

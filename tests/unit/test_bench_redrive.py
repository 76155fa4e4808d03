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
    # When the figures are read, with one letter still in the DLQ
    figures = back_figures(moved, 1, reopening)
    # Then three dead letters; the last return 3.25 s after the reopening
    assert figures["dead_letters"] == 3
    assert (figures["moves"], figures["moved_more_than_once"]) == (3, 1)
    assert figures["back_after_reopening_seconds_max"] == 3.25
    assert figures["moved_before_reopening"] == 0

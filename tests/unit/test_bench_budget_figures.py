"""Target (i)'s figures (sweeper_bench.vendor_budget.spend_figures): the deviation from an even
pace is the day's spend against the line, not the first calls' share of a count near zero."""

from __future__ import annotations

import pytest

from sweeper_bench.vendor_budget import DAY_SECONDS, spend_figures

DAY = 1_800_000_000.0
SPENDABLE = 4800


def even_day(first: float) -> list[float]:
    """4,800 calls on the even line from `first` to the day's end."""
    step = (DAY + DAY_SECONDS - first) / SPENDABLE
    return [first + k * step for k in range(SPENDABLE)]


def test_a_day_on_the_even_line_deviates_by_at_most_one_call() -> None:
    figures = spend_figures(even_day(DAY + 1.0), DAY)
    assert figures["spent"] == SPENDABLE
    assert figures["max_fraction"] == 0.8
    assert figures["max_deviation_from_even"] <= 1 / SPENDABLE + 1e-4
    assert figures["max_relative_deviation_from_tenth"] <= 1 / 480 + 1e-4  # a call at 6 s
    assert figures["first_call_after_seconds"] == 1.0


def test_one_call_early_among_the_first_is_not_the_day_off_its_pace() -> None:
    # Given an even day whose 11th call came a step early, at the 10th call's time
    arrivals = even_day(DAY)
    arrivals[10] = arrivals[9]
    # Then the day is a call off its line, 1/4800, not a tenth (one call of the 10 due)
    figures = spend_figures(arrivals, DAY)
    assert figures["max_deviation_from_even"] == pytest.approx(2 / SPENDABLE, abs=1e-4)
    assert figures["max_relative_deviation_from_tenth"] <= 1 / 480 + 1e-4


def test_a_day_behind_its_line_by_a_twentieth_reads_five_percent() -> None:
    # Given 240 calls (a twentieth of the day's 4,800) not made after the first 100, the rest
    # on time
    line = even_day(DAY)
    arrivals = line[:100] + line[340:]
    figures = spend_figures(arrivals, DAY)
    # Then the day is 0.05 off its line at most, from the 340th call's time on (4.25 s)
    assert figures["spent"] == SPENDABLE - 240
    assert figures["max_deviation_from_even"] == pytest.approx(0.05, abs=0.001)
    assert figures["max_deviation_from_even_at_seconds"] >= 4.2
    # And against the line's own count, the shortfall reads a half at the first tenth (6 s)
    assert figures["max_relative_deviation_from_tenth"] == pytest.approx(0.5, abs=0.01)
    assert figures["max_relative_deviation_from_tenth_at_seconds"] == pytest.approx(6, abs=0.02)
    assert sum(s["calls"] for s in figures["per_second"]) == SPENDABLE - 240

"""The rate benchmark's figures for a concurrency cap: how full the vendor saw it kept, beside
issue 25's ratio (throughput over cap / median latency) and that ratio's ceiling."""

from __future__ import annotations

from typing import Any

import pytest

from sweeper_bench.rate import CAP_FIGURES, Scenario, _by_limit, _limits_summary
from sweeper_local.vendor import VendorAudit

#: A cap of 2 calls in flight at a vendor median of 0.3 s: the literal allows 2 / 0.3 calls/s.
CAPPED = Scenario(
    "c", "shared", 100, 1.0, None, latency_seconds=0.3, in_flight_cap=2, per_limit=True
)


def _audit(answered: tuple[tuple[float, float], ...]) -> VendorAudit:
    arrivals = tuple(sorted(at for at, _ in answered))
    return VendorAudit(
        calls_total=len(answered),
        calls_by_key={},
        effects_by_key={},
        effects_total=len(answered),
        responses_by_status={204: len(answered)},
        throttled_total=0,
        max_calls_in_window=0,
        window_seconds=1.0,
        arrivals=arrivals,
        accepted_total=len(answered),
        max_in_flight=2,
        quota_rejections_by_limit={"quota": 0, "in_flight": 0},
        max_calls_in_window_by_limit={"quota": 4, "in_flight": 2},
        answered=answered,
    )


def test_a_cap_kept_full_then_idle_reads_its_occupancy_beside_the_literal_ratio() -> None:
    # Given two calls held at once from 0 to 1 s (each 0.5 s), then nothing until the run's end
    audit = _audit(((0.0, 0.5), (0.0, 0.5), (0.5, 1.0), (0.5, 1.0)))
    # When the bench reads it over the utilization's span, the first call to the end at 2 s
    figures = _by_limit(CAPPED, audit, ended=2.0)
    # Then the cap was half used over the span (full for 1 s of 2), at a mean latency of 0.5 s
    assert figures["cap_occupancy"] == 0.5
    assert figures["vendor_mean_in_flight"] == 1.0
    assert figures["vendor_mean_latency_seconds"] == 0.5
    # 4 calls in 2 s, against 2 / 0.3 s: the literal ratio, the headline, its ceiling 0.3 / 0.5
    assert figures["throughput_per_second"] == 2.0
    assert figures["throughput_vs_cap_over_p50"] == 0.3
    assert figures["utilization_of_binding_limit"] == figures["throughput_vs_cap_over_p50"]
    assert figures["throughput_vs_cap_over_p50_ceiling"] == 0.6
    assert figures["binding_limit"] == "vendor"


def test_occupancy_reaches_one_where_the_literal_ratio_stops_at_its_ceiling() -> None:
    # Given the cap kept full over the whole span, at a mean latency twice the median
    audit = _audit(((0.0, 0.6), (0.0, 0.6), (0.6, 1.2), (0.6, 1.2)))
    # When
    figures = _by_limit(CAPPED, audit, ended=1.2)
    # Then the whole cap was used, and the literal ratio reads its ceiling
    assert figures["cap_occupancy"] == 1.0
    assert figures["throughput_vs_cap_over_p50"] == pytest.approx(0.5)
    assert figures["throughput_vs_cap_over_p50_ceiling"] == 0.5


def test_a_scenario_without_a_cap_has_no_cap_figures() -> None:
    uncapped = Scenario("d", "shared", 10, 1.0, None, scopes=10, per_limit=True)
    figures = _by_limit(uncapped, _audit(((0.0, 0.5),)), ended=1.0)
    assert not set(CAP_FIGURES) & set(figures)


def test_the_summary_carries_the_cap_figures_of_both_windows() -> None:
    # Given the two runs of (c): the 1 s window's, then the 5 s window's
    one = _run(_by_limit(CAPPED, _audit(((0.0, 0.5), (0.0, 0.5))), ended=1.0))
    five = _run(_by_limit(CAPPED, _audit(((0.0, 0.5), (0.0, 0.5))), ended=0.5))
    # When
    summary = _limits_summary("c", [one, five])
    # Then each cap figure is there, the 1 s window's first
    assert summary["cap_occupancy"] == [0.5, 1.0]
    assert summary["throughput_per_second"] == [2.0, 4.0]
    assert all(summary[key] == [one[key], five[key]] for key in CAP_FIGURES)


def _run(figures: dict[str, Any]) -> dict[str, Any]:
    return {**figures, "vendor_max_in_flight": 2, "dynamodb_writes_per_job": 2.0}

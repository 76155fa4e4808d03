"""`sweeper bench rate`'s several-limits scenarios: each runs, prints its fields, and the
vendor's per-limit counters count what they say (a deliberate overload shows in them)."""

from __future__ import annotations

import threading
import time
import urllib.error
import urllib.request

import pytest
from click.testing import CliRunner

from sweeper_bench.rate import (
    CAP_FIGURES,
    LIMIT_SCENARIOS,
    _by_limit,
    limit_scenarios,
    run_rate_bench,
)
from sweeper_cli import main
from sweeper_local.vendor import FurtherLimits, VendorSimulator
from tests.conftest import PgServer

pytestmark = pytest.mark.integration

LIMITS = {"a": {"scope", "app"}, "b": {"scope", "app"}, "c": {"scope", "vendor"}, "d": {"scope"}}
BINDING = {"a": "app", "b": "scope", "c": "vendor", "d": "scope"}


def _delete(url: str, tenant: str, n: int) -> int:
    request = urllib.request.Request(
        f"{url}/v1/tenants/{tenant}/objects/o{n}",
        method="DELETE",
        headers={"Idempotency-Key": f"k{n}"},
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return int(answer.status)
    except urllib.error.HTTPError as exc:
        return exc.code


def test_every_scenario_runs_briefly_and_prints_its_figures_per_limit(
    pg_server: PgServer,
) -> None:
    # Given each several-limits scenario, run for 5 s on each window
    result = run_rate_bench(
        parts=("limits",),
        limit_names=tuple(LIMIT_SCENARIOS),
        limits_seconds=5.0,
        database_url=pg_server.admin_url,
    )
    # Then each ran (the vendor accepted calls) and printed the utilization of its binding
    # limit on both windows, per limit its self-caused 429s and its busiest window beside what
    # it allows, and DynamoDB writes per job (5 s runs on a shared machine: the figures
    # themselves are not judged here)
    assert [s["scenario"] for s in result["limits"]] == ["a", "b", "c", "d"]
    for summary in result["limits"]:
        name = summary["scenario"]
        assert sum(run["accepted"] for run in summary["runs"]) > 0, name
        assert summary["binding_limit"] == BINDING[name]
        assert isinstance(summary["utilization_1s_window"], float)
        assert isinstance(summary["utilization_5s_window"], float)
        assert set(summary["self_caused_429s_by_limit"]) == LIMITS[name]
        for window in ("1s", "5s"):
            busiest = summary["max_calls_in_any_window_by_limit"][window]
            assert set(busiest) == LIMITS[name]
            assert all(set(figures) == {"most", "allowed"} for figures in busiest.values())
        assert all(w is not None and w > 0 for w in summary["dynamodb_writes_per_job"])
        # and, for the concurrency cap's scenario alone, how full the vendor saw the cap kept
        cap_figures = {key for key in CAP_FIGURES if key in summary}
        assert cap_figures == (set(CAP_FIGURES) if name == "c" else set()), name
        assert [run["quota"] for run in summary["runs"]] == [
            f"{s.limit}/{s.period_seconds:g}s" for s in limit_scenarios(name)
        ]
    # And each took the batch `sweeper plan` recommends for its turnovers, (d)'s worked by
    # hand: 94.3/s (98.8/s on the 5 s window) over 4 environments, a turnover of the mean
    # service (0.162 + 0.03 s) and 0.25 s: 23.6 x 0.443 x 0.97 / 0.03 = 337 records, 340
    # (24.7 x 0.443 x 32.3 = 353, 360)
    sizes = {s["scenario"]: [run["batch_size"] for run in s["runs"]] for s in result["limits"]}
    assert sizes["d"] == [340, 360]
    # and how much of the machine its host gave to others meanwhile (a share of its time)
    stolen = [run["machine_cpu_stolen_share"] for s in result["limits"] for run in s["runs"]]
    assert all(share is not None and 0 <= share <= 1 for share in stolen)
    assert all(size > 100 for runs in sizes.values() for size in runs)
    assert "scenarios" not in result
    assert "real_rates" not in result


def test_a_scenario_without_the_limits_part_is_refused() -> None:
    result = CliRunner().invoke(main, ["bench", "rate", "--only", "real", "--scenario", "a"])
    assert result.exit_code == 2
    assert "--only" in result.output


def test_the_per_limit_counters_show_a_deliberate_overload() -> None:
    # Given a vendor allowing 2 calls/s per tenant, 3/s for the app and 2 calls at once, each
    # call held 0.2 s, and the bench's scenario (a) reading its audit
    scenario = limit_scenarios("a")[0]
    further = FurtherLimits(app=(3, 1.0), in_flight=2)
    with VendorSimulator(
        quota=(2, 1.0), quota_scope="tenant", latency_seconds=0.2, further_limits=further
    ) as sim:
        # When one tenant sends 3 calls one after another (its window refuses the third), then
        # four tenants send at once (the app's window and the in-flight cap refuse some)
        statuses = [_delete(sim.url, "t0", n) for n in range(3)]
        time.sleep(1.1)
        threads = [
            threading.Thread(target=lambda t=t: statuses.append(_delete(sim.url, f"u{t}", 10 + t)))
            for t in range(4)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        audit = sim.audit()
        ended = time.monotonic()
    # Then the vendor counted each refusal under its own limit
    assert audit.quota_rejections_by_limit["quota"] == 1
    assert audit.quota_rejections_by_limit["app"] >= 1
    assert audit.quota_rejections_by_limit["in_flight"] >= 1
    assert statuses.count(429) == audit.quota_rejections
    # and each limit's busiest window is past what it allows
    assert audit.max_calls_in_window_by_limit["quota"] == 3
    assert audit.max_calls_in_window_by_limit["app"] == 4
    assert audit.max_calls_in_window_by_limit["in_flight"] >= 3
    # And the bench reports them under the policy's names of the limits
    figures = _by_limit(scenario, audit, ended)
    assert figures["self_caused_429s_by_limit"]["scope"] == 1
    assert figures["max_calls_in_any_window_by_limit"]["app"]["most"] == 4
    assert figures["binding_limit"] == "app"

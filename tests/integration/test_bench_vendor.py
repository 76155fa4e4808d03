"""`sweeper bench rate --only vendor`: each scenario's harness runs briefly and its counts add
up (the figures themselves are a benchmark's, never judged here); the simulator's knobs the
scenarios use do what they say."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

import click
import pytest
from click.testing import CliRunner

from sweeper_bench import vendor as vendor_bench
from sweeper_bench.rate import LIMIT_SCENARIOS, _stack
from sweeper_bench.vendor import VENDOR_SCENARIOS
from sweeper_bench.vendor_harness import VendorRun, VendorRunOptions
from sweeper_cli import main
from sweeper_cli.bench import bench_rate
from sweeper_local.graphql_cost import GRAPHQL_PATH, GraphqlAudit, PointsApi
from sweeper_local.vendor import VendorAudit, VendorProcess, VendorSimulator, fetch_audit
from tests.conftest import PgServer

pytestmark = pytest.mark.integration

#: Each scenario's run, as short as the harness allows, on one window.
BRIEF = VendorRunOptions(seconds=5.0, periods=(1,))


def _call(
    url: str, path: str, method: str = "DELETE", key: str | None = None
) -> tuple[int, dict[str, str]]:
    headers = {"Idempotency-Key": key} if key else {}
    request = urllib.request.Request(f"{url}{path}", method=method, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return int(answer.status), dict(answer.headers)
    except urllib.error.HTTPError as exc:
        return exc.code, dict(exc.headers)


def test_a_scheduled_quota_change_applies_from_its_time_and_is_stated() -> None:
    # Given a vendor of 4 calls a minute stating it in the IETF fields
    with VendorSimulator(quota=(4, 60), quota_scope="global", limit_dialect="ratelimit") as sim:
        assert _call(sim.url, "/v1/tenants/t/objects/o0", key="k0")[0] == 204
        # When it is told to halve its quota from now on
        status, _ = _call(sim.url, "/_quota?limit=2&period=60&starts_in=0", method="POST")
        assert status == 200
        answers = [_call(sim.url, f"/v1/tenants/t/objects/o{n}", key=f"k{n}") for n in (1, 2)]
        audit = fetch_audit(sim.url)
    # Then the next call is admitted against the new quota (the second in the window of 2)
    # and states it; the one after is refused, its arrival recorded with the refusal
    assert answers[0][0] == 204
    assert answers[0][1]["RateLimit-Policy"] == '"quota";q=2;w=60'
    assert answers[1][0] == 429
    assert audit.quota_rejections == 1
    assert len(audit.quota_rejected_at) == 1
    assert audit.quota_rejected_at[0] == audit.arrivals[-1]
    assert len(audit.quota_changed_at) == 1


def test_a_quota_change_that_is_not_a_quota_is_refused() -> None:
    with VendorSimulator(quota=(4, 60), limit_dialect="ratelimit") as sim:
        for query in ("limit=0&period=60", "limit=2", "limit=2&period=1.5", "limit=2&period=-1"):
            assert _call(sim.url, f"/_quota?{query}", method="POST")[0] == 400, query


def test_the_graphql_audit_is_served_with_the_bucket_level() -> None:
    # Given a simulator process whose points bucket holds 100, each call costing 7
    vendor = VendorProcess("--graphql-bucket", "100:1", "--graphql-costs", "7-7")
    try:
        body = json.dumps({"query": "mutation", "variables": {"id": "p1"}}).encode()
        request = urllib.request.Request(f"{vendor.url}{GRAPHQL_PATH}", data=body, method="POST")
        with urllib.request.urlopen(request, timeout=10):
            pass
        # When its GraphQL audit is read over HTTP
        audit = vendor.graphql_audit()
    finally:
        vendor.stop()
    # Then it says the call, its points and the level left (restored a little since)
    assert (audit.calls_total, audit.throttled_total, audit.points_charged) == (1, 0, 7.0)
    assert audit.effects_by_id == {"p1": 1}
    ((store, level),) = audit.levels.items()
    assert 93.0 <= level < 100.0, store
    assert audit.first_call_at is not None
    assert PointsApi(maximum=100, restore_rate=1).audit().first_call_at is None


def _counts_add_up(run: dict[str, Any]) -> None:
    statuses, ledger = run["responses_by_status"], run["ledger"]
    # every job seeded is in the ledger, in some status; each object called to effect once
    assert sum(ledger.values()) == run["seeded"]
    assert run["settled"] == ledger.get("succeeded", 0) + ledger.get("failed", 0)
    assert run["most_effects_on_one_object"] <= 1
    # a job succeeded only after its effect (an effect may lack its settle when the run stops)
    assert run["effects"] >= ledger.get("succeeded", 0)
    assert statuses.get("429", 0) == run["self_caused_429s"]


def _run_of(arrivals: list[float], answered: list[float], rejected: list[float]) -> VendorRun:
    """A run whose vendor saw `arrivals`, answered each at `answered`, its quota refusing
    those arriving at `rejected`."""
    audit = VendorAudit(
        calls_total=len(arrivals),
        calls_by_key={},
        effects_by_key={},
        effects_total=0,
        responses_by_status={},
        throttled_total=len(rejected),
        max_calls_in_window=0,
        window_seconds=1.0,
        arrivals=tuple(arrivals),
        answered=tuple(sorted(zip(arrivals, answered, strict=True), key=lambda a: a[1])),
        quota_rejections=len(rejected),
        quota_rejected_at=tuple(rejected),
    )
    graphql = GraphqlAudit(0, 0, 0.0, {})
    return VendorRun(audit, graphql, graphql, 0.0, 10.0, 0, 0, {}, {})


def test_the_429s_after_a_change_are_split_at_the_first_answer_that_could_state_it() -> None:
    # Given calls around a change at 5.0: two held across it, three arriving after it, the
    # first answer to a call that arrived after it coming at 5.15
    arrivals = [4.8, 4.9, 5.02, 5.1, 5.2]
    answered = [5.05, 5.1, 5.2, 5.15, 5.35]
    run = _run_of(arrivals, answered, rejected=[5.02, 5.1, 5.2])
    # When (f) reads the 429s after the change
    figures = vendor_bench._rejections_after_change(run, 5.0)
    # Then those arriving before that answer could be known by no rule; the rest came after it
    assert vendor_bench.in_flight_at(run, 5.0) == 2
    assert figures["429s_after_change"] == 3
    assert figures["first_answer_after_change_seconds"] == 0.15
    assert figures["429s_before_its_first_answer"] == 2
    assert figures["429s_after_its_first_answer"] == 1


def test_each_scenario_runs_briefly_and_its_counts_add_up(pg_server: PgServer) -> None:
    # Given the vendor scenarios of this module ((g) and (i) have their own), run for 5 s on
    # the 1 s window
    with _stack(pg_server.admin_url, lite=True) as stack:
        results = {name: VENDOR_SCENARIOS[name].run(stack, BRIEF) for name in ("e", "f", "h")}
    # Then each printed its figures with its targets beside them, and its counts add up
    for name, result in results.items():
        assert result["scenario"] == name
        assert result["targets"], name
    runs = results["e"]["runs"] + results["f"]["runs"]
    for run in runs:
        statuses = run["responses_by_status"]
        assert sum(statuses.values()) == run["calls"]  # every call was answered, once
        _counts_add_up(run)
        # the utilization counts the calls the vendor accepted: some exactly when any was (a
        # run whose environments are still starting at its 5th second, on a machine busy with
        # the rest of the suite, has called nothing yet)
        accepted = run["calls"] - statuses.get("429", 0)
        assert (run["utilization_whole_run"] > 0.0) == (accepted > 0)
    assert any(run["calls"] for run in runs)  # the scenarios called the vendor
    (halved,) = results["f"]["runs"]
    assert halved["quota_changed"]
    assert halved["429s_before_change"] + halved["429s_after_change"] == halved["self_caused_429s"]
    split = halved["429s_before_its_first_answer"] + halved["429s_after_its_first_answer"]
    assert split == halved["429s_after_change"]
    assert halved["new_quota"] == "25/1s"
    assert [r["reserve_points"] for r in results["h"]["runs"]] == [20]  # the requested cost
    for points in results["h"]["runs"]:
        _counts_add_up(points)
        answered = points["graphql_calls"] - points["throttled_answers"]
        # each answered call was charged 1-20 points; each effect was an answered call
        assert answered <= points["points_charged"] <= 20 * answered
        assert points["effects"] <= answered
        assert points["points_utilization_of_restore_rate"] > 0


def test_every_scenario_the_cli_offers_is_built() -> None:
    # The --scenario choices are the several limits' and the vendor-stated ones, each runnable
    choices = next(p for p in bench_rate.params if p.name == "limit_names")
    assert isinstance(choices.type, click.Choice)
    assert set(choices.type.choices) == set(LIMIT_SCENARIOS) | set(VENDOR_SCENARIOS)


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--only", "limits", "--scenario", "e"], "needs the vendor part"),
        (["--only", "vendor", "--scenario", "a"], "needs the limits part"),
    ],
)
def test_the_cli_refuses_a_scenario_it_cannot_run_in_one_line(args: list[str], says: str) -> None:
    # When a scenario is asked for beside a part that does not run it
    result = CliRunner().invoke(main, ["bench", "rate", *args])
    # Then the command says so in one line and runs nothing
    assert result.exit_code == 2
    assert says in result.output
    assert "Traceback" not in result.output


def test_a_registered_scenario_that_prints_keeps_json_output_clean(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given (i)'s runner, which prints its own lines and names itself "budget"
    def printing_budget(database_url: str | None = None) -> dict[str, Any]:
        print("budget 6000/60s: spent ...")
        return {"scenario": "budget", "spent": 1}

    monkeypatch.setattr(vendor_bench, "run_budget", printing_budget)
    # When the part runs it
    result = VENDOR_SCENARIOS["i"].run(None, BRIEF)
    # Then stdout (what --json prints to) holds none of its lines, and it is scenario (i)
    out = capsys.readouterr()
    assert out.out == ""
    assert "budget 6000/60s" in out.err
    assert (result["scenario"], result["spent"]) == ("i", 1)

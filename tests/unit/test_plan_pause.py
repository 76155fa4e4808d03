"""`sweeper plan`'s paused ledger: awake only for the runs that connect, by the rules that wake it
(sweeper_tools.planning.pause), and the at-rest bill of a policy whose work arrives a few times
a day (docs/examples/dumps.toml) within the issue's $45 paused and lean."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from sweeper.config import Policy, S3Discovery
from sweeper_cli import main
from sweeper_tools.planning.pause import (
    AUTO_PAUSE_AFTER_SECONDS,
    RESUME_SECONDS,
    awake_hours,
    connecting_runs,
    policy_wakes,
)
from sweeper_tools.policy_file import load_config
from tests.unit.test_plan_costs import _tables, assert_awake_lines_documented

REPO_ROOT = Path(__file__).resolve().parents[2]
DUMPS = REPO_ROOT / "docs" / "examples" / "dumps.toml"
SHIPPED = REPO_ROOT / "sweeper.toml"
#: A run on a paused cluster: its resume, its half second, the pause delay after it.
ALONE = 15 + 0.5 + 300
MONTH_DAYS = 730 / 24


def _plan(config: Path) -> dict[str, object]:
    args = ["plan", "--config", str(config), "--latency-p50", "0.2", "--json"]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    costs: dict[str, object] = json.loads(result.output)["stack_cost"]
    return costs


def _wakes(policy: Policy, *, may_pause: bool = True) -> dict[str, tuple[float, float]]:
    found = policy_wakes(policy, may_pause=may_pause)
    return {w.name.split(": ", 1)[1]: (w.per_month, w.seconds_each) for w in found}


def test_a_policy_whose_work_arrives_a_few_times_a_day_rests_at_45_dollars_paused_and_lean() -> (
    None
):
    # Given the example whose dumps land four times a day and are discovered every six hours
    costs = _plan(DUMPS)
    rest = costs["at_rest_per_month"]
    assert isinstance(rest, dict)
    # Then paused and lean its stack costs at most $45 a month (the NAT and CloudWatch, most)
    assert rest["paused + lean"]["total_usd"] <= 45.0
    items = {i["name"]: i for i in rest["paused + lean"]["items"]}
    # ... its ledger awake for discovery's four runs a day, the daily prune, and each arrival's
    # release after the discovery run that wrote it: 24 hours a month at 0.5 ACU
    hours = 4 * MONTH_DAYS * ALONE / 3600 * 2 + MONTH_DAYS * ALONE / 3600
    assert items["Aurora Serverless v2"]["quantity"] == pytest.approx(0.5 * hours, rel=1e-5)
    assert items["Aurora Serverless v2"]["usd"] == pytest.approx(1.44, abs=0.005)
    assert items["NAT gateway"]["usd"] + items["CloudWatch alarms"]["usd"] == pytest.approx(37.15)


def test_the_example_s_producer_reads_the_ledger_only_in_discoverys_runs() -> None:
    (policy,) = load_config(DUMPS).policies
    wakes = _wakes(policy)
    # Its trust bound is discovery's interval: discovery's run makes the full read for it
    assert wakes["producer's full read (trust bound)"][0] == 0
    assert wakes["discovery runs"] == pytest.approx((4 * MONTH_DAYS, ALONE))
    # Its only door is discovery: an arrival adds at most its own run to discovery's window
    assert wakes["arrivals of work (in discovery's runs)"] == pytest.approx((4 * MONTH_DAYS, ALONE))


def test_the_shipped_ledger_is_awake_for_discovery_retention_and_each_arrival() -> None:
    (policy,) = load_config(SHIPPED).policies
    wakes = _wakes(policy)
    # Discovery hourly makes the producer's hourly read; the webhook is a door of its own: an
    # arrival is its write, the release within one producer interval (5 min: no pause
    # between), and the pause delay after the drain (the consumer's refresh: no wake-up at the
    # leases' expiry)
    assert wakes["producer's full read (trust bound)"][0] == 0
    assert wakes["discovery runs"] == pytest.approx((730, ALONE))
    assert wakes["retention runs"] == pytest.approx((MONTH_DAYS, ALONE))
    assert wakes["arrivals of work"] == pytest.approx((4 * MONTH_DAYS, 15 + 300.5 + 300))
    expected = (730 * ALONE + MONTH_DAYS * ALONE + 4 * MONTH_DAYS * 615.5) / 3600
    assert awake_hours([policy]) == pytest.approx(expected)


def test_discovery_further_apart_than_the_bound_leaves_the_producer_reads_between() -> None:
    # Given discovery every six hours and the producer's default bound of an hour
    discovery = S3Discovery(
        bucket="acme-dumps", key_template="{tenant_id}/{object_id}", schedule="rate(6 hours)"
    )
    policy = Policy(name="p", discovery=discovery)
    # Then the producer reads the ledger itself five times between two discovery runs
    assert _wakes(policy)["producer's full read (trust bound)"][0] == pytest.approx(
        5 * 4 * MONTH_DAYS
    )
    # And without discovery, every hour (at most once a producer run)
    assert _wakes(Policy(name="q"))["producer's full read (trust bound)"][0] == pytest.approx(730)


def test_a_pause_longer_than_the_producer_interval_resumes_for_the_release() -> None:
    # Given a producer every 15 minutes, longer than the pause delay (300 s)
    policy = Policy(name="p", schedule="rate(15 minutes)")
    # Then an arrival pauses before its release and resumes for it
    seconds = _wakes(policy)["arrivals of work"][1]
    assert seconds == pytest.approx(RESUME_SECONDS + (300 + 15 + 0.5) + AUTO_PAUSE_AFTER_SECONDS)


def test_a_cluster_that_does_not_pause_counts_the_producers_own_reads_for_its_secret() -> None:
    (policy,) = load_config(SHIPPED).policies
    # Without the pause no run refreshes the wake item: the producer reads hourly, and once
    # more at each release's lease expiry; each connecting run reads the secret
    kept = _wakes(policy, may_pause=False)
    assert kept["producer's full read (trust bound)"][0] == pytest.approx(730)
    assert connecting_runs([policy], may_pause=False) > connecting_runs([policy], may_pause=True)


def test_docs_deploy_holds_the_examples_at_rest_table_and_what_keeps_it_awake() -> None:
    # Given the plan of the few-times-a-day example
    args = ["plan", "--config", str(DUMPS), "--latency-p50", "0.2"]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    at_rest = _tables(result.output.splitlines())[0]
    # Then docs/deploy.md shows its at-rest table and its awake lines as printed
    doc = (REPO_ROOT / "docs" / "deploy.md").read_text().splitlines()
    assert at_rest in _tables(doc), "docs/deploy.md lacks, line for line:\n" + "\n".join(at_rest)
    assert_awake_lines_documented(result.output, doc)

"""`sweeper plan`'s bill of the whole stack: each item a quantity times a list price."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from click.testing import CliRunner

from sweeper_cli import main
from sweeper_tools.planning.consumer_defaults import deployed_config
from sweeper_tools.planning.costs import (
    CostItem,
    Deployment,
    Network,
    at_rest,
    consumer_traces_per_invocation,
    drain_acu,
    idle_metrics,
    per_million_jobs,
    stack_costs,
    total,
)
from sweeper_tools.planning.pause import awake_hours
from sweeper_tools.policy_file import load_config

REPO_ROOT = Path(__file__).resolve().parents[2]
SHIPPED = REPO_ROOT / "sweeper.toml"
#: The vendor latency the docs' tables are printed at (it binds nothing at the shipped policy).
DOCS_PLAN_ARGS = ["plan", "--config", str(SHIPPED), "--latency-p50", "0.2"]
#: The plan's per-job figures for the shipped policy (4 environments of 256 MB at 32 jobs/s).
SHIPPED_REQUESTS = {
    "sqs": 0.3,
    "lambda_invocations": 0.1,
    "lambda_gb_seconds": 0.0312,
    "dynamodb_writes": 2.6,
    # the scope's gate looked at once per 1.4 calls (8 a second an environment) and the live
    # limit read once a second by each environment (sweeper_tools.planning.reads)
    "dynamodb_reads": 0.8393,
}
PAUSED = Deployment(min_acu=0)
LEAN = Deployment(min_acu=0, network=Network.LEAN)
#: Every item of docs/deploy.md's per-million table as it stood before the plan printed it.
DOCS_PER_MILLION_ITEMS = {
    "Lambda consumer",
    "DynamoDB",
    "SQS",
    "Aurora while draining",
    "CloudWatch Logs",
    "X-Ray",
    "NAT data processing",
}
DOCS_AT_REST_ITEMS = {
    "Aurora Serverless v2",
    "NAT gateway",
    "Interface endpoints",
    "CloudWatch alarms",
    "CloudWatch metrics",
    "CloudWatch dashboard",
    "KMS key",
    "Secrets Manager secrets",
    "Scheduler",
    "Lambda scheduled runs",
    "SQS idle polling",
}


def _items(items: list[CostItem]) -> dict[str, CostItem]:
    return {item.name: item for item in items}


def test_every_item_is_its_quantity_times_its_price_and_the_total_their_sum() -> None:
    # Given the shipped policy file, in every profile
    config = load_config(SHIPPED)
    bills = [at_rest(config, Deployment(min_acu=a, network=n)) for a in (0, 0.5) for n in Network]
    bills += [
        per_million_jobs(SHIPPED_REQUESTS, 32.0, Deployment(min_acu=a, network=n))
        for a in (0, 0.5)
        for n in Network
    ]
    for items in bills:
        # Then each item is what it says, and the total adds them up
        for item in items:
            assert item.usd == pytest.approx(item.quantity * item.unit_usd)
            assert item.as_dict()["usd"] == pytest.approx(item.usd, abs=1e-4)
        assert total(items) == pytest.approx(sum(item.quantity * item.unit_usd for item in items))


def test_at_rest_the_shipped_stack_costs_the_figures_worked_by_hand() -> None:
    # Given the shipped policy, deployed as by default (0.5 ACU, interface endpoints)
    items = _items(at_rest(load_config(SHIPPED), Deployment()))
    # Then: 0.5 ACU x 730 h x $0.12; one NAT x 730 h x $0.045; 2 services x 2 AZs x 730 h x $0.01
    assert items["Aurora Serverless v2"].usd == pytest.approx(43.80)
    assert items["NAT gateway"].usd == pytest.approx(32.85)
    assert items["Interface endpoints"].usd == pytest.approx(29.20)
    # 40 alarm metrics for the policy (22 pipeline, 8 outcome counts the failure rates' alarm
    # reads, intake 3 + webhook, discovery 3, retention 3) and the ledger's 4; 3 ledger secrets
    # and the webhook's
    assert items["CloudWatch alarms"].quantity == 44
    assert items["Secrets Manager secrets"].quantity == 4
    # Producer every 5 min, redrive every 15 min, discovery hourly, retention daily
    runs = (12 + 4 + 1) * 730 + 730 / 24
    assert items["Scheduler"].quantity == pytest.approx(runs / 1e6)


def test_the_lean_profile_drops_the_interface_endpoints_and_sends_sqs_through_the_nat() -> None:
    config = load_config(SHIPPED)
    default = _items(at_rest(config, Deployment()))
    lean = _items(at_rest(config, Deployment(network=Network.LEAN)))
    assert default["Interface endpoints"].usd > 0
    assert lean["Interface endpoints"].usd == 0
    assert total(default.values()) - total(lean.values()) == pytest.approx(29.20)
    per_job_default = _items(per_million_jobs(SHIPPED_REQUESTS, 32.0, Deployment()))
    per_job_lean = _items(per_million_jobs(SHIPPED_REQUESTS, 32.0, LEAN))
    # The SQS bytes go through the NAT ($0.045/GB) instead of the endpoint ($0.01/GB)
    assert per_job_lean["NAT data processing"].quantity == pytest.approx(4.0)
    assert per_job_default["NAT data processing"].quantity == pytest.approx(2.0)
    assert "Interface endpoint data" in per_job_default
    assert "Interface endpoint data" not in per_job_lean


def test_a_ledger_that_may_pause_is_billed_only_while_runs_keep_it_awake() -> None:
    config = load_config(SHIPPED)
    # Given the shipped policy on a cluster that may pause
    paused = _items(at_rest(config, Deployment(min_acu=0)))
    # Then it is billed 0.5 ACU for the hours its runs keep it awake (planning.pause:
    # tests/unit/test_plan_pause.py), not the month
    hours = awake_hours(config.policies)
    assert 0 < hours < 730
    assert paused["Aurora Serverless v2"].quantity == pytest.approx(0.5 * hours)
    assert paused["Aurora Serverless v2"].usd == pytest.approx(0.5 * hours * 0.12)


def test_per_million_jobs_prices_every_item_of_the_docs_table() -> None:
    for deployment in (Deployment(), PAUSED, LEAN):
        items = _items(per_million_jobs(SHIPPED_REQUESTS, 32.0, deployment))
        assert set(items) >= DOCS_PER_MILLION_ITEMS
    # Each is billed (X-Ray only with the consumer's tracing active: the shipped one passes)
    paused = _items(per_million_jobs(SHIPPED_REQUESTS, 32.0, PAUSED, tracing="active"))
    assert all(paused[name].usd > 0 for name in DOCS_PER_MILLION_ITEMS)
    items = _items(per_million_jobs(SHIPPED_REQUESTS, 32.0, Deployment()))
    # 2.6 writes a job (sweeper_tools.planning.writes) x $0.625/M
    assert items["DynamoDB"].usd == pytest.approx(1.625)
    # The shipped consumer passes traces through: X-Ray records none of its invocations
    assert items["X-Ray"].quantity == 0
    # Logs as measured (tests/integration/test_batch_log.py): 25 bytes a job and 1,300 an
    # invocation (one line a batch, its metrics blob, Lambda's own lines), not 2 KB a job
    assert items["CloudWatch Logs"].quantity == pytest.approx((25 * 1e6 + 1300 * 1e5) / 1e9)
    assert items["CloudWatch Logs"].usd == pytest.approx(0.155 * 0.5)
    rest = _items(at_rest(load_config(SHIPPED), Deployment()))
    assert set(rest) >= DOCS_AT_REST_ITEMS


def test_a_drain_at_the_shipped_rate_needs_no_capacity_beyond_the_minimum() -> None:
    # Given 32 jobs/s: 1.4 ms of ledger CPU each is 0.045 vCPU, 0.36 ACU at half load
    assert drain_acu(32.0) == 0.5
    # Then a cluster kept at 0.5 ACU drains a million jobs within what the month pays ...
    kept = _items(per_million_jobs(SHIPPED_REQUESTS, 32.0, Deployment()))
    assert kept["Aurora while draining"].quantity == 0
    # ... and one that may pause is awake at 0.5 ACU for the 8.68 hours of the drain
    paused = _items(per_million_jobs(SHIPPED_REQUESTS, 32.0, PAUSED))
    assert paused["Aurora while draining"].quantity == pytest.approx(0.5 * 1e6 / 32 / 3600)


def test_a_faster_drain_is_billed_the_capacity_its_ledger_cpu_needs() -> None:
    # 200 jobs/s: 0.28 vCPU, 2.24 ACU at half load, 2.5 in half-ACU steps
    assert drain_acu(200.0) == 2.5
    items = _items(per_million_jobs(SHIPPED_REQUESTS, 200.0, Deployment()))
    assert items["Aurora while draining"].quantity == pytest.approx(2.0 * 1e6 / 200 / 3600)


def test_x_ray_bills_a_trace_per_consumer_invocation_only_when_its_tracing_is_active() -> None:
    # Given the shipped batches, 0.1 invocations a job
    active = _items(per_million_jobs(SHIPPED_REQUESTS, 32.0, Deployment(), tracing="active"))
    passing = _items(per_million_jobs(SHIPPED_REQUESTS, 32.0, Deployment()))
    # Then active: every invocation, its producer run having sampled it (Lambda follows the
    # messages' decision, at any rate); passthrough, the default: Lambda sends none
    assert active["X-Ray"].quantity == pytest.approx(0.1)
    assert active["X-Ray"].usd == pytest.approx(0.5)
    assert passing["X-Ray"].quantity == 0
    assert consumer_traces_per_invocation("active") == 1.0
    assert consumer_traces_per_invocation("passthrough") == 0.0


def test_the_stack_cost_prices_x_ray_at_the_planned_policy_s_tracing(tmp_path: Path) -> None:
    # Given a file of two policies, the second with its consumer's tracing active
    path = tmp_path / "sweeper.toml"
    path.write_text(
        '[[policies]]\nname = "quiet"\n\n'
        '[[policies]]\nname = "traced"\n[policies.consumer]\ntracing = "active"\n'
    )
    config = load_config(path)

    def x_ray(policy: str) -> float:
        costs = stack_costs(config, SHIPPED_REQUESTS, 32.0, policy=config.policy(policy))
        (item,) = [i for i in costs["per_million_jobs"]["0.5 ACU"]["items"] if i["name"] == "X-Ray"]
        return float(item["usd"])

    # Then each plan bills its own consumer's traces
    assert x_ray("quiet") == 0
    assert x_ray("traced") == pytest.approx(0.5)


def test_custom_metrics_are_billed_by_the_hours_their_runs_send_them() -> None:
    # Given the shipped policy with nothing to do: the producer and the redrive send no zero,
    # discovery its scanned rows, completed pass and lag every hour; the prune 3 once a day
    (policy,) = load_config(SHIPPED).policies
    assert idle_metrics(policy) == pytest.approx(3 + 3 / 24)


def test_a_month_adds_the_per_million_price_pro_rata() -> None:
    config = load_config(SHIPPED)
    costs = stack_costs(config, SHIPPED_REQUESTS, 32.0, jobs_per_month=250_000)
    # Each total is rounded to the cent, the month from the unrounded ones: a cent apart at most
    for profile in ("0.5 ACU", "paused", "paused + lean"):
        rest = costs["at_rest_per_month"][profile]["total_usd"]
        million = costs["per_million_jobs"][profile]["total_usd"]
        assert costs["per_month"][profile] == pytest.approx(rest + million / 4, abs=0.0101)


def test_the_json_plan_carries_the_same_stack_cost() -> None:
    result = CliRunner().invoke(main, [*DOCS_PLAN_ARGS, "--jobs-per-month", "2000000", "--json"])
    assert result.exit_code == 0, result.output
    costs = json.loads(result.output)["stack_cost"]
    assert costs["jobs_per_month"] == 2_000_000
    # of the policy as synth deploys it (its consumer's memory derived)
    deployed = deployed_config(load_config(SHIPPED))
    expected = stack_costs(deployed, SHIPPED_REQUESTS, 32.0, jobs_per_month=2_000_000)
    assert costs == expected
    assert not math.isnan(costs["per_month"]["paused + lean"])


def _tables(lines: list[str]) -> list[list[str]]:
    """Each run of consecutive Markdown table lines."""
    tables: list[list[str]] = []
    previous = False
    for line in lines:
        row = line.startswith("|")
        if row and not previous:
            tables.append([])
        if row:
            tables[-1].append(line)
        previous = row
    return tables


def test_the_cost_tables_in_docs_deploy_are_the_plans_output_for_the_shipped_policy() -> None:
    # Given the plan of the shipped policy file: its two cost tables
    result = CliRunner().invoke(main, DOCS_PLAN_ARGS)
    assert result.exit_code == 0, result.output
    printed = _tables(result.output.splitlines())
    assert [table[0].split(" | ")[0] for table in printed] == ["| Item", "| Item"]
    # Then docs/deploy.md holds each, line for line and in one piece (the doc cannot drift)
    doc = (REPO_ROOT / "docs" / "deploy.md").read_text().splitlines()
    documented = _tables(doc)
    for table in printed:
        assert table in documented, "docs/deploy.md's cost table differs from:\n" + "\n".join(table)
    # And what keeps the paused ledger awake, as printed
    assert_awake_lines_documented(result.output, doc)


def awake_lines(output: str) -> list[str]:
    """The plan's lines on what keeps a paused ledger awake: the heading and its list."""
    lines = output.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("Paused: awake"))
    end = start + 1
    while end < len(lines) and lines[end].startswith("- "):
        end += 1
    return lines[start:end]


def assert_awake_lines_documented(output: str, doc: list[str]) -> None:
    printed = awake_lines(output)
    assert len(printed) > 1
    at = [i for i, line in enumerate(doc) if line == printed[0]]
    assert any(doc[i : i + len(printed)] == printed for i in at), (
        "docs/deploy.md's awake lines differ from:\n" + "\n".join(printed)
    )

"""The plan's DynamoDB reads come from the consumer's and the scheduled runs' rules: a learned
scope's last look before each call, the gate of a limit with no rate that a 429 can name, and
the wake item and latest-closure marker the producer and the watching redrive read a run."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from sweeper.config import Policy
from sweeper_cli import main
from sweeper_tools.planning.costs import (
    DYNAMODB_READ_PER_MILLION_USD,
    Deployment,
    at_rest,
    stack_costs,
)
from sweeper_tools.planning.pause import runs_per_month
from sweeper_tools.planning.plan import make_plan
from sweeper_tools.planning.reads import dynamodb_reads_per_job, reads_at_rest_per_month
from sweeper_tools.policy_file import load_config
from tests.unit.test_plan import STORE, _limited, _rate, _vendor
from tests.unit.test_plan_costs import _tables

REPO_ROOT = Path(__file__).resolve().parents[2]
SHIPPED = REPO_ROOT / "sweeper.toml"
LEARNED_EXAMPLES = [
    REPO_ROOT / "docs" / "examples" / "github-artifacts.toml",
    REPO_ROOT / "docs" / "examples" / "shopify-graphql.toml",
]
#: A fleet-wide cap of 4 calls in flight with no rate (its gate is read before a call only when
#: a 429 can name it).
CAP = {"name": "vendor", "key": "v", "max_in_flight": 4}


def _million(costs: dict[str, Any], profile: str = "0.5 ACU") -> dict[str, dict[str, Any]]:
    return {item["name"]: item for item in costs["per_million_jobs"][profile]["items"]}


def _named(policy: Policy, values: dict[str, str]) -> Policy:
    """`policy` with a 429's `X-RateLimit-Scope` header naming its limits by `values`."""
    action = policy.action.model_dump()
    action.update(limit_header="X-RateLimit-Scope", limit_header_values=values)
    return Policy.model_validate({**policy.model_dump(), "action": action})


@pytest.mark.parametrize("path", LEARNED_EXAMPLES, ids=lambda p: p.stem)
def test_a_learned_scopes_plan_prices_one_strongly_consistent_read_a_call(path: Path) -> None:
    # Given a worked example whose scope learns its rate (a last look before every call)
    config = load_config(path)
    (policy,) = config.policies
    # When it is planned
    plan = make_plan(policy, _vendor(latency=0.2))
    # Then each job reads its scope's item once, one read unit, and the cost says so
    assert plan.requests_per_job["dynamodb_reads"] == pytest.approx(1.0)
    writes = plan.requests_per_job["dynamodb_writes"]
    assert plan.cost_per_million_jobs["dynamodb"] == pytest.approx(
        round(writes * 0.625 + 1.0 * DYNAMODB_READ_PER_MILLION_USD, 2)
    )
    costs = stack_costs(config, plan.requests_per_job, plan.throughput_per_second)
    reads = _million(costs)["DynamoDB reads"]
    assert (reads["quantity"], reads["unit"]) == (1.0, "M read units")
    assert reads["usd"] == pytest.approx(0.125)


def test_a_told_policys_plan_prices_no_read_a_job() -> None:
    # Given the shipped policy: a told quota, no limit a 429 can name beside its scope
    config = load_config(SHIPPED)
    (policy,) = config.policies
    plan = make_plan(policy, _vendor(latency=0.2))
    # Then no read is priced a job (its $2.62 a million stands)
    assert plan.requests_per_job["dynamodb_reads"] == 0
    costs = stack_costs(config, plan.requests_per_job, plan.throughput_per_second)
    assert "DynamoDB reads" not in _million(costs)


def test_a_cap_a_429_can_name_prices_its_gates_read_a_call_and_one_it_cannot_none() -> None:
    # Given a store rate and a fleet-wide cap with no rate
    policy = _limited(STORE, CAP)
    # Then unnamed, the cap's leases are all it costs: no gate is read
    assert dynamodb_reads_per_job(policy) == 0
    # And named by a 429's header, its gate is read at most once a call (one item, one unit)
    named = _named(policy, {"concurrency": "vendor", "store": "store"})
    assert dynamodb_reads_per_job(named) == 1.0
    assert make_plan(named, _vendor()).requests_per_job["dynamodb_reads"] == 1.0
    # A named rate's gate is read by its reservations, not before the call
    rated = _named(_limited(STORE, {**CAP, "rate": _rate(40)}), {"concurrency": "vendor"})
    assert dynamodb_reads_per_job(rated) == 0


def test_at_rest_the_producer_reads_its_wake_item_and_the_marker_a_run() -> None:
    # Given the shipped policy (its redrive on its 15-minute schedule, no watch)
    config = load_config(SHIPPED)
    (policy,) = config.policies
    producer_runs = runs_per_month(policy.schedule, policy.timezone)
    # Then a month at rest reads two units a producer run at most, and nothing in the redrive's
    assert reads_at_rest_per_month(policy) == pytest.approx(2 * producer_runs)
    items = {item.name: item for item in at_rest(config, Deployment())}
    assert items["DynamoDB reads"].quantity == pytest.approx(2 * producer_runs / 1e6)
    assert items["DynamoDB reads"].unit_usd == DYNAMODB_READ_PER_MILLION_USD


def test_a_watching_redrive_reads_the_marker_every_minute_at_rest() -> None:
    (policy,) = load_config(SHIPPED).policies
    watching = policy.model_copy(
        update={"redrive": policy.redrive.model_copy(update={"automatic": "throttled"})}
    )
    # Then one unit more a run of its one-minute schedule: 43,800 a month
    extra = reads_at_rest_per_month(watching) - reads_at_rest_per_month(policy)
    assert extra == pytest.approx(730 * 60)


def test_the_plan_prints_the_read_line_in_its_one_per_million_table() -> None:
    for path in LEARNED_EXAMPLES:
        result = CliRunner().invoke(main, ["plan", "--config", str(path), "--latency-p50", "0.2"])
        assert result.exit_code == 0, result.output
        at_rest_table, per_million = _tables(result.output.splitlines())
        assert any(
            row.startswith("| DynamoDB reads | 1 M read units x $0.125 |") for row in per_million
        )
        assert any(row.startswith("| DynamoDB reads |") for row in at_rest_table)
    shipped = CliRunner().invoke(main, ["plan", "--config", str(SHIPPED), "--latency-p50", "0.2"])
    _, per_million = _tables(shipped.output.splitlines())
    assert not any(row.startswith("| DynamoDB reads |") for row in per_million)

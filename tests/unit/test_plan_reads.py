"""The plan's DynamoDB reads come from the consumer's and the scheduled runs' rules: the binding
rate's looks at its gate, a learned scope's last look before each call, the gate of a limit with
no rate that a 429 can name, a cap's lease looks, the live limits read once a second an
environment, and the wake item and latest-closure marker the producer and the watching redrive
read a run."""

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
from sweeper_tools.planning.reads import (
    dynamodb_reads_per_job,
    gate_reads_per_job,
    reads_at_rest_per_month,
)
from sweeper_tools.planning.regimes.cap import CAP_BINDS
from sweeper_tools.policy_file import load_config
from tests.unit.test_plan import APP, STORE, _limited, _rate, _vendor
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


#: Each worked example at 0.2 s: 2 environments; GitHub's secondary limit binds at 3 calls/s
#: (1.5 an environment), Shopify's points at 18.86/s (9.43). A job reads its learned scope's
#: item before the call (1), the binding rate's gate once per look (1 / (1 + c x 0.05)), its
#: limits' live items once a second an environment (limits / c, at most one each a call), and
#: GitHub's cap, which does not bind, once before taking a lease (half a unit).
LEARNED_READS = {
    "github-artifacts": 1 + 1 / (1 + 1.5 * 0.05) + 2 * (1 / 1.5) + 0.5,
    "shopify-graphql": 1 + 1 / (1 + 9.43 * 0.05) + 1 / 9.43,
}


@pytest.mark.parametrize("path", LEARNED_EXAMPLES, ids=lambda p: p.stem)
def test_a_learned_scopes_plan_prices_its_last_look_beside_the_rules_reads(path: Path) -> None:
    # Given a worked example whose scope learns its rate (a last look before every call)
    config = load_config(path)
    (policy,) = config.policies
    # When it is planned
    plan = make_plan(policy, _vendor(latency=0.2))
    # Then each job reads what the rules say, and the cost says so
    expected = LEARNED_READS[path.stem]
    assert plan.requests_per_job["dynamodb_reads"] == pytest.approx(expected, abs=0.005)
    writes = plan.requests_per_job["dynamodb_writes"]
    assert plan.cost_per_million_jobs["dynamodb"] == pytest.approx(
        writes * 0.625 + expected * DYNAMODB_READ_PER_MILLION_USD, abs=0.01
    )
    costs = stack_costs(config, plan.requests_per_job, plan.throughput_per_second)
    reads = _million(costs)["DynamoDB reads"]
    assert (reads["quantity"], reads["unit"]) == (
        pytest.approx(expected, abs=0.005),
        "M read units",
    )


def test_a_told_policys_plan_prices_its_gate_looks_and_live_reads() -> None:
    # Given the shipped policy: a told quota (no `learn`), one scope, 4 environments at 32/s
    config = load_config(SHIPPED)
    (policy,) = config.policies
    plan = make_plan(policy, _vendor(latency=0.2))
    assert (plan.environments, plan.throughput_per_second) == (4, 32.0)
    # Then a job reads, by rule: its gate's looks, one for the call that makes it and the
    # batch's calls of the scope within 0.05 s after it (8 calls/s an environment: 1 / 1.4),
    # and the policy's one live limit, read once a second by each environment (4 / 32)
    expected = 1 / (1 + 8 * 0.05) + 4 / 32
    assert plan.requests_per_job["dynamodb_reads"] == pytest.approx(expected, abs=1e-4)
    costs = stack_costs(config, plan.requests_per_job, plan.throughput_per_second)
    reads = _million(costs)["DynamoDB reads"]
    assert reads["quantity"] == pytest.approx(expected, abs=1e-4)
    assert reads["usd"] == pytest.approx(expected * DYNAMODB_READ_PER_MILLION_USD, abs=0.01)


def test_a_cap_a_429_can_name_prices_its_gates_looks_and_one_it_cannot_none() -> None:
    # Given a store rate and a fleet-wide cap with no rate, neither binding (the consumers
    # do), an environment calling 10 a second
    policy = _limited(STORE, CAP)
    # Then unnamed, the cap's lease look before a lease is taken is all it reads: half a unit
    assert gate_reads_per_job(policy, 10.0, {}, "consumers") == 0.5
    # And named by a 429's header, its gate is read once per look's lead (0.1 s of calls)
    named = _named(policy, {"concurrency": "vendor", "store": "store"})
    assert gate_reads_per_job(named, 10.0, {}, "consumers") == pytest.approx(0.5 + 1 / 2)
    # A named rate's gate is read by its reservations, not before the call
    rated = _named(_limited(STORE, {**CAP, "rate": _rate(40)}), {"concurrency": "vendor"})
    assert gate_reads_per_job(rated, 10.0, {}, "consumers") == 0.5


def test_the_binding_rates_looks_serve_the_calls_within_the_lead_after_them() -> None:
    (policy,) = load_config(SHIPPED).policies
    # An environment calling its scope 20 times a second: a look serves 2 calls
    assert gate_reads_per_job(policy, 20.0, {}, "quota") == pytest.approx(0.5)
    # Spread over 4 busy scopes (5 a second each): 1 / 1.25
    assert gate_reads_per_job(policy, 20.0, {"quota": 4}, "quota") == pytest.approx(0.8)
    # A rate that does not bind grants slots its write's look covers: no read
    assert gate_reads_per_job(policy, 20.0, {}, "consumers") == 0


def test_paired_limits_read_the_app_item_once_per_look_for_every_store() -> None:
    policy = _limited(STORE, APP)  # 2/s a store under 40/s for the app: paired
    # the app binds at 10 calls/s an environment: one read of its item per 1 + 10 x 0.05 calls,
    # whichever stores they are for
    assert gate_reads_per_job(policy, 10.0, {"store": 20}, "app") == pytest.approx(1 / 1.5)
    assert gate_reads_per_job(policy, 10.0, {"store": 20}, "store") == pytest.approx(1 / 1.5)


def test_a_binding_cap_reads_its_leases_and_keeps_the_look_fresh_while_it_waits() -> None:
    # Given a rate with a slack of 0.5 s under a cap of 4 in flight that binds (bench (c))
    store = {**STORE, "rate": {**_rate(100), "headroom": 0.6, "slack_seconds": 0.5}}
    policy = _limited(store, CAP)
    # Then an environment calling 7.5 a second reads a cap's look every 0.2 s (half a unit)
    # and the rate's gate every 0.08 s: (2.5 + 12.5) / 7.5 a call, no rate look beside them
    reads = gate_reads_per_job(policy, 7.5, {}, "vendor", CAP_BINDS)
    assert reads == pytest.approx((0.5 / 0.2 + 1 / 0.08) / 7.5)
    # Without a slack, a call's slot is covered by its block's look: the lease looks only
    unslacked = _limited(STORE, CAP)
    assert gate_reads_per_job(unslacked, 7.5, {}, "vendor", CAP_BINDS) == pytest.approx(
        0.5 / 0.2 / 7.5
    )


def test_each_environment_reads_its_live_limits_once_a_second_at_most_once_a_call() -> None:
    (policy,) = load_config(SHIPPED).policies
    rule = dynamodb_reads_per_job(policy, environments=4, throughput=32.0, binding="consumers")
    assert rule == pytest.approx(4 / 32)
    # An environment calling less than once a second reads them before every call
    slow = dynamodb_reads_per_job(policy, environments=4, throughput=2.0, binding="consumers")
    assert slow == 1.0


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
    for path in [*LEARNED_EXAMPLES, SHIPPED]:
        result = CliRunner().invoke(main, ["plan", "--config", str(path), "--latency-p50", "0.2"])
        assert result.exit_code == 0, result.output
        at_rest_table, per_million = _tables(result.output.splitlines())
        read_lines = [row for row in per_million if row.startswith("| DynamoDB reads |")]
        assert len(read_lines) == 1, per_million
        assert "M read units x $0.125" in read_lines[0]
        assert any(row.startswith("| DynamoDB reads |") for row in at_rest_table)

"""The examples benchmark's figures: which limit binds each example as the vendor states it, the
rate a run carried from its settlements, and the command's one-line refusal of an unknown one."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from click.testing import CliRunner

from sweeper.ledger.rows import Settled
from sweeper_bench.examples import (
    EXAMPLES,
    EXAMPLES_DIR,
    Example,
    as_stated,
    binding_limit,
    dynamodb_per_job,
    example_names,
    example_plan,
    example_policy,
)
from sweeper_cli import main
from sweeper_local.demo_audit import requests_per_job, settled_rate
from sweeper_local.vendor import VendorSimulator

T0 = datetime(2026, 12, 7, 12, 0, tzinfo=UTC)


def _example(name: str) -> Example:
    return next(example for example in EXAMPLES if example.name == name)


def test_the_listings_app_limit_binds_at_its_published_40_per_second_over_25_stores() -> None:
    # Given the listings example as shipped, run over 25 stores (2/s each: 50/s)
    example = _example("listings")
    policy = example_policy(example)
    # When its binding limit is read at the plan's keys
    name, allowed = binding_limit(policy, example_plan(policy, example), example.tenants)
    # Then the app's 40/s binds, before any headroom (the figure a user reads)
    assert (name, allowed) == ("app", 40.0)


def test_a_cap_binds_at_its_calls_in_flight_over_the_plans_mean_service_time() -> None:
    # Given the refunds example: 100/s and 20 in flight per account, one account
    example = _example("refunds")
    policy = example_policy(example)
    plan = example_plan(policy, example)
    # When the binding limit is read
    name, allowed = binding_limit(policy, plan, example.tenants)
    # Then it is the smaller of the rate and 20 over the mean service time
    assert allowed == pytest.approx(min(100.0, 20 / plan.mean_service_seconds))
    assert name == ("account" if allowed == 100.0 else "inflight")


def test_a_learned_limit_is_read_and_planned_at_the_rate_the_vendor_states() -> None:
    # Given github-artifacts over 4 owners: its primary limit learned from the answers (the file
    # tells Enterprise Cloud's 15,000 an hour), which state GitHub's 5,000 an hour per owner
    example = _example("github-artifacts")
    shipped = example_policy(example)
    stated = as_stated(shipped, example)
    # When its binding limit and plan are read at the rate the vendor states
    plan = example_plan(stated, example)
    name, allowed = binding_limit(stated, plan, example.tenants)
    # Then the primary binds at 4 x 5,000 an hour (not the secondary's 4 x 3/s), and the plan
    # paces at it; the demo still runs the file as shipped
    assert (name, allowed) == ("core", pytest.approx(4 * 5000 / 3600))
    assert plan.binding == "core"
    assert plan.throughput_per_second == pytest.approx(5.55, abs=0.01)
    assert shipped.limits[0].rate is not None
    assert shipped.limits[0].rate.limit == 15000


def test_the_rate_carried_is_counted_from_the_first_settlement_to_the_last() -> None:
    # Given 101 jobs settled over 4 s
    settled = Settled(101, T0, T0 + timedelta(seconds=4))
    # Then 100 intervals in 4 s: 25/s; and too few settlements say nothing
    assert settled_rate(settled) == 25.0
    assert settled_rate(Settled(1, T0, T0)) is None


def test_every_example_file_is_run_or_skipped_with_a_reason() -> None:
    # Every docs/examples file has at least one row, and a skipped one says why
    names = {name for name in example_names() if ":" not in name}
    shipped = {path.stem for path in EXAMPLES_DIR.glob("*.toml")}
    assert shipped <= names
    assert all(example.skip or example.jobs > 0 for example in EXAMPLES)


def test_an_unknown_example_is_refused_in_one_line_naming_the_choices() -> None:
    result = CliRunner().invoke(main, ["bench", "examples", "--example", "nope"])
    assert result.exit_code == 2
    assert "no example nope; one of listings" in result.output


def test_requests_per_job_count_only_what_the_run_made() -> None:
    # Given the stand-in's counts before and after a run of 4 jobs
    before = {"dynamodb:PutItem": 10, "sqs:CreateQueue": 1}
    after = {"dynamodb:PutItem": 14, "dynamodb:UpdateItem": 10, "sqs:CreateQueue": 1}
    # Then each operation the run made, per job; none without both counts (moto keeps none)
    assert requests_per_job(before, after, 4) == {
        "dynamodb:PutItem": 1.0,
        "dynamodb:UpdateItem": 2.5,
    }
    assert requests_per_job(None, after, 4) is None
    # And the bench reads writes, their failed conditions and the items read from them
    figures = dynamodb_per_job(
        {
            "dynamodb:PutItem": 1.0,
            "dynamodb:UpdateItem": 5.5,
            "dynamodb:UpdateItem:condition_failed": 1.0,
            "dynamodb:BatchGetItem": 1.0,
            "dynamodb:BatchGetItem:keys": 2.0,
        }
    )
    assert figures == {
        "dynamodb_writes_per_job": 6.5,
        "dynamodb_failed_conditions_per_job": 1.0,
        "dynamodb_items_read_per_job": 2.0,
    }


def test_a_limit_counted_in_points_binds_in_calls() -> None:
    # Given github-artifacts: 900 points a minute per owner, a DELETE costing 5, four owners
    example = _example("github-artifacts")
    policy = example_policy(example)
    # Then the secondary limit binds at 3 calls a second per owner, not 15
    name, allowed = binding_limit(policy, example_plan(policy, example), example.tenants)
    assert (name, allowed) == ("secondary", 12.0)


def test_the_shopify_store_binds_at_what_the_simulated_store_restores_not_the_ceiling() -> None:
    # Given shopify-graphql: told 200 points/s as a ceiling, its pace learned from the store's
    # answers, run against the simulator's store (Shopify's Standard plan: 100 points/s, a
    # productDelete charged 10)
    example = _example("shopify-graphql")
    stated = as_stated(example_policy(example), example)
    plan = example_plan(stated, example)
    store = VendorSimulator().graphql
    per_call = store.restore_rate / store.requested_cost
    # Then the store's restore rate binds, in calls: 10 a second, not the told 20
    assert binding_limit(stated, plan, example.tenants) == ("points", per_call)
    assert per_call == 10.0
    # And the plan is of the rate the store's answers teach, not of the told ceiling
    assert 0.9 * per_call <= plan.throughput_per_second <= per_call

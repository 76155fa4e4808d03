"""A shipped example that sets its consumer's batch sets the one its own `sweeper plan` recommends.

A batch of one round of calls leaves an environment asking for no slot through every turnover,
and environments that share a rate turn over together: the plan's turnover line says what that
costs and which batch keeps it within 3 %. Measured by `sweeper bench examples` (one series):
refunds.toml at batches of 10 (one round of its 10 calls, up to 49 % of the rate in turnovers)
carried 0.81 of its 100/s, at the plan's batch 0.93 (docs/benchmarks.md, "The examples as
shipped"). An example is what a user copies: its figures keep the plan's advice.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from sweeper.config import Policy
from sweeper_tools.planning.batch import TURNOVER_SHARE
from sweeper_tools.planning.consumer_defaults import deployed_policy
from sweeper_tools.planning.plan import PlanInput, make_plan
from sweeper_tools.planning.slot_wait import fewest_binding_scopes
from sweeper_tools.policy_file import load_config

EXAMPLES = Path(__file__).resolve().parents[2] / "docs" / "examples"
#: Examples whose batch is not a user's choice: plan-real-rates.toml states the shapes
#: `sweeper bench rate` runs its real rates at (batches of 100), for `sweeper plan` to read.
NOT_A_DEPLOYMENT = frozenset({"plan-real-rates.toml"})


def _sized_examples() -> list[Any]:
    found = []
    for path in sorted(EXAMPLES.glob("*.toml")):
        if path.name in NOT_A_DEPLOYMENT:
            continue
        for policy in load_config(path).policies:
            # the plan's figures need the vendor's latency: a file stating none keeps defaults
            if policy.action.latency is None:
                continue
            if "batch_size" in policy.consumer.model_fields_set:
                found.append(pytest.param(policy, id=f"{path.name}:{policy.name}"))
    return found


@pytest.mark.parametrize("policy", _sized_examples())
def test_an_example_that_sets_its_batch_sets_the_one_its_plan_recommends(policy: Policy) -> None:
    # Given an example that sets its consumer's batch, deployed as synth deploys it
    deployed = deployed_policy(policy)
    assert policy.action.latency is not None
    p50, p95 = policy.action.latency
    plan = make_plan(deployed, PlanInput(latency_p50_seconds=p50, latency_p95_seconds=p95))
    # Then its turnovers are within the plan's share, and its timeout covers the batch
    assert plan.turnover_share <= TURNOVER_SHARE, (
        f"{policy.name}: batch {plan.batch_size}, the plan recommends {plan.recommended_batch_size}"
    )
    assert plan.timeout_seconds >= plan.recommended_timeout_seconds


def test_the_listings_example_sets_the_batch_its_plan_recommends_where_the_app_binds() -> None:
    # Given listings.toml as shipped, planned at the marketplace's latency and the fewest busy
    # stores at which the app's 40/s binds (21: each store's key then the busiest it is), as
    # synth sizes its threads
    policy = deployed_policy(load_config(EXAMPLES / "listings.toml").policy("listings"))
    stores = fewest_binding_scopes(policy)
    assert stores == 21
    assert policy.action.latency == (0.02, 0.04)
    vendor = PlanInput(latency_p50_seconds=0.02, latency_p95_seconds=0.04, scopes=stores)
    plan = make_plan(policy, vendor)
    # Then a batch holds records of every busy store, over long enough that its turnovers cost
    # at most the plan's share (a batch of 10 held 10 stores: 10 x 1.762/s, just an
    # environment's share of the app's 35.24/s, with 35 % of the rate in turnovers)
    assert plan.batch_size == plan.recommended_batch_size
    assert plan.turnover_share <= TURNOVER_SHARE
    assert plan.timeout_seconds >= plan.recommended_timeout_seconds

"""The calls in flight a plan sizes count the wait for a narrow key's slot beside the service time.

Figures by hand for docs/examples/listings.toml: 2/s a store under 40/s for the app, each a
sliding window with 0.1 s of arrival jitter (headroom 0.881: a store's slots 0.5675 s apart,
the app's rate 35.24/s), a vendor at 20 ms (p95 40 ms) and the plan's 30 ms a call of its own.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from sweeper.config import ConsumerConfig, Policy
from sweeper_cli.plan import render
from sweeper_tools.planning.consumer_defaults import derived_consumer
from sweeper_tools.planning.plan import PlanInput, make_plan
from sweeper_tools.planning.slot_wait import fewest_binding_scopes, slot_wait_seconds
from sweeper_tools.policy_file import load_config

LISTINGS = Path(__file__).resolve().parents[2] / "docs" / "examples" / "listings.toml"
VENDOR = PlanInput(latency_p50_seconds=0.02, latency_p95_seconds=0.04, scopes=25)


def _listings(**consumer: int) -> Policy:
    policy = load_config(LISTINGS).policy("listings")
    sized = ConsumerConfig.model_validate(
        {"reserved_concurrency": 2, "max_concurrency": 2, **consumer}
    )
    return policy.model_copy(update={"consumer": sized})


def test_a_call_waits_for_its_stores_slot_in_the_share_the_store_is_busy() -> None:
    # Given the app's 35.24/s over 25 stores: each asked 1.41/s of its 1.762/s (rho 0.8)
    policy = _listings()
    # Then a call waits on the mean 0.8 x half of the 0.5675 s interval: 0.227 s
    wait = slot_wait_seconds(policy, {"store": 25, "app": 1}, 35.24)
    assert wait == pytest.approx(0.8 * 0.5675 / 2, abs=0.001)
    # and at 21 stores each is asked 20/21 of its intervals: 0.952 x 0.284 s = 0.270 s
    assert slot_wait_seconds(policy, {"store": 21, "app": 1}, 35.24) == pytest.approx(
        20 / 21 * 0.5675 / 2, abs=0.001
    )


def test_the_limit_that_binds_costs_no_wait_that_threads_must_carry() -> None:
    # At 20 stores the stores' 35.24/s binds with the app's: their slots are the rate itself
    assert slot_wait_seconds(_listings(), {"store": 20, "app": 1}, 35.24) == 0.0
    # and one store alone busy binds at its 1.762/s
    assert slot_wait_seconds(_listings(), {"store": 1, "app": 1}, 1.762) == 0.0


def test_the_plan_sizes_threads_for_the_service_time_and_the_stores_slot() -> None:
    # Given listings at 25 stores with the file's 2 environments of 4 calls
    plan = make_plan(_listings(parallel_calls=4, batch_size=8), VENDOR)
    # Then the calls needed in flight are 35.24 x (0.07 s p95 + 0.227 s) = 10.5: 11, 6 each
    # (by the service time alone 35.24 x 0.07 = 2.5: 3, and the file's 4 were enough)
    assert plan.needed_in_flight_p95 == 11
    assert plan.recommended_parallel_calls == 6
    # and 8 calls carry X = 8 / (0.0519 s mean + the wait at X): each store asked X / 25 a
    # second, a wait of X x 0.5675^2 / 50 = 0.00644 X s, so 0.00644 X^2 + 0.0519 X = 8: 31.4/s,
    # not the rate's 35.24 (nor 8 / 0.0519 = 154/s by the service time alone)
    assert plan.calls_capacity_per_second == pytest.approx(31.4, abs=0.1)
    assert plan.binding == "consumers"
    # and `sweeper plan` says what a call waits beside its service time
    assert (
        "  service time     0.0519 s mean, 0.07 s p95 (vendor + overhead), + 0.227 s a call "
        "waits for a slot of a limit that does not bind" in render(plan.as_dict())
    )


def test_synth_sizes_listings_for_the_fewest_stores_at_which_the_app_binds() -> None:
    # Given listings with no consumer sizing: the app binds alone from 35.24 / 1.762 + 1 = 21
    # stores, each store's key then the busiest it is while the app binds
    policy = _listings()
    assert fewest_binding_scopes(policy) == 21
    # Then its threads carry 35.24/s at 0.07 s + 0.270 s: 35.24 x 0.340 = 11.99, 12 calls over
    # 2 environments, 6 each (by the service time alone: 2)
    consumer = derived_consumer(policy, latency=(0.02, 0.04))
    assert consumer.parallel_calls == 6

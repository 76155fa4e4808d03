"""What the producer's claims may take under a policy's limits (sweeper.producer.claim_bounds)."""

from __future__ import annotations

from typing import Any

from sweeper.config import Policy, Quota, ScopeConfig
from sweeper.producer.backpressure import floor
from sweeper.producer.claim_bounds import ClaimBounds, HeldRows, claim_bounds, held_rows


def rate(per_second: int) -> dict[str, Any]:
    return {"limit": per_second, "period_seconds": 1, "headroom": 1.0}


def policy_with(*limits: dict[str, Any], **extra: Any) -> Policy:
    """A policy with a 20 s lease (a 10 s horizon) and these limits."""
    return Policy.model_validate(
        {"name": "listings", "lease_seconds": 20, "limits": list(limits), **extra}
    )


STORE = {"name": "store", "key": "{tenant_id}", "rate": rate(2)}
APP = {"name": "app", "key": "app", "rate": rate(40)}


def test_the_app_limit_bounds_the_policy_and_the_store_limit_each_store() -> None:
    bounds = claim_bounds(policy_with(STORE, APP))
    assert bounds == ClaimBounds(
        policy_cap=400, policy_binding="app", scope_cap=20, scope_binding="store", to_consumers=()
    )


def test_a_per_store_limit_alone_sets_no_policy_wide_cap() -> None:
    # the stores' caps add up; the claim holds each to its own
    bounds = claim_bounds(policy_with(STORE))
    assert (bounds.policy_cap, bounds.scope_cap) == (None, 20)
    single = Policy(
        name="listings", lease_seconds=20, quota=Quota(**rate(2)), scope=ScopeConfig(kind="tenant")
    )
    assert claim_bounds(single).policy_cap is None


def test_a_policy_of_one_scope_keeps_its_quotas_formula() -> None:
    policy = Policy(name="exports", lease_seconds=20, quota=Quota(**rate(2)))
    assert claim_bounds(policy).policy_cap == policy.max_in_flight == 20
    assert claim_bounds(policy).policy_binding == "quota"


def test_the_tightest_of_several_app_wide_limits_binds() -> None:
    host = {"name": "host", "key": "{host}", "rate": rate(10)}
    bounds = claim_bounds(policy_with(STORE, APP, host))
    assert (bounds.policy_cap, bounds.policy_binding) == (100, "host")


def test_a_concurrency_cap_bounds_by_its_number_over_the_planned_latency() -> None:
    # 10 calls at once, each 0.5 s: 20 calls/s, 200 rows in the 10 s horizon
    cap = {"name": "conns", "key": "app", "max_in_flight": 10}
    planned = {"kind": "http", "latency_p50_seconds": 0.5, "latency_p95_seconds": 1.0}
    bounds = claim_bounds(policy_with(STORE, cap, action=planned))
    assert (bounds.policy_cap, bounds.policy_binding, bounds.to_consumers) == (200, "conns", ())


def test_a_concurrency_cap_without_a_planned_latency_is_left_to_the_consumers() -> None:
    cap = {"name": "conns", "key": "app", "max_in_flight": 10}
    bounds = claim_bounds(policy_with(STORE, cap))
    assert (bounds.policy_cap, bounds.to_consumers) == (None, ("conns",))


def test_a_limit_keyed_by_params_is_left_to_the_consumers() -> None:
    account = {"name": "account", "key": "{params.account}", "rate": rate(1)}
    bounds = claim_bounds(policy_with(STORE, account))
    assert (bounds.scope_cap, bounds.to_consumers) == (20, ("account",))


def test_a_tighter_tenant_limit_joins_the_scope_cap_when_the_scope_is_the_tenants() -> None:
    endpoint = {"name": "endpoint", "key": "{tenant_id}:{host}", "rate": rate(5)}
    account = {"name": "account", "key": "acct-{tenant_id}", "rate": rate(1)}
    bounds = claim_bounds(policy_with(endpoint, account))
    assert (bounds.scope_cap, bounds.scope_binding) == (10, "account")
    # over a coarser scope (one per policy), the claim cannot hold a tenant to it
    coarse = claim_bounds(policy_with({**endpoint, "key": "{host}"}, account))
    assert (coarse.scope_cap, coarse.to_consumers) == (50, ("account",))


def test_the_floor_is_a_share_of_the_binding_limit() -> None:
    # 1/16 of the app's 1,600 rows in a 40 s horizon, above one batch per environment (4 x 10)
    assert floor(policy_with(STORE, APP, lease_seconds=80)) == 100
    # with no app-wide limit, a share of one store's: 160 / 16 < 4 x 10
    assert floor(policy_with(STORE, lease_seconds=80)) == 40


def test_a_closed_app_limit_holds_every_row() -> None:
    policy = policy_with(STORE, APP)
    assert held_rows(policy, {"app:app", "s1"}) == HeldRows("app", (), ())
    # another policy's app key is not this one's
    assert held_rows(policy, {"app:other", "s1"}) == HeldRows(None, ("app:other", "s1"), ())


def test_a_closed_scope_of_one_scope_policy_holds_every_row() -> None:
    policy = Policy(name="exports")
    assert held_rows(policy, {"exports"}).everything == "quota"


def test_a_closed_tenant_key_holds_that_tenants_rows() -> None:
    endpoint = {"name": "endpoint", "key": "{tenant_id}:{host}", "rate": rate(5)}
    account = {"name": "account", "key": "acct-{tenant_id}-{tenant_id}.x", "rate": rate(1)}
    policy = policy_with(endpoint, account)
    closed = {"account:acct-t1-t1.x", "account:acct-t2-t3.x", "account:acct-a-b-a-b.x", "t9:"}
    held = held_rows(policy, closed)
    assert held.tenants == ("a-b", "t1")
    assert held.everything is None

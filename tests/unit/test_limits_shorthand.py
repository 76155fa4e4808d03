"""`[quota]` + `[scope]` is the one-limit shorthand of `[[limits]]`: after loading, every policy
lists its limits, and the policy files of today plan the limits they planned before."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from sweeper.config import (
    SHORTHAND_LIMIT_NAME,
    HttpActionConfig,
    LimitConfig,
    Policy,
    Quota,
    ScopeConfig,
)
from sweeper_cli.plan import render
from sweeper_tools.planning.plan import PlanInput, make_plan
from sweeper_tools.policy_file import load_config

REPO = Path(__file__).resolve().parents[2]


def test_a_quota_and_a_scope_load_as_one_limit_keyed_by_the_scope() -> None:
    # Given a policy written in the shorthand: a quota per tenant
    quota = Quota(limit=100, period_seconds=60)
    policy = Policy(name="payments", scope=ScopeConfig(kind="tenant"), quota=quota)
    # Then it lists one limit: the scope's key template at the quota's rate
    assert policy.limits == [
        LimitConfig(name=SHORTHAND_LIMIT_NAME, key="{policy}:{tenant_id}", rate=quota)
    ]
    # and the views others read keep their meaning: the scope as written, no further limit
    assert policy.scope == ScopeConfig(kind="tenant")
    assert policy.quota == quota
    assert policy.further_limits == []


def test_a_policy_that_states_nothing_has_the_default_quota_as_its_one_limit() -> None:
    policy = Policy(name="p")
    (limit,) = policy.limits
    assert (limit.key, limit.rate) == ("{policy}", Quota(limit=50, period_seconds=1.0))


def test_a_kinds_published_rate_is_the_one_limit_of_a_policy_that_names_no_quota() -> None:
    action = {"kind": "s3_delete", "bucket": "acme-exports", "key_template": "e/{object_id}"}
    policy = Policy.model_validate({"name": "p", "action": action})
    (limit,) = policy.limits
    assert limit.rate == policy.quota
    assert limit.rate is not None
    assert limit.rate.limit == 3500


def test_the_shorthands_limit_may_be_named_by_the_vendors_limit_header() -> None:
    # A vendor naming the limit it refused by: the shorthand's one limit is a listed limit
    action = HttpActionConfig(
        limit_header="X-RateLimit-Scope", limit_header_values={"tenant": SHORTHAND_LIMIT_NAME}
    )
    assert Policy(name="p", action=action).action.limit_values == {"tenant": "quota"}


_FORMS: dict[str, dict[str, Any]] = {
    "shorthand": {
        "name": "p",
        "scope": {"kind": "tenant"},
        "quota": {"limit": 9, "period_seconds": 1},
    },
    "default": {"name": "p"},
    "limits": {
        "name": "p",
        "limits": [
            {
                "name": "store",
                "key": "{host}/{tenant_id}",
                "rate": {"limit": 2, "period_seconds": 1},
            },
            {"name": "app", "key": "{host}", "rate": {"limit": 40, "period_seconds": 1}},
        ],
    },
}


@pytest.mark.parametrize("form", sorted(_FORMS))
def test_a_dumped_policy_loads_again_as_the_same_policy(form: str) -> None:
    # Given a policy in either form, dumped whole (every field, the derived limit included)
    policy = Policy.model_validate(_FORMS[form])
    # When it is loaded again, whole or as a function's environment carries it
    again = Policy.model_validate(policy.model_dump())
    # (infra.function.policy_json: only what was set)
    shipped = Policy.model_validate_json(policy.model_dump_json(exclude_unset=True))
    # Then it is the same policy, and its quota and scope agree with its first limit
    assert again == policy
    assert shipped == policy
    assert again.limits == policy.limits


# What `sweeper plan` planned for each policy file on main before the shorthand was a limit
# (p50 0.1 s, p95 0.3 s, 4 busy scopes): the rate, and each limit's key, keys and ceiling.
# A file written with [quota] + [scope] had no limit lines then: its one limit is its scope's
# key at the quota's rate, which was the plan's rate.
_ON_MAIN: dict[str, tuple[float, list[tuple[str, int, float | None, int | None, float]]]] = {
    "sweeper.toml:exports": (128.0, [("{policy}:{tenant_id}", 4, 32.0, None, 128.0)]),
    "helpdesk.toml:helpdesk": (46.62, [("{policy}:{tenant_id}", 4, 11.655, None, 46.62)]),
    # Files added since (issue 43): a further limit of 900 points a minute at 5 a call is 3
    # calls a second; a learned cost's points (200/s at 10 reserved) are 20 calls a second.
    "github-artifacts.toml:github-artifacts": (
        11.988,
        [
            ("{host}/{tenant_id}", 4, 4.162, None, 16.65),
            ("{host}/{tenant_id}", 4, 2.997, 100, 11.99),
        ],
    ),
    "shopify-graphql.toml:shopify-graphql": (
        75.44,
        [("shopify:{tenant_id}", 4, 18.86, None, 75.44)],
    ),
    "listings.toml:listings": (
        7.048,
        [("{host}/{tenant_id}", 4, 1.762, None, 7.05), ("{host}", 1, 35.24, None, 35.24)],
    ),
    "payments.toml:payments": (6.66, [("{policy}:{tenant_id}", 4, 1.665, None, 6.66)]),
    "plan-real-rates.toml:one-scope": (94.3, [("{policy}", 1, 94.3, None, 94.3)]),
    "plan-real-rates.toml:ten-scopes": (188.6, [("{policy}:{tenant_id}", 4, 47.15, None, 188.6)]),
    "refunds.toml:refunds": (
        377.2,
        [("{host}/{tenant_id}", 4, 94.3, None, 377.2), ("{host}/{tenant_id}", 4, None, 20, 516.17)],
    ),
    "s3-exports.toml:s3-exports": (13202.0, [("{policy}:{tenant_id}", 4, 3300.5, None, 13202.0)]),
    # Added since (issue 44): S3's own rate, as s3-exports.
    "dumps.toml:dumps": (13202.0, [("{policy}:{tenant_id}", 4, 3300.5, None, 13202.0)]),
}


def _shipped_policies() -> list[Any]:
    files = [REPO / "sweeper.toml", *sorted((REPO / "docs" / "examples").glob("*.toml"))]
    found = []
    for path in files:
        config = load_config(path)
        for policy in config.policies:
            others = [other for other in config.policies if other.name != policy.name]
            name = f"{path.name}:{policy.name}"
            found.append(pytest.param(name, policy, others, id=name))
    return found


def test_every_shipped_policy_file_is_planned_here() -> None:
    assert sorted(param.id for param in _shipped_policies()) == sorted(_ON_MAIN)


@pytest.mark.parametrize(("name", "policy", "sharing"), _shipped_policies())
def test_a_shipped_policy_file_plans_the_limits_it_planned_on_main(
    name: str, policy: Policy, sharing: list[Policy]
) -> None:
    # Given a policy file of today, planned as on main
    given = PlanInput(latency_p50_seconds=0.1, latency_p95_seconds=0.3, scopes=4)
    plan = make_plan(policy, given, sharing=sharing)
    # Then it plans the same rate, under the same limits, each with its keys and ceiling
    rate, limits = _ON_MAIN[name]
    assert plan.target_rate_per_second == rate
    planned = [
        (
            limit["key"],
            limit["keys"],
            limit["rate_per_second"],
            limit["max_in_flight"],
            limit["ceiling_per_second"],
        )
        for limit in plan.limits
    ]
    assert planned == limits
    # and prints each as a limit line, the one of a shorthand file too
    lines = render(plan.as_dict())
    assert sum(line.startswith("  limit ") for line in lines) == len(limits)


def test_plan_prints_the_one_limit_a_quota_and_scope_file_means() -> None:
    config = load_config(REPO / "docs" / "examples" / "payments.toml")
    given = PlanInput(latency_p50_seconds=0.1, latency_p95_seconds=0.3, scopes=4)
    lines = render(make_plan(config.policies[0], given).as_dict())
    assert (
        "  limit quota      1.665/s a key ({policy}:{tenant_id}) x 4 keys = 6.66/s; 1.0 used"
        in lines
    )
    assert "  binds            limit quota, 6.66/s" in lines


def test_the_console_lists_each_limit_by_its_key_in_either_form() -> None:
    from sweeper.operator_api.reads import limits_of

    # Given a policy of two limits, and one written in the shorthand
    listings = load_config(REPO / "docs" / "examples" / "listings.toml").policies[0]
    payments = load_config(REPO / "docs" / "examples" / "payments.toml").policies[0]
    # Then the page lists each limit with its key, the shorthand's as its one limit
    assert limits_of(listings)["limit store"] == "2 calls per 1 s a key of {host}/{tenant_id}"
    assert limits_of(listings)["limit app"] == "40 calls per 1 s a key of {host}"
    assert limits_of(payments)["limit quota"] == "100 calls per 60 s a key of {policy}:{tenant_id}"
    assert "scope" not in limits_of(listings)  # never "global" for a store's key

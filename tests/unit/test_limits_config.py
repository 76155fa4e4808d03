"""Several limits per policy: the `[[limits]]` form, the one-limit form kept, keys per call."""

from __future__ import annotations

from pathlib import Path

import pytest

from sweeper.config import LimitConfig, Policy, Quota
from sweeper.errors import ConfigError
from sweeper_tools.policy_file import load_config

TWO_LIMITS = """
[[policies]]
name = "listings"

[[policies.limits]]
name = "store"
key = "{policy}:{tenant_id}"
rate = { limit = 2, period_seconds = 1 }

[[policies.limits]]
name = "app"
key = "app"
rate = { limit = 40, period_seconds = 1, algorithm = "sliding_window" }
"""


def test_a_policy_lists_its_limits_and_the_first_is_the_jobs_scope(tmp_path: Path) -> None:
    path = tmp_path / "sweeper.toml"
    path.write_text(TWO_LIMITS, encoding="utf-8")
    policy = load_config(path).policies[0]
    assert [limit.name for limit in policy.limits] == ["store", "app"]
    assert policy.quota == Quota(limit=2, period_seconds=1)
    assert policy.scope.key_template == "{policy}:{tenant_id}"
    assert [limit.name for limit in policy.further_limits] == ["app"]
    # and it survives the trip through SWEEPER_POLICY
    assert Policy.model_validate_json(policy.model_dump_json()) == policy


def test_the_one_limit_form_is_kept_as_a_policy_without_further_limits() -> None:
    policy = Policy(name="p", quota=Quota(limit=10, period_seconds=1))
    assert [(limit.key, limit.rate) for limit in policy.limits] == [("{policy}", policy.quota)]
    assert policy.further_limits == []


def _limit(name: str, key: str, limit: int = 1) -> LimitConfig:
    return LimitConfig(name=name, key=key, rate=Quota(limit=limit, period_seconds=1))


def test_limits_beside_a_quota_of_their_own_are_refused() -> None:
    with pytest.raises(ValueError, match=r"leave \[quota\] and \[scope\] out"):
        Policy(name="p", quota=Quota(limit=9, period_seconds=1), limits=[_limit("a", "x")])


def test_the_first_limit_may_not_key_on_params() -> None:
    with pytest.raises(ValueError, match="its key may not use params"):
        Policy(name="p", limits=[_limit("acct", "{params.account}"), _limit("app", "app")])


def test_limit_names_differ() -> None:
    with pytest.raises(ValueError, match="limit names must differ"):
        Policy(name="p", limits=[_limit("a", "{tenant_id}"), _limit("a", "app")])


def test_a_key_with_an_unknown_field_names_the_field() -> None:
    with pytest.raises(ValueError, match=r"unknown field \{store\}"):
        _limit("a", "{store}")


def test_a_key_renders_the_calls_fields_and_params() -> None:
    limit = _limit("acct", "{host}/{params.account}/{tenant_id}")
    key = limit.render(
        policy="p", tenant_id="t1", object_id="o", host="api.example", params={"account": 42}
    )
    assert key == "api.example/42/t1"


def test_two_limits_whose_templates_render_alike_have_different_limiter_keys() -> None:
    # the consumer and the claim bounds key a limit's slots and closures by its name and key
    store, tenant = _limit("store", "{tenant_id}"), _limit("tenant", "{tenant_id}")
    keys = [
        limit.limiter_key(policy="p", tenant_id="t1", object_id="o", host="h", params={})
        for limit in (store, tenant)
    ]
    assert keys == ["store:t1", "tenant:t1"]


def test_a_broken_limits_file_is_one_config_error(tmp_path: Path) -> None:
    path = tmp_path / "sweeper.toml"
    path.write_text(TWO_LIMITS.replace('key = "app"', 'key = "{nope}"'), encoding="utf-8")
    with pytest.raises(ConfigError, match="nope"):
        load_config(path)


def test_a_limit_header_value_naming_no_listed_limit_is_refused() -> None:
    from sweeper.config import HttpActionConfig

    action = HttpActionConfig(limit_header="X-RateLimit-Scope", limit_header_values={"x": "shop"})
    with pytest.raises(ValueError, match=r"does not list: \['shop'\]"):
        Policy(name="p", action=action, limits=[_limit("store", "{tenant_id}"), _limit("app", "a")])


def test_a_limit_needs_a_rate_or_a_cap_and_the_first_a_rate_alone() -> None:
    with pytest.raises(ValueError, match="needs a rate, a max_in_flight or a budget"):
        LimitConfig(name="a", key="x")
    cap = LimitConfig(name="vendor", key="v", max_in_flight=10)
    with pytest.raises(ValueError, match="it needs a rate and no max_in_flight"):
        Policy(name="p", limits=[cap, _limit("store", "{tenant_id}")])
    policy = Policy(name="p", limits=[_limit("store", "{tenant_id}"), cap])
    assert policy.further_limits == [cap]


SLACKED = """
[[policies]]
name = "capped"

[[policies.limits]]
name = "scope"
key = "{policy}"
rate = { limit = 100, period_seconds = 1, slack_seconds = 0.5 }

[[policies.limits]]
name = "vendor"
key = "vendor"
max_in_flight = 10

[[policies]]
name = "one"

[policies.quota]
limit = 40
period_seconds = 1.0
slack_seconds = 0.3
"""


def test_a_rates_slack_is_set_in_a_limit_or_in_the_quota(tmp_path: Path) -> None:
    path = tmp_path / "sweeper.toml"
    path.write_text(SLACKED, encoding="utf-8")
    capped, one = load_config(path).policies
    assert capped.quota.slack_seconds == 0.5  # the first limit is the job's scope
    assert capped.limits[0].rate is not None
    assert capped.limits[0].rate.slack_seconds == 0.5
    assert one.quota.slack_seconds == 0.3
    assert Policy.model_validate_json(capped.model_dump_json()) == capped


def test_a_slack_longer_than_its_period_in_the_file_names_the_fix(tmp_path: Path) -> None:
    path = tmp_path / "sweeper.toml"
    path.write_text(SLACKED.replace("slack_seconds = 0.3", "slack_seconds = 2"), encoding="utf-8")
    with pytest.raises(ConfigError, match="slack_seconds 2 is longer than the period"):
        load_config(path)

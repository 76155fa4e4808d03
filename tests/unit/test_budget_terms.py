"""A budget is a regime: the claim, the console and the plan count it at its even pace, and a
policy that still sets `learn.budget` is told where a budget goes now."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from sweeper.config import Policy
from sweeper.operator_api.reads import limits_of
from sweeper.producer.claim_bounds import claim_bounds, horizon_seconds
from tests.unit.test_limit_regimes import _two_limits

#: An app-wide budget of 100,000 calls a UTC day, a fifth kept: 80,000 a day, 0.926/s.
APP_BUDGET = {"name": "app", "key": "app", "budget": {"limit": 100_000, "reserve_fraction": 0.2}}


def test_the_claim_and_the_console_count_a_budget_at_its_even_pace() -> None:
    # Given stores at 2/s under an app-wide budget of 80,000 a day (no rate of its own)
    policy = _two_limits(APP_BUDGET)
    # Then the producer claims what the budget spends within the horizon, bound by it
    bounds = claim_bounds(policy)
    assert bounds.policy_binding == "app"
    assert bounds.policy_cap == int(80_000 / 86_400 * horizon_seconds(policy))
    # And the console and `status` say what it allows
    assert limits_of(policy)["limit app"] == (
        "80000 of 100000 per 86400 s budget (fixed) a key of app"
    )


def test_a_policy_still_setting_learn_budget_is_told_where_it_goes() -> None:
    store = {
        "name": "store",
        "key": "{tenant_id}",
        "rate": {"limit": 2, "period_seconds": 1},
        "learn": {"source": "ratelimit", "budget": "rolling"},
    }
    with pytest.raises(ValidationError, match=r"learn\.budget is gone: give the limit budget"):
        Policy.model_validate({"name": "p", "limits": [store]})

"""A further limit counted in points (`cost_per_call`), a rule on a header's or a JSON path's
presence, and a points bucket paced at its restore rate: what the worked examples of issue 43
(docs/examples/github-artifacts.toml, shopify-graphql.toml) need of the product."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import ValidationError

from sweeper.actions.answer_match import Answer
from sweeper.actions.outcome_rules import OutcomeRule, OutcomeRules
from sweeper.admission.regimes import regime_of
from sweeper.config import LimitConfig, Policy, Quota
from sweeper.models import OutcomeClass
from sweeper.vendor_limits.pace import bucket_pace
from sweeper.vendor_reading import BucketReading
from sweeper_tools.planning.regimes import planning_of

NOW = 1_800_000_000.0
CORE: dict[str, Any] = {
    "name": "core",
    "key": "{tenant_id}",
    "rate": {"limit": 5000, "period_seconds": 3600},
}
SECONDARY: dict[str, Any] = {
    "name": "secondary",
    "key": "{tenant_id}",
    "rate": {"limit": 900, "period_seconds": 60},
    "cost_per_call": 5,
}


def test_a_limit_of_points_allows_its_points_over_a_calls_cost_in_calls() -> None:
    # Given GitHub's secondary limit: 900 points a minute, a DELETE costing 5
    limit = LimitConfig.model_validate(SECONDARY)
    # Then it allows 180 calls a minute: what the admission reserves and the plan shows
    assert limit.call_rate == Quota(limit=180, period_seconds=60)
    regime = regime_of(limit)
    assert regime.allows() == "180 calls per 60 s (5 points each)"
    assert planning_of(limit).plan(None).per_second == pytest.approx(
        Quota(limit=180, period_seconds=60).rate_per_second
    )


def test_a_limit_of_calls_is_its_rate() -> None:
    limit = LimitConfig.model_validate(CORE)
    assert limit.call_rate == limit.rate


def test_a_learned_cost_reserved_as_a_constant_counts_its_points_in_calls() -> None:
    # Given a Shopify bucket told 200 points a second, each call reserving 10
    limit = LimitConfig.model_validate(
        {**CORE, "rate": {"limit": 200, "period_seconds": 1}, "learn": {"cost": {"reserve": 10}}}
    )
    # Then the plan and the claim count 20 calls a second
    assert limit.call_rate == Quota(limit=20, period_seconds=1)


@pytest.mark.parametrize(
    ("limits", "message"),
    [
        ([CORE, {**SECONDARY, "cost_per_call": 1000}], "at least 1000 points"),
        ([{**CORE, "cost_per_call": 5}, SECONDARY], "cost_per_call is for a further limit"),
    ],
)
def test_a_cost_per_call_without_the_points_to_pay_it_or_on_the_scope_is_refused(
    limits: list[dict[str, Any]], message: str
) -> None:
    with pytest.raises(ValidationError, match=message):
        Policy.model_validate(
            {"name": "p", "limits": [CORE, *limits] if len(limits) == 1 else limits}
        )


SECONDARY_403 = OutcomeRule.model_validate(
    {
        "status": [403, 429],
        "header": {"name": "retry-after", "present": True},
        "outcome": "throttled",
    }
)
USER_ERRORS = OutcomeRule.model_validate(
    {
        "status": 200,
        "json_path": {"path": "data.productDelete.userErrors[0]", "present": True},
        "outcome": "permanent",
    }
)


def test_a_403_naming_a_wait_is_throttled_and_one_without_is_not_ruled() -> None:
    rules = OutcomeRules([SECONDARY_403])
    ruled = rules.classify(Answer.of(403, {"Retry-After": "30"}), NOW)
    assert ruled is not None
    assert ruled.outcome is OutcomeClass.THROTTLED
    assert rules.classify(Answer.of(403, {}), NOW) is None


@pytest.mark.parametrize(
    ("errors", "ruled"),
    [([{"field": ["id"], "message": "cannot"}], True), ([], False), (None, False)],
)
def test_a_user_error_is_a_failed_mutation_and_none_is_not(errors: Any, ruled: bool) -> None:
    body = json.dumps({"data": {"productDelete": {"deletedProductId": None, "userErrors": errors}}})
    answer = Answer.of(200, {}, body.encode())
    assert (OutcomeRules([USER_ERRORS]).classify(answer, NOW) is not None) is ruled


@pytest.mark.parametrize(
    "condition",
    [
        {"header": {"name": "retry-after"}},
        {"header": {"name": "retry-after", "equals": "1", "present": True}},
        {"json_path": {"path": "errors[0]"}},
        {"json_path": {"path": "errors[0]", "equals": "x", "present": True}},
    ],
)
def test_a_condition_tests_equality_or_presence_one_of_them(condition: dict[str, Any]) -> None:
    with pytest.raises(ValidationError, match="or present = true"):
        OutcomeRule.model_validate({**condition, "outcome": "throttled"})


def test_a_presence_rule_dumped_whole_loads_again() -> None:
    # A function's environment carries the policy dumped whole: equals = null beside present
    assert OutcomeRule.model_validate_json(USER_ERRORS.model_dump_json()) == USER_ERRORS


@pytest.mark.parametrize(
    ("ceiling", "restore", "pace"),
    [(200.0, 50.0, 50.0), (200.0, 1000.0, 200.0), (None, 100.0, 100.0), (200.0, None, None)],
)
def test_a_buckets_pace_is_its_restore_rate_never_above_the_ceiling(
    ceiling: float | None, restore: float | None, pace: float | None
) -> None:
    assert bucket_pace(ceiling, BucketReading(level=10, restore_rate=restore)) == pace

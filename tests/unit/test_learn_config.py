"""A limit's `learn`: its shorthands, its refusals (one line each), and the readers it builds."""

from __future__ import annotations

import json
import tomllib
from typing import Any

import pytest
from pydantic import ValidationError

from sweeper.actions.answer_match import Answer
from sweeper.config.base import _Strict
from sweeper.config.learn import (
    CostError,
    Learn,
    LearnConfig,
    PatternConfig,
    check_learn_against_limit,
)
from sweeper.config.loading import describe_validation_error
from sweeper.vendor_limits import BucketReading, CostReading, LimitReading


class _Limit(_Strict):
    """Stands for the limit model the field is attached to (`learn: Learn | None = None`)."""

    learn: Learn | None = None


def _learn(toml: str) -> LearnConfig:
    limit = _Limit.model_validate(tomllib.loads(toml))
    assert limit.learn is not None
    return limit.learn


def _refusal(toml: str) -> str:
    with pytest.raises(ValidationError) as refused:
        _Limit.model_validate(tomllib.loads(toml))
    return describe_validation_error(refused.value)


def test_a_string_names_the_source() -> None:
    assert _learn('learn = "ratelimit"').source == "ratelimit"
    assert _learn('learn = "x-ratelimit"').source == "x-ratelimit"


def test_a_table_with_a_pattern_is_short_for_a_pattern_source() -> None:
    learn = _learn(
        'learn = { header = "Sforce-Limit-Info", '
        "pattern = 'api-usage=(?P<used>\\d+)/(?P<quota>\\d+)', reserve_fraction = 0.2 }"
    )
    assert isinstance(learn.source, PatternConfig)
    assert learn.source.header == "Sforce-Limit-Info"
    assert learn.reserve_fraction == 0.2


def test_githubs_limit_reads_epoch_resets_by_the_configured_names() -> None:
    learn = _learn(
        'learn = { source = "x-ratelimit", reset = "epoch", '
        'headers = { limit = "X-Limit", remaining = "X-Left", reset = "X-Reset", resource = "" } }'
    )
    answer = Answer.of(
        200, {"X-Limit": "5000", "X-Left": "0", "X-Reset": "1000363", "x-ratelimit-resource": "no"}
    )
    assert learn.reader("core").read(answer, 1_000_000).limits == (
        LimitReading("core", quota=5000, remaining=0, reset_seconds=363),
    )


def test_a_shopify_cost_reads_its_bucket_and_reserves_a_param() -> None:
    learn = _learn('learn = { cost = { reserve = "{params.cost}", bucket = "shopify" } }')
    assert learn.cost is not None
    assert learn.cost.expected({"cost": 12}) == 12.0
    body = {
        "extensions": {
            "cost": {
                "requestedQueryCost": 12,
                "actualQueryCost": 7,
                "throttleStatus": {
                    "maximumAvailable": 1000.0,
                    "currentlyAvailable": 993,
                    "restoreRate": 50.0,
                },
            }
        }
    }
    reading = learn.reader("points").read(Answer.of(200, {}, json.dumps(body).encode()), 0)
    assert reading.cost == CostReading(12.0, 7.0, BucketReading(993.0, 1000.0, 50.0))


def test_an_actual_cost_in_a_header_overrides_the_buckets_path() -> None:
    learn = _learn(
        'learn = { cost = { reserve = 5, actual = { header = "X-Cost" }, bucket = "shopify" } }'
    )
    reading = learn.reader("points").read(Answer.of(200, {"X-Cost": "3"}), 0)
    assert reading.cost is not None
    assert reading.cost.actual == 3.0


@pytest.mark.parametrize(
    ("params", "code"),
    [
        ({}, "cost_param_missing"),
        ({"cost": "12"}, "cost_param_not_a_number"),
        ({"cost": -1}, "cost_param_out_of_range"),
        ({"cost": True}, "cost_param_not_a_number"),
    ],
)
def test_a_cost_param_that_is_not_a_usable_number_is_refused_by_code(
    params: dict[str, Any], code: str
) -> None:
    learn = _learn('learn = { cost = { reserve = "{params.cost}" } }')
    assert learn.cost is not None
    with pytest.raises(CostError) as refused:
        learn.cost.expected(params)
    assert refused.value.code == code
    assert "12" not in str(refused.value)


def test_a_reserve_is_a_count_or_a_share_of_the_quota() -> None:
    assert _learn('learn = { source = "ratelimit", reserve_fraction = 0.2 }').reserved(5000) == 1000
    assert _learn('learn = { source = "ratelimit", reserve = 300 }').reserved(5000) == 300
    assert _learn('learn = { source = "ratelimit", reserve = 9000 }').reserved(5000) == 5000


@pytest.mark.parametrize(
    ("toml", "says"),
    [
        ('learn = "retry-after"', "learn.source"),
        ('learn = { source = "ratelimit", reset = "epoch" }', "IETF fields send seconds"),
        (
            'learn = { header = "Sforce-Limit-Info", pattern = "(?P<quota>\\\\d+" }',
            "does not compile",
        ),
        (
            'learn = { header = "Bad Header", pattern = "(?P<quota>\\\\d+)/(?P<used>\\\\d+)" }',
            "header",
        ),
        ('learn = { source = "ratelimit", reserve = 5, reserve_fraction = 0.1 }', "not both"),
        ('learn = { source = "ratelimit", reserve_fraction = 1.0 }', "reserve_fraction"),
        ('learn = { source = "ratelimit", headers = { limit = "X-L" } }', "x-ratelimit"),
        ('learn = { cost = { reserve = "{params.a} + 1" } }', "params.NAME"),
        ("learn = { cost = { reserve = 0 } }", "(0, "),
        ('learn = { cost = { reserve = 1, actual = { json_path = "a..b" } } }', "json_path"),
        ("learn = { cost = { reserve = 1, actual = { } } }", "one of them"),
        ('learn = { source = "ratelimit", budget = "fixed" }', "learn.budget is gone"),
        ('learn = { source = "ratelimit", surprise = 1 }', "surprise"),
    ],
)
def test_a_learn_that_cannot_work_is_refused_in_one_line_naming_the_key(
    toml: str, says: str
) -> None:
    message = _refusal(toml)
    assert says in message
    assert "\n" not in message


def test_a_source_without_a_window_needs_one_from_the_limit() -> None:
    learn = _learn('learn = "x-ratelimit"')
    with pytest.raises(ValueError, match="needs the window") as refused:
        check_learn_against_limit(learn, "core", None)
    assert "\n" not in str(refused.value)
    check_learn_against_limit(learn, "core", 3600.0)  # a told rate's period serves
    windowed = _learn('learn = { source = "x-ratelimit", window_seconds = 3600 }')
    check_learn_against_limit(windowed, "core", None)


@pytest.mark.parametrize(
    ("learn", "shared"),
    [
        ({"source": "x-ratelimit"}, False),
        ({"source": "x-ratelimit", "reserve": 0}, True),
        ({"source": "x-ratelimit", "reserve": 100}, True),
        ({"source": "x-ratelimit", "reserve_fraction": 0.2}, True),
    ],
)
def test_a_quota_is_paced_as_shared_only_when_a_reserve_is_stated(
    learn: dict[str, object], shared: bool
) -> None:
    # A quota no one said is shared is paced by the vendor's statement alone
    assert LearnConfig.model_validate(learn).shared is shared

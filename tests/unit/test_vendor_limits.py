"""Limits read from a vendor's answers, each source from the vendor's published examples."""

from __future__ import annotations

import json
import re

import pytest

from sweeper.actions.answer_match import Answer
from sweeper.vendor_limits import (
    SHOPIFY_COST,
    BucketReading,
    CostReading,
    CostSource,
    LimitReading,
    PatternSource,
    RateLimitSource,
    Reader,
    ValueAt,
    XRateLimitFields,
    XRateLimitSource,
    compile_pattern,
)
from sweeper.vendor_limits.ietf import policy_for
from sweeper.vendor_limits.structured import Member, Token, parse_list

NOW = 1_691_591_000.0  # epoch seconds at which the answers below were "received"

SALESFORCE = r"api-usage=(?P<used>\d+)/(?P<quota>\d+)"


def _answer(headers: dict[str, str], body: object = None) -> Answer:
    return Answer.of(200, headers, None if body is None else json.dumps(body).encode())


# --- the IETF fields (draft-ietf-httpapi-ratelimit-headers) ---------------------------------


def test_the_drafts_two_policies_and_the_state_of_one_are_read_and_joined_by_name() -> None:
    # Given the draft's example of two policies and the current state of the first
    answer = _answer(
        {
            "RateLimit-Policy": '"burst";q=100;w=60,"daily";q=1000;w=86400',
            "RateLimit": '"burst";r=50;t=30',
        }
    )
    # When it is read
    reading = RateLimitSource().read(answer, NOW)
    # Then each policy is a limit, the state joined to its policy by name
    assert reading.limits == (
        LimitReading("burst", quota=100, window_seconds=60.0, remaining=50, reset_seconds=30.0),
        LimitReading("daily", quota=1000, window_seconds=86400.0),
    )
    assert reading.diagnostics == ()


def test_a_policy_named_by_a_token_and_a_unit_other_than_requests_are_read() -> None:
    answer = _answer({"RateLimit-Policy": 'peruser;q=65535;qu="content-bytes";w=10'})
    assert RateLimitSource().read(answer, NOW).limits == (
        LimitReading("peruser", quota=65535, window_seconds=10.0, unit="content-bytes"),
    )


def test_a_state_without_its_policy_still_says_what_remains() -> None:
    answer = _answer({"RateLimit": '"problemPolicy";r=0;t=10'})
    assert RateLimitSource().read(answer, NOW).limits == (
        LimitReading("problemPolicy", remaining=0, reset_seconds=10.0),
    )


def test_the_partition_key_is_parsed_but_never_kept() -> None:
    answer = _answer({"RateLimit-Policy": '"peruser";q=100;w=60;pk=:cHJvamVjdDEyMw==:'})
    (limit,) = RateLimitSource().read(answer, NOW).limits
    assert "cHJvamVjdDEyMw" not in repr(limit)
    assert "project123" not in repr(limit)


def test_a_policy_without_a_quota_is_left_aside_with_a_diagnostic_that_holds_no_value() -> None:
    answer = _answer({"RateLimit-Policy": '"secret-account-7";w=60,"ok";q=5;w=1'})
    reading = RateLimitSource().read(answer, NOW)
    assert [limit.name for limit in reading.limits] == ["ok"]
    assert reading.diagnostics
    assert "secret-account-7" not in " ".join(reading.diagnostics)


@pytest.mark.parametrize(
    "field",
    [
        '"burst";q=100;w=60,',  # a trailing comma
        '("a" "b");q=1',  # an inner list
        '"burst";q=1.5',  # a decimal quota: the member is kept out, not the field
        '"burst";Q=100',  # keys are lower case
        '"burst";q=100;w=60 "daily"',  # members are separated by commas
    ],
)
def test_a_field_outside_the_grammar_teaches_no_quota(field: str) -> None:
    reading = RateLimitSource().read(_answer({"RateLimit-Policy": field}), NOW)
    assert all(limit.quota is None for limit in reading.limits)
    assert reading.diagnostics


def test_the_structured_subset_reads_each_bare_item_type() -> None:
    assert parse_list('a;n=-7;d=1.25;s="x\\"y";b=?0;f;bytes=:AAE=:, "two"') == (
        Member(
            Token("a"), {"n": -7, "d": 1.25, "s": 'x"y', "b": False, "f": True, "bytes": b"\0\1"}
        ),
        Member("two", {}),
    )


# --- X-RateLimit-* --------------------------------------------------------------------------


def test_githubs_headers_give_the_resource_and_an_epoch_reset_as_seconds_to_wait() -> None:
    # Given GitHub's documented answer: reset in epoch seconds, the resource named
    answer = _answer(
        {
            "x-ratelimit-limit": "5000",
            "x-ratelimit-remaining": "4999",
            "x-ratelimit-used": "1",
            "x-ratelimit-reset": "1691591363",
            "x-ratelimit-resource": "core",
        }
    )
    # When read with epoch resets
    reading = XRateLimitSource(reset_as="epoch").read(answer, NOW)
    # Then the reset is the seconds from now to that time
    assert reading.limits == (
        LimitReading("core", quota=5000, remaining=4999, reset_seconds=363.0),
    )


def test_a_reset_in_seconds_is_a_wait_and_header_names_are_configurable() -> None:
    fields = XRateLimitFields(
        limit="RateLimit-Limit", remaining="RateLimit-Remaining", reset="RateLimit-Reset"
    )
    answer = _answer({"RateLimit-Limit": "60", "RateLimit-Remaining": "0", "RateLimit-Reset": "30"})
    reading = XRateLimitSource(fields, reset_as="seconds", name="gitlab").read(answer, NOW)
    assert reading.limits == (LimitReading("gitlab", quota=60, remaining=0, reset_seconds=30.0),)


def test_remaining_comes_from_used_when_the_vendor_sends_only_that() -> None:
    answer = _answer({"x-ratelimit-limit": "900", "x-ratelimit-used": "905"})
    (limit,) = XRateLimitSource().read(answer, NOW).limits
    assert (limit.quota, limit.remaining) == (900, 0)


def test_an_epoch_reset_read_as_seconds_or_long_past_is_not_kept() -> None:
    answer = _answer({"x-ratelimit-limit": "10", "x-ratelimit-reset": "1691591363"})
    (as_seconds,) = XRateLimitSource(reset_as="seconds").read(answer, NOW).limits
    assert as_seconds.reset_seconds is None  # fifty years is no wait
    (past,) = XRateLimitSource(reset_as="epoch").read(answer, NOW + 86_400).limits
    assert past.reset_seconds is None


# --- a header with a pattern (Salesforce) ---------------------------------------------------


def test_salesforces_limit_info_header_is_read_by_its_pattern() -> None:
    source = PatternSource(
        "Sforce-Limit-Info", compile_pattern(SALESFORCE), name="api", window_seconds=86_400
    )
    answer = _answer({"Sforce-Limit-Info": "api-usage=10018/100000; api-bursts=1/750"})
    assert source.read(answer, NOW).limits == (
        LimitReading("api", quota=100000, window_seconds=86_400, remaining=89982),
    )


def test_salesforces_usage_past_its_allocation_leaves_nothing_remaining() -> None:
    source = PatternSource("Sforce-Limit-Info", compile_pattern(SALESFORCE))
    answer = _answer({"Sforce-Limit-Info": "api-usage=110018/100000; api-bursts=1/750"})
    (limit,) = source.read(answer, NOW).limits
    assert limit.remaining == 0


@pytest.mark.parametrize(
    ("pattern", "says"),
    [
        (r"api-usage=(\d+", "does not compile"),
        (r"(?P<account>\w+)=(?P<quota>\d+)", "unknown groups"),
        (r"(?P<quota>\d+)", "needs"),
    ],
)
def test_a_pattern_that_cannot_yield_a_limit_is_refused_in_one_line(
    pattern: str, says: str
) -> None:
    with pytest.raises(ValueError, match=says) as refused:
        compile_pattern(pattern)
    assert "\n" not in str(refused.value)


def test_a_pattern_that_finds_nothing_teaches_nothing_and_keeps_no_text() -> None:
    source = PatternSource("Sforce-Limit-Info", compile_pattern(SALESFORCE))
    reading = source.read(_answer({"Sforce-Limit-Info": "org=00D5e000000XyZ"}), NOW)
    assert not reading.learned
    assert "00D5e" not in " ".join(reading.diagnostics)


# --- a cost in the body (Shopify GraphQL) ---------------------------------------------------

SHOPIFY_ANSWER = {
    "data": {"productDelete": {"deletedProductId": "gid://shopify/Product/1", "userErrors": []}},
    "extensions": {
        "cost": {
            "requestedQueryCost": 10,
            "actualQueryCost": 10,
            "throttleStatus": {
                "maximumAvailable": 2000.0,
                "currentlyAvailable": 1990,
                "restoreRate": 100.0,
            },
        }
    },
}


def test_shopifys_cost_and_bucket_are_read_from_the_body() -> None:
    reading = SHOPIFY_COST.read(_answer({}, SHOPIFY_ANSWER), NOW)
    assert reading.cost == CostReading(10.0, 10.0, BucketReading(1990.0, 2000.0, 100.0))


def test_a_throttled_shopify_answer_has_no_actual_cost_but_still_states_its_bucket() -> None:
    throttled = {
        "errors": [{"message": "Throttled", "extensions": {"code": "THROTTLED"}}],
        "extensions": {
            "cost": {
                "requestedQueryCost": 202,
                "actualQueryCost": None,
                "throttleStatus": {
                    "maximumAvailable": 1000.0,
                    "currentlyAvailable": 186,
                    "restoreRate": 50.0,
                },
            }
        },
    }
    reading = SHOPIFY_COST.read(_answer({}, throttled), NOW)
    assert reading.cost == CostReading(202.0, None, BucketReading(186.0, 1000.0, 50.0))


def test_a_cost_may_be_read_from_a_header() -> None:
    source = CostSource(actual=ValueAt(header="X-Query-Cost"))
    reading = source.read(_answer({"X-Query-Cost": "5"}), NOW)
    assert reading.cost == CostReading(None, 5.0, None)


def test_an_answer_without_a_cost_teaches_none() -> None:
    assert SHOPIFY_COST.read(_answer({}, {"data": {}}), NOW).cost is None


# --- several sources -------------------------------------------------------------------------


def test_a_reader_reads_every_source_of_one_answer() -> None:
    reader = Reader((RateLimitSource(), SHOPIFY_COST))
    answer = _answer({"RateLimit": '"points";r=1990;t=1'}, SHOPIFY_ANSWER)
    reading = reader.read(answer, NOW)
    assert reading.limit("points") == LimitReading("points", remaining=1990, reset_seconds=1.0)
    assert reading.cost is not None
    assert reading.cost.actual == 10.0


def test_diagnostics_name_the_field_never_its_value() -> None:
    reader = Reader((RateLimitSource(), XRateLimitSource()))
    secret = "acct-4242"
    answer = _answer({"RateLimit-Policy": f"{secret};;q", "x-ratelimit-limit": secret})
    reading = reader.read(answer, NOW)
    assert not reading.learned
    assert reading.diagnostics
    assert not any(re.search(secret, line) for line in reading.diagnostics)


# --- which stated policy a limit follows ----------------------------------------------------

TWO_POLICIES = (
    LimitReading("burst", quota=100, window_seconds=60),
    LimitReading("daily", quota=1000, window_seconds=86_400),
)


def test_a_limit_follows_the_policy_configured_then_the_one_of_its_name() -> None:
    assert policy_for(TWO_POLICIES, limit_name="x", policy="daily") == TWO_POLICIES[1]
    assert policy_for(TWO_POLICIES, limit_name="burst") == TWO_POLICIES[0]
    # a configured policy the vendor does not state is not replaced by a guess
    assert policy_for(TWO_POLICIES, limit_name="x", policy="hourly", told_window_seconds=60) is None


def test_a_limit_named_otherwise_follows_the_one_policy_of_its_window() -> None:
    assert (
        policy_for(TWO_POLICIES, limit_name="per-minute", told_window_seconds=60)
        == (TWO_POLICIES[0])
    )
    twins = (*TWO_POLICIES, LimitReading("other", quota=5, window_seconds=60))
    assert policy_for(twins, limit_name="per-minute", told_window_seconds=60) is None

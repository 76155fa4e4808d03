"""What a vendor sends cannot break the reading: anything yields a bounded reading or nothing,
never an exception, and never a diagnostic that carries what was sent."""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from sweeper.actions.answer_match import Answer
from sweeper.vendor_limits import (
    SHOPIFY_COST,
    PatternSource,
    RateLimitSource,
    Reader,
    ResetAs,
    VendorReading,
    XRateLimitSource,
    compile_pattern,
)
from sweeper.vendor_reading import MAX_COUNT, MAX_SECONDS

NOW = 1_700_000_000.0
#: Hypothesis builds its table of characters once per clone (seconds, on a busy machine): the
#: first draw of text is slow for that reason alone.
HOSTILE = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])
READER = Reader(
    (
        RateLimitSource(),
        XRateLimitSource(reset_as="epoch"),
        PatternSource(
            "Sforce-Limit-Info", compile_pattern(r"api-usage=(?P<used>\d+)/(?P<quota>\d+)")
        ),
        SHOPIFY_COST,
    )
)
FIELDS = (
    "RateLimit-Policy",
    "RateLimit",
    "x-ratelimit-limit",
    "x-ratelimit-remaining",
    "x-ratelimit-reset",
    "x-ratelimit-resource",
    "x-ratelimit-used",
    "Sforce-Limit-Info",
)
#: A diagnostic is a field's name (or a cost's path) and a phrase of this module's own words.
DIAGNOSTIC_RE = re.compile(
    rf"^({'|'.join(map(re.escape, FIELDS))}|extensions[a-zA-Z.]+): [a-z ;,]+$"
)

HOSTILE_NUMBERS = st.sampled_from(
    ["-1", "-100", "NaN", "nan", "inf", "1e400", "9" * 400, "1" * 20, "0x10", "+-3", "1_000", "٣"]
)
#: Text near the grammar (so that many draws almost parse), and text of any character.
NEAR_GRAMMAR = st.text(alphabet='"pqrtwu=;,: ?*.-019/\\é', max_size=40)
ANY_TEXT = NEAR_GRAMMAR | st.text(max_size=40) | HOSTILE_NUMBERS


def _assert_bounded(reading: VendorReading) -> None:
    for limit in reading.limits:
        for value in (limit.quota, limit.remaining):
            assert value is None or 0 <= value <= MAX_COUNT
        for wait in (limit.window_seconds, limit.reset_seconds):
            assert wait is None or 0 <= wait <= MAX_SECONDS
    if reading.cost is not None:
        bucket = reading.cost.bucket
        values = [reading.cost.requested, reading.cost.actual]
        values += [] if bucket is None else [bucket.level, bucket.maximum, bucket.restore_rate]
        assert all(v is None or 0 <= v <= MAX_COUNT for v in values)
    for line in reading.diagnostics:
        assert DIAGNOSTIC_RE.match(line), line


@HOSTILE
@given(st.dictionaries(st.sampled_from(FIELDS), ANY_TEXT, max_size=4))
def test_any_header_values_yield_a_bounded_reading_and_never_raise(headers: dict[str, str]) -> None:
    _assert_bounded(READER.read(Answer.of(200, headers), NOW))


@HOSTILE
@given(st.sampled_from(FIELDS[2:5]), HOSTILE_NUMBERS)
def test_a_hostile_number_teaches_nothing(field: str, value: str) -> None:
    reading = READER.read(Answer.of(200, {field: value}), NOW)
    assert all(limit.quota is None and limit.remaining is None for limit in reading.limits)


@HOSTILE
@given(HOSTILE_NUMBERS)
def test_a_hostile_quota_in_the_ietf_fields_teaches_nothing(value: str) -> None:
    reading = READER.read(Answer.of(200, {"RateLimit-Policy": f'"p";q={value};w=60'}), NOW)
    assert not reading.limits


@settings(max_examples=20, deadline=None)
@given(st.integers(min_value=17, max_value=10_000))
def test_a_list_of_thousands_of_policies_teaches_nothing(members: int) -> None:
    field = ",".join(f'"p{i}";q=10;w=1' for i in range(members))
    reading = READER.read(Answer.of(200, {"RateLimit-Policy": field}), NOW)
    assert not reading.learned
    assert reading.diagnostics


@HOSTILE
@given(st.text(min_size=1, max_size=20).filter(lambda t: not t.isascii()))
def test_non_ascii_in_a_policy_teaches_nothing(name: str) -> None:
    reading = READER.read(Answer.of(200, {"RateLimit-Policy": f'"{name}";q=10;w=1'}), NOW)
    assert not reading.learned


JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats()
    | st.text(max_size=10)
    | st.sampled_from([10**400, -(10**30)]),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=20), children, max_size=4)
    ),
    max_leaves=12,
)


@HOSTILE
@given(JSON_VALUES)
@example(10**400)
@example(float("nan"))
@example(-(10**30))
def test_any_body_under_the_cost_paths_yields_a_bounded_cost(value: object) -> None:
    body = {
        "extensions": {
            "cost": {
                "requestedQueryCost": value,
                "actualQueryCost": value,
                "throttleStatus": {"currentlyAvailable": value},
            }
        }
    }
    try:
        raw = json.dumps(body).encode()
    except ValueError:  # NaN is not JSON; send it the way a careless server would
        raw = json.dumps(body, allow_nan=True).encode()
    _assert_bounded(READER.read(Answer.of(200, {}, raw), NOW))


@HOSTILE
@given(st.binary(max_size=300))
def test_any_body_bytes_never_raise(body: bytes) -> None:
    _assert_bounded(READER.read(Answer.of(200, {}, body), NOW))


def test_a_reset_past_the_window_the_vendor_states_is_read_as_that_window() -> None:
    # Given a policy of 10 per 60 s whose state says none remain for 3,000 s (a window turns
    # within its length: the reset contradicts the policy)
    answer = Answer.of(200, {"RateLimit-Policy": '"p";q=10;w=60', "RateLimit": '"p";r=0;t=3000'})
    # When read
    (limit,) = READER.read(answer, NOW).limits
    # Then the gate it closes is one window at most, and the contradiction is reported
    assert limit.reset_seconds == 60.0
    (line,) = READER.read(answer, NOW).diagnostics
    assert line.startswith("RateLimit: ")
    assert DIAGNOSTIC_RE.match(line)


@pytest.mark.parametrize(
    ("headers", "reset_as"),
    [
        ({"x-ratelimit-limit": "10", "x-ratelimit-reset": "1700000060"}, "seconds"),  # an epoch
        ({"x-ratelimit-limit": "10", "x-ratelimit-reset": "30"}, "epoch"),  # seconds to wait
        ({"x-ratelimit-limit": "10", "x-ratelimit-reset": "-5"}, "seconds"),
        ({"x-ratelimit-limit": "10", "x-ratelimit-reset": "30, 30"}, "seconds"),  # sent twice
        ({"RateLimit-Policy": '"p";q=10;w=0'}, "seconds"),  # a window of no length
        ({"RateLimit-Policy": '"p";q=10;w=-60'}, "seconds"),
        ({"RateLimit": '"p";r=1;t=99999999999'}, "seconds"),
    ],
)
def test_a_reset_or_window_that_cannot_be_read_is_left_aside_and_said(
    headers: dict[str, str], reset_as: ResetAs
) -> None:
    # Given an answer whose count is readable but whose reset or window is not (the wrong
    # kind of reset for the configuration, negative, twice, out of bounds)
    reader = Reader((RateLimitSource(), XRateLimitSource(reset_as=reset_as)))
    reading = reader.read(Answer.of(200, headers), NOW)
    # Then the count is kept, the reset or window is not (no closure from it) ...
    assert reading.limits
    assert all(limit.reset_seconds is None for limit in reading.limits)
    assert all(limit.window_seconds is None for limit in reading.limits)
    # ... and a diagnostic says so (to be counted and logged), naming only the field
    assert reading.diagnostics
    for line in reading.diagnostics:
        assert DIAGNOSTIC_RE.match(line), line


@pytest.mark.parametrize("value", [True, "12", [12], {"n": 12}, -3, 10**40, float("inf")])
def test_a_cost_that_is_not_a_number_within_bounds_is_left_aside_and_said(value: object) -> None:
    # Given an answer whose actual cost is a boolean, a string, a list, negative or huge
    body = {"extensions": {"cost": {"requestedQueryCost": 10, "actualQueryCost": value}}}
    reading = READER.read(Answer.of(200, {}, json.dumps(body).encode()), NOW)
    # Then nothing of it is charged, and a diagnostic says so
    assert reading.cost is not None
    assert reading.cost.actual is None
    assert reading.diagnostics == ("extensions.cost.actualQueryCost: not a number within bounds",)


def test_a_throttled_calls_null_cost_is_no_diagnostic() -> None:
    # Given Shopify's answer to a throttled call: its actual cost is null
    body = {"extensions": {"cost": {"requestedQueryCost": 10, "actualQueryCost": None}}}
    reading = READER.read(Answer.of(200, {}, json.dumps(body).encode()), NOW)
    # Then that is no fault of the answer
    assert reading.diagnostics == ()


@pytest.mark.parametrize("value", ["abc", "-1", "5, 5", "2.5", "\u0663"])
@pytest.mark.parametrize("field", ["x-ratelimit-remaining", "x-ratelimit-used"])
def test_a_count_that_cannot_be_read_beside_one_that_can_is_left_aside_and_said(
    field: str, value: str
) -> None:
    # Given an answer whose limit is readable but whose remaining (or used) count is not
    headers = {"x-ratelimit-limit": "60", field: value}
    reading = XRateLimitSource().read(Answer.of(200, headers), NOW)
    # Then the limit is kept, nothing is read of the count ...
    (limit,) = reading.limits
    assert (limit.quota, limit.remaining) == (60, None)
    # ... and a diagnostic names the field (to be counted and logged), never its value
    (line,) = reading.diagnostics
    assert line.startswith(f"{field}: ")
    assert DIAGNOSTIC_RE.match(line), line

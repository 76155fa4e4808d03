"""Params as every door checks them, and identity params in the operation key."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from sweeper.config import Policy, S3Discovery, SmokeConfig, SqlDiscovery
from sweeper.errors import InputError, OperatorError
from sweeper.models import JobMessage, OutcomeClass, identity_values, operation_key, params_digest
from sweeper.params import MAX_PARAMS_BYTES, ParamsError, ParamsRules
from sweeper_cli.base import OUTCOMES
from sweeper_tools.obligation_file import parse_jobs
from sweeper_tools.smoke import canary_for, canary_key

NOW = datetime(2026, 12, 1, tzinfo=UTC)
SCHEMA = {
    "type": "object",
    "properties": {"business_date": {"type": "string", "format": "date"}},
    "required": ["business_date"],
}


def _rules(**policy: Any) -> ParamsRules:
    return ParamsRules.of(Policy(name="payments", **policy))


def _rule_of(rules: ParamsRules, value: object) -> str:
    with pytest.raises(ParamsError) as refused:
        rules.check(value)
    return refused.value.rule


def test_no_params_are_an_empty_object() -> None:
    assert ParamsRules().check(None) == {}


@pytest.mark.parametrize("value", [[], "x", 3, True])
def test_params_that_are_not_an_object_are_refused(value: object) -> None:
    assert _rule_of(ParamsRules(), value) == "params_not_object"


def test_params_up_to_four_kilobytes_encoded_are_taken_and_one_byte_more_is_refused() -> None:
    # {"k":"..."} is 8 bytes around the value
    exact = {"k": "x" * (MAX_PARAMS_BYTES - 8)}
    assert ParamsRules().check(exact) == exact
    assert _rule_of(ParamsRules(), {"k": "x" * (MAX_PARAMS_BYTES - 7)}) == "params_too_large"


def test_the_bound_counts_utf8_bytes_not_characters() -> None:
    assert _rule_of(ParamsRules(), {"k": "é" * (MAX_PARAMS_BYTES // 2)}) == "params_too_large"


@pytest.mark.parametrize("value", [{"k": "a\x00b"}, {"a\x00": 1}, {"k": "\ud800"}])
def test_params_postgresql_cannot_store_are_refused(value: dict[str, Any]) -> None:
    assert _rule_of(ParamsRules(), value) == "params_unstorable"


def test_an_escaped_backslash_before_u0000_text_is_not_a_nul() -> None:
    text = {"k": "\\u0000"}  # a backslash, then the characters u0000
    assert ParamsRules().check(text) == text


def test_a_schema_failure_names_the_keyword_and_place_in_the_schema_never_the_value() -> None:
    rules = _rules(params_schema={**SCHEMA, "additionalProperties": False})
    with pytest.raises(ParamsError) as refused:
        rules.check({"business_date": "2026-11-30", "cust-4711": "secret-value"})
    assert refused.value.rule == "params_schema"
    assert "additionalProperties" in refused.value.reason
    assert "secret-value" not in refused.value.reason
    assert "cust-4711" not in refused.value.reason


def test_identity_params_must_be_present_and_strings_or_integers() -> None:
    rules = _rules(identity_params=["business_date"])
    assert _rule_of(rules, {}) == "identity_param_missing"
    for bad in (None, True, 1.5, {"d": 1}, "", " padded", "a\nb"):
        assert _rule_of(rules, {"business_date": bad}) == "identity_param_invalid"
    assert rules.check({"business_date": 20261130}) == {"business_date": 20261130}


def test_identity_values_follow_the_policys_order() -> None:
    params = {"b": "2", "a": 1}
    assert identity_values(params, ["a", "b"]) == ("1", "2")


def test_without_identity_params_the_operation_key_is_as_it_always_was() -> None:
    assert operation_key("payments", "acct_1", "pay_9", 1) == "payments:acct_1:pay_9:v1"
    assert operation_key("payments", "acct_1", "pay_9", 1, ()) == "payments:acct_1:pay_9:v1"


def test_identity_values_join_the_operation_key_before_the_version() -> None:
    key = operation_key("payments", "acct_1", "pay_9", 1, ("2026-11-30",))
    assert key == "payments:acct_1:pay_9:2026-11-30:v1"


VALUES = st.text(min_size=1, max_size=10)


@given(a=st.tuples(VALUES, VALUES), b=st.tuples(VALUES, VALUES))
def test_different_identity_values_never_share_an_operation_key(
    a: tuple[str, str], b: tuple[str, str]
) -> None:
    if a != b:
        assert operation_key("p", "t", "o", 1, a) != operation_key("p", "t", "o", 1, b)


def test_a_policy_with_an_invalid_schema_is_refused_at_load() -> None:
    with pytest.raises(ValidationError, match="not a valid JSON Schema"):
        Policy(name="payments", params_schema={"type": "no-such-type"})


def test_a_policy_naming_an_identity_param_twice_is_refused() -> None:
    with pytest.raises(ValidationError, match="twice"):
        Policy(name="payments", identity_params=["d", "d"])


def test_sql_param_columns_may_not_be_key_columns() -> None:
    with pytest.raises(ValidationError, match="key columns"):
        SqlDiscovery(query="SELECT 1", param_columns=["due_at"])


def test_s3_metadata_params_are_lower_case_keys() -> None:
    with pytest.raises(ValidationError):
        S3Discovery(bucket="abc", key_template="{tenant_id}/{object_id}", metadata_params=["Up"])


@pytest.mark.parametrize(
    "header",
    ["tenant_id,object_id,params", "tenant_id,object_id,due_at,params"],
)
def test_a_csv_header_may_name_a_params_column(header: str) -> None:
    due = ",2026-12-01T00:00:00Z" if "due_at" in header else ""
    text = f'{header}\nt1,o1{due},"{{""a"": 1}}"\nt1,o2{due},\n'
    jobs = parse_jobs(text, "csv", NOW)
    assert [job.params for job in jobs] == [{"a": 1}, {}]


def test_a_csv_params_cell_that_is_not_json_is_refused_by_line() -> None:
    with pytest.raises(InputError, match=r"line 2: invalid params: .*params_not_object"):
        parse_jobs("tenant_id,object_id,params\nt1,o1,{not json\n", "csv", NOW)


def test_a_message_names_params_by_a_digest_that_changes_with_them() -> None:
    assert params_digest({}) is None
    assert params_digest({"a": 1, "b": 2}) == params_digest({"b": 2, "a": 1})
    assert params_digest({"a": 1}) != params_digest({"a": 2})
    message = JobMessage(
        key="k",
        policy="p",
        policy_version=1,
        tenant_id="t",
        object_id="o",
        scope="s",
        attempt=0,
        batch_id="b",
        params_digest=params_digest({"a": 1}),
    )
    assert "params_digest" in message.to_body()


def test_a_smoke_canary_carries_the_smoke_sections_params_checked_like_any_door() -> None:
    smoke = SmokeConfig(tenant_id="sandbox", params={"business_date": "2026-11-30"})
    policy = Policy(name="payments", identity_params=["business_date"], smoke=smoke)
    canary = canary_for(policy, NOW)
    assert canary.params == {"business_date": "2026-11-30"}
    assert canary_key(policy, canary).endswith(f":{canary.object_id}:2026-11-30:v1")
    bare = policy.model_copy(update={"smoke": SmokeConfig(tenant_id="sandbox")})
    with pytest.raises(OperatorError, match=r"\[policies.smoke\] params: .*identity_param_missing"):
        canary_for(bare, NOW)


def test_the_cli_offers_every_outcome_class_to_its_filters() -> None:
    # (`sweeper retry --outcome snooze` is the runbook's way back for snooze_exhausted jobs)
    assert sorted(OUTCOMES) == sorted(o.value for o in OutcomeClass)

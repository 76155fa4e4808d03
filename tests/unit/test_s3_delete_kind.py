"""The s3_delete kind: its key template, its grants and path, its classification, its quota."""

from __future__ import annotations

from typing import Any

import pytest
from botocore.exceptions import ClientError, ConnectTimeoutError, ReadTimeoutError
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from sweeper.actions.s3_delete import (
    S3_DELETES_PER_SECOND_PER_PREFIX,
    BadKeyError,
    S3DeleteActionConfig,
    classify_client_error,
    classify_transport_error,
    render_key,
)
from sweeper.config import Policy
from sweeper.models import ActionCall, OutcomeClass
from sweeper_tools.deploy import deploy_for
from sweeper_tools.deploy.base import AwsService, NetworkPath

TEMPLATE = "exports/{tenant_id}/{object_id+}"


def call(tenant_id: str = "t1", object_id: str = "a.csv", **params: Any) -> ActionCall:
    return ActionCall(
        key="exports:t1:a:v1",
        idempotency_key="exports:t1:a:v1",
        policy="exports",
        policy_version=1,
        tenant_id=tenant_id,
        object_id=object_id,
        scope="global",
        attempt=0,
        batch_id="b",
        params=params,
    )


def config(template: str = TEMPLATE) -> S3DeleteActionConfig:
    return S3DeleteActionConfig(bucket="acme-exports", key_template=template)


def test_a_spanning_object_id_fills_several_segments() -> None:
    assert render_key(TEMPLATE, call(object_id="2026/11/a.csv")) == "exports/t1/2026/11/a.csv"


def test_a_plain_field_fills_exactly_one_segment() -> None:
    with pytest.raises(BadKeyError, match="spans segments"):
        render_key("exports/{tenant_id}/{object_id}", call(object_id="2026/a.csv"))
    with pytest.raises(BadKeyError):
        render_key(TEMPLATE, call(tenant_id="t1/../t2"))


@pytest.mark.parametrize("object_id", ["../t2/a.csv", "2026/../../x", "a//b", "./a", "a/."])
def test_no_id_may_hold_an_empty_dot_or_dot_dot_segment(object_id: str) -> None:
    with pytest.raises(BadKeyError, match="segment"):
        render_key(TEMPLATE, call(object_id=object_id))


def test_params_fill_the_template_and_a_missing_one_is_refused() -> None:
    template = "exports/{tenant_id}/{params.date}/{object_id}"
    assert render_key(template, call(date="2026-11-30")) == "exports/t1/2026-11-30/a.csv"
    with pytest.raises(BadKeyError, match=r"params\.date"):
        render_key(template, call())
    with pytest.raises(BadKeyError):
        render_key(template, call(date={"nested": 1}))


_text = st.text(alphabet=st.sampled_from("ab./%\\~-_ "), min_size=1, max_size=12)


@given(tenant=_text, obj=_text)
def test_a_rendered_key_never_leaves_the_prefix_nor_holds_a_dot_segment(
    tenant: str, obj: str
) -> None:
    # Given any ids, rendered or refused
    try:
        key = render_key(TEMPLATE, call(tenant_id=tenant, object_id=obj))
    except BadKeyError:
        return
    # Then the key keeps the prefix, the tenant is one segment, and nothing can climb
    segments = key.split("/")
    assert key.startswith("exports/")
    assert segments[1] == tenant
    assert not {".", "..", ""} & set(segments)


def test_the_template_must_start_with_a_fixed_prefix_and_name_known_fields() -> None:
    with pytest.raises(ValidationError, match="fixed prefix"):
        config("{tenant_id}/{object_id}")
    with pytest.raises(ValidationError, match="not"):
        config("exports/{bucket}/{object_id}")


def test_the_grants_are_delete_under_the_prefix_and_a_listing_of_it_only() -> None:
    delete, listing = deploy_for(config()).grants()
    assert (delete.actions, delete.resources, delete.conditions) == (
        ("s3:DeleteObject",),
        ("arn:aws:s3:::acme-exports/exports/*",),
        (),
    )
    assert "prefix" in delete.wildcard_reason  # the CDK app states it to cdk-nag
    assert (listing.actions, listing.resources, listing.conditions) == (
        ("s3:ListBucket",),
        ("arn:aws:s3:::acme-exports",),
        (("StringLike", "s3:prefix", ("exports/*",)),),
    )


def test_the_path_is_the_s3_endpoint_and_nothing_through_nat() -> None:
    assert deploy_for(config()).network_path() == NetworkPath(
        aws_services=frozenset({AwsService.S3})
    )


def test_a_policy_without_a_quota_takes_s3s_per_prefix_rate() -> None:
    # Given an s3_delete policy that names no quota
    policy = Policy.model_validate(
        {"name": "exports", "action": {"kind": "s3_delete", **config().model_dump()}}
    )
    # Then its quota is S3's published 3,500 DELETE/s per prefix
    assert (policy.quota.limit, policy.quota.period_seconds) == (
        S3_DELETES_PER_SECOND_PER_PREFIX,
        1.0,
    )
    assert S3_DELETES_PER_SECOND_PER_PREFIX == 3_500
    # And a policy's own quota wins
    own = Policy.model_validate(
        {
            "name": "exports",
            "quota": {"limit": 10, "period_seconds": 1},
            "action": {"kind": "s3_delete", **config().model_dump()},
        }
    )
    assert own.quota.limit == 10


def _error(code: str, status: int, headers: dict[str, str] | None = None) -> ClientError:
    response: Any = {
        "Error": {"Code": code, "Message": "m"},
        "ResponseMetadata": {"HTTPStatusCode": status, "HTTPHeaders": headers or {}},
    }
    return ClientError(response, "DeleteObject")


@pytest.mark.parametrize(
    ("code", "status", "step", "outcome"),
    [
        ("SlowDown", 503, "delete", OutcomeClass.THROTTLED),
        ("503", 503, "list", OutcomeClass.THROTTLED),
        ("AccessDenied", 403, "delete", OutcomeClass.AUTH),
        ("NoSuchBucket", 404, "list", OutcomeClass.AUTH),
        ("NoSuchKey", 404, "delete", OutcomeClass.ABSENT),
        ("InternalError", 500, "list", OutcomeClass.TRANSIENT),
        ("InternalError", 500, "delete", OutcomeClass.UNKNOWN),
        ("InvalidRequest", 400, "delete", OutcomeClass.PERMANENT),
    ],
)
def test_s3_answers_are_classified(code: str, status: int, step: Any, outcome: Any) -> None:
    result = classify_client_error(_error(code, status), step)
    assert result.outcome is outcome
    assert result.code == f"s3_{code}"


def test_a_slow_down_carries_its_retry_after() -> None:
    result = classify_client_error(_error("SlowDown", 503, {"retry-after": "3"}), "delete")
    assert result.retry_after_seconds == 3.0


@pytest.mark.parametrize(("value", "expected"), [("inf", None), ("1e40", None), ("9" * 40, 3600.0)])
def test_a_slow_downs_retry_after_is_read_bounded(value: str, expected: float | None) -> None:
    # Given S3 (or what answers for it) naming an infinite or enormous wait
    result = classify_client_error(_error("SlowDown", 503, {"retry-after": value}), "delete")
    # Then the throttle's wait is none (the scope's own backoff) or at most the bound
    assert result.retry_after_seconds == expected


def test_a_transport_error_is_transient_until_the_delete_may_have_landed() -> None:
    connect = ConnectTimeoutError(endpoint_url="https://s3")
    read = ReadTimeoutError(endpoint_url="https://s3")
    assert classify_transport_error(connect, "delete").outcome is OutcomeClass.TRANSIENT
    assert classify_transport_error(read, "list").outcome is OutcomeClass.TRANSIENT
    assert classify_transport_error(read, "delete").outcome is OutcomeClass.UNKNOWN

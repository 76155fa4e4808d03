"""The URL's authority is the policy's: no template, id or param moves a call to another host.

Issue 40, point 4: a URL template begins with `{api_url}` followed by `/`, `?` or its end, and
its fields fill path segments and query values only; the filled URL's scheme, host and port
are always `api_url`'s, or (the explicit per-tenant form) `<tenant label>.<suffix>`.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from pydantic import ValidationError

from sweeper.actions import url_template
from sweeper.actions.http import HttpAction
from sweeper.config import HttpActionConfig, Policy
from sweeper.models import ActionCall, OutcomeClass

BEGINS = re.escape("url_template must begin with {api_url}")


def job_for(tenant_id: str = "t1", object_id: str = "o1", **params: Any) -> ActionCall:
    return ActionCall(
        key="exports:t1:o1:v1",
        idempotency_key="exports:t1:o1:v1",
        policy="exports",
        policy_version=1,
        tenant_id=tenant_id,
        object_id=object_id,
        scope="exports",
        attempt=0,
        batch_id="b1",
        params=params,
    )


@pytest.mark.parametrize(
    ("template", "problem"),
    [
        # an object id `.evil.example` would have sent the token to api.vendor.example.evil.example
        ("{api_url}{object_id}/x", BEGINS),
        ("{api_url}.{tenant_id}/x", BEGINS),
        ("{api_url}:{params.port}/x", BEGINS),
        ("{api_url}@{object_id}/x", BEGINS),
        # a tenant id would have chosen the host
        ("https://{tenant_id}.vendor.example/x", BEGINS),
        ("http://{tenant_id}/x", BEGINS),
        ("https://api.vendor.example/v1/{object_id}", BEGINS),
        ("//{tenant_id}/x", BEGINS),
        ("{object_id}", BEGINS),
    ],
)
def test_a_template_that_could_move_the_authority_is_refused_when_the_policy_is_read(
    template: str, problem: str
) -> None:
    # Given a template whose fields stand beside or inside the URL's authority
    # When the policy is read, Then it is refused, naming the key
    with pytest.raises(ValidationError, match=problem) as raised:
        Policy.model_validate(
            {
                "name": "exports",
                "action": {"api_url": "https://api.vendor.example", "url_template": template},
            }
        )
    assert "url_template" in str(raised.value.errors()[0]["loc"])


@pytest.mark.parametrize(
    ("template", "problem"),
    [
        ("{api_url}/v1/objects?{object_id}=1", "query key"),
        ("{api_url}/v1/objects?id=1&{params.flag}", "query key"),
        ("{api_url}/v1/objects#{object_id}", "fragment"),
        ("{api_url}/v1/{object_id}#top", "fragment"),
        ("{api_url}/v1/{api_url}", re.escape("{api_url} only at its start")),
        ("{api_url}/v1/{object_id", "brace"),
        ("{api_url}/v1/ {object_id}", "not URL text"),
        ("{api_url}/v1/%zz/{object_id}", "not URL text"),
        ("{api_url}/v1/../admin/{object_id}", "dot segment"),
        ("{api_url}/v1/%2e%2E/{object_id}", "dot segment"),
    ],
)
def test_a_field_outside_a_path_segment_or_a_query_value_is_refused(
    template: str, problem: str
) -> None:
    with pytest.raises(ValidationError, match=problem):
        HttpActionConfig(api_url="https://api.vendor.example", url_template=template)


@pytest.mark.parametrize(
    ("template", "url"),
    [
        ("{api_url}", "https://api.vendor.example/v2"),
        ("{api_url}/x/{object_id}", "https://api.vendor.example/v2/x/o%2F1"),
        ("{api_url}?id={object_id}", "https://api.vendor.example/v2?id=o%2F1"),
        (
            "{api_url}/objects/{tenant_id}-{object_id}.json?force=true&at={params.day}",
            "https://api.vendor.example/v2/objects/t1-o%2F1.json?force=true&at=2026-12-07%26x%3D1",
        ),
    ],
)
def test_fields_fill_path_segments_and_query_values_percent_encoded(
    template: str, url: str
) -> None:
    action = HttpAction(
        HttpActionConfig(api_url="https://api.vendor.example/v2/", url_template=template)
    )
    assert action.checked_url(job_for("t1", "o/1", day="2026-12-07&x=1")) == url


def test_a_plain_http_template_is_refused_although_api_url_is_https() -> None:
    # `http://{tenant_id}/x` was accepted: only api_url was checked for http://
    with pytest.raises(ValidationError, match=BEGINS):
        HttpActionConfig(api_url="https://api.vendor.example", url_template="http://{tenant_id}/x")


@pytest.mark.parametrize(
    ("api_url", "problem"),
    [
        ("https://user:pw@api.vendor.example", "api_url"),
        ("https://api.vendor.example?x=1", "api_url"),
        ("https://api.vendor.example#x", "api_url"),
        ("https://api.vendor.example:99999", "api_url"),
        ("https://{object_id}.vendor.example", re.escape("only {tenant_id}")),
        ("https://{params.shop}.vendor.example", re.escape("only {tenant_id}")),
        ("https://shop-{tenant_id}.vendor.example", "whole first label"),
        ("https://{tenant_id}{tenant_id}.vendor.example", "whole first label"),
        ("https://x.{tenant_id}.vendor.example", "whole first label"),
        ("https://{tenant_id}.com", "at least two labels"),
        ("https://{tenant_id}", "at least two labels"),
        ("https://api.vendor.example/{tenant_id}", "only in its host"),
    ],
)
def test_an_api_url_that_is_not_a_fixed_origin_or_the_per_tenant_form_is_refused(
    api_url: str, problem: str
) -> None:
    with pytest.raises(ValidationError, match=problem):
        HttpActionConfig(api_url=api_url)


def test_the_per_tenant_host_is_https_only_even_with_allow_plain_http() -> None:
    with pytest.raises(ValidationError, match="per-tenant"):
        HttpActionConfig(api_url="http://{tenant_id}.myshopify.com", allow_plain_http=True)


def test_the_per_tenant_form_calls_the_tenants_own_host_under_the_fixed_suffix() -> None:
    # Given a vendor that puts the tenant in the host (Shopify's {shop}.myshopify.com)
    config = HttpActionConfig(
        api_url="https://{tenant_id}.myshopify.com:8443/admin",
        url_template="{api_url}/customers/{object_id}",
    )
    # When a tenant's job is filled, Then its host is its label under the suffix
    url = HttpAction(config).checked_url(job_for("Acme-Shop-2", "c/1"))
    assert url == "https://Acme-Shop-2.myshopify.com:8443/admin/customers/c%2F1"


@pytest.mark.parametrize(
    "tenant_id",
    [
        "evil.example#",
        "evil.example",
        "a.b",
        "-lead",
        "trail-",
        "",
        "x" * 64,
        "a b",
        "shop@evil.example",
        "shop:443",
        "shöp",
        "a/b",
        "%2e",
    ],
)
def test_a_tenant_id_that_is_not_one_dns_label_fails_permanently_and_nothing_is_sent(
    tenant_id: str,
) -> None:
    # Given the per-tenant form (sockets are blocked here: a call would raise)
    action = HttpAction(HttpActionConfig(api_url="https://{tenant_id}.myshopify.com"))
    # When a job whose tenant id is no DNS label is performed
    result = action.perform(job_for(tenant_id, "o1"))
    # Then it fails permanently with its code, before any request
    assert (result.outcome, result.code) == (OutcomeClass.PERMANENT, "bad_host_label")


def test_the_per_tenant_token_url_must_name_its_own_host() -> None:
    # `{api_url}` in token_url would hold `{tenant_id}`: the token endpoint is written out
    with pytest.raises(ValidationError, match="token_url"):
        HttpActionConfig(
            api_url="https://{tenant_id}.myshopify.com",
            auth={
                "type": "oauth2",
                "token_url": "{api_url}/oauth/token",
                "client_id": "c",
                "secret_arn": "arn:aws:secretsmanager:eu-west-1:111122223333:secret:x-AbCdEf",
            },
        )


@pytest.mark.parametrize(
    "object_id",
    [
        "../../admin/users",
        "..",
        ".",
        "%2e%2e",
        "%2E%2e/admin",
        "..%2F..",
        "a/../b",
        "a\\..\\b",
        "%252e%252e",
        "..;/admin",
    ],
)
def test_an_id_with_a_dot_segment_is_refused_permanently_and_nothing_is_sent(
    object_id: str,
) -> None:
    # Given a policy on the default refuse_dot_segments (sockets are blocked: a call would raise)
    config = HttpActionConfig(api_url="https://api.vendor.example")
    assert config.refuse_dot_segments is True
    # When a job whose id climbs once a proxy decodes it is performed
    result = HttpAction(config).perform(job_for("t1", object_id))
    # Then it is refused with its code
    assert (result.outcome, result.code) == (OutcomeClass.PERMANENT, "dot_segment")


def test_a_param_with_a_dot_segment_in_a_path_is_refused_too() -> None:
    config = HttpActionConfig(
        api_url="https://api.vendor.example", url_template="{api_url}/days/{params.day}/x"
    )
    result = HttpAction(config).perform(job_for(day="%2E%2E"))
    assert (result.outcome, result.code) == (OutcomeClass.PERMANENT, "dot_segment")


@pytest.mark.parametrize("object_id", ["a..b", "...", "..x", ".hidden", "v1.2", "%2e%2e%2e"])
def test_ids_with_dots_that_are_not_dot_segments_are_sent(object_id: str) -> None:
    url = HttpAction(HttpActionConfig(api_url="https://a.example")).checked_url(
        job_for("t1", object_id)
    )
    assert url is not None


def test_refuse_dot_segments_off_sends_the_id_as_one_encoded_segment() -> None:
    config = HttpActionConfig(api_url="https://api.vendor.example", refuse_dot_segments=False)
    url = HttpAction(config).checked_url(job_for("t1", "../../admin/users"))
    assert url == "https://api.vendor.example/v1/tenants/t1/objects/..%2F..%2Fadmin%2Fusers"


def test_a_dot_segment_in_a_query_value_is_no_path_and_is_sent() -> None:
    config = HttpActionConfig(
        api_url="https://api.vendor.example", url_template="{api_url}/objects?id={object_id}"
    )
    url = HttpAction(config).checked_url(job_for("t1", "../.."))
    assert url == "https://api.vendor.example/objects?id=..%2F.."


def test_an_authority_not_api_urls_is_refused_at_the_call_even_if_the_load_check_regressed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Given the load-time rule gone (a regression), so a template's field touches the host
    monkeypatch.setattr(url_template, "_check_prefix", lambda template: None)
    config = HttpActionConfig(
        api_url="https://api.vendor.example", url_template="{api_url}{object_id}/x"
    )
    # When an id that extends the host is performed (sockets are blocked: a call would raise)
    result = HttpAction(config).perform(job_for("t1", ".evil.example"))
    # Then the request-time check refuses it
    assert (result.outcome, result.code) == (OutcomeClass.PERMANENT, "url_authority")

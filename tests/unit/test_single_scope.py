"""Which policies keep one limiter scope for every job (their utilization is the policy's)."""

from __future__ import annotations

import pytest

from sweeper.config import HttpActionConfig, Policy, ScopeConfig
from sweeper_tools.planning.scope import single_scope

API = HttpActionConfig(api_url="https://api.example.com:8443")


@pytest.mark.parametrize(
    ("scope", "expected"),
    [
        (ScopeConfig(kind="global"), "exports"),
        (ScopeConfig(kind="credential"), "exports:credential"),
        (ScopeConfig(kind="endpoint"), "api.example.com"),
        (ScopeConfig(kind="global", template="{host}:{policy}"), "api.example.com:exports"),
    ],
)
def test_a_template_over_policy_and_host_is_one_scope(scope: ScopeConfig, expected: str) -> None:
    assert single_scope(Policy(name="exports", scope=scope, action=API)) == expected


@pytest.mark.parametrize(
    "scope",
    [
        ScopeConfig(kind="tenant"),
        ScopeConfig(kind="global", template="{policy}:{object_id}"),
        ScopeConfig(kind="endpoint", template="{host}/{tenant_id}"),
    ],
)
def test_a_template_naming_a_tenant_or_object_has_a_scope_per_job_kind(
    scope: ScopeConfig,
) -> None:
    assert single_scope(Policy(name="exports", scope=scope, action=API)) is None

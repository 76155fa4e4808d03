"""`learn` on a policy's limits: where it may go, and what it refuses beside."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from sweeper.admission.learned import learned_spec, reader_for
from sweeper.config import LimitConfig, Policy

STORE: dict[str, Any] = {
    "name": "store",
    "key": "{tenant_id}",
    "rate": {"limit": 40, "period_seconds": 1},
}
APP: dict[str, Any] = {"name": "app", "key": "app", "rate": {"limit": 100, "period_seconds": 1}}


def _policy(*limits: dict[str, Any]) -> Policy:
    return Policy.model_validate(
        {"name": "listings", "action": {"api_url": "https://api.example.com"}, "limits": limits}
    )


def test_the_scopes_limit_learns_paced_at_most_at_its_told_rate() -> None:
    # Given a first limit that learns from the IETF fields
    policy = _policy({**STORE, "learn": "ratelimit"}, APP)
    # Then the http action reads its answers, and the scope reserves at the rate its item holds,
    # never above the told rate and never raised on its own
    assert reader_for(policy) is not None
    spec = learned_spec(policy)
    assert spec is not None
    assert spec.cap == policy.quota.rate_per_second
    assert spec.increase == 0.0
    assert spec.rate_at(spec.cap * 10, since=0.0, now=100.0) == spec.cap


def test_a_policy_that_learns_nothing_reads_nothing() -> None:
    policy = _policy(STORE, APP)
    assert reader_for(policy) is None
    assert learned_spec(policy) is None


def test_learn_on_a_later_limit_is_refused() -> None:
    with pytest.raises(ValidationError, match="first limit"):
        _policy(STORE, {**APP, "learn": "ratelimit"})


def test_learn_beside_an_adaptive_rate_is_refused() -> None:
    adaptive = {**STORE["rate"], "adaptive": True}
    with pytest.raises(ValidationError, match="learn replaces adaptive"):
        LimitConfig.model_validate({**STORE, "rate": adaptive, "learn": "ratelimit"})

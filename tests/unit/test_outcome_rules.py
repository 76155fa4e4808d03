"""Outcome rules: an answer classed by a header's value or a JSON path, checked when read."""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from sweeper.actions.answer_match import Answer
from sweeper.actions.http import HttpActionConfig
from sweeper.actions.outcome_rules import OutcomeRule, OutcomeRules
from sweeper.models import OutcomeClass
from sweeper.vendor_reading import MAX_WAIT_SECONDS

NOW = 1_800_000_000.0
GITHUB = OutcomeRule.model_validate(
    {
        "status": [403, 429],
        "header": {"name": "x-ratelimit-remaining", "equals": "0"},
        "outcome": "throttled",
        "retry_at_header": "x-ratelimit-reset",
    }
)
STRIPE = [
    OutcomeRule.model_validate(
        {"header": {"name": "Stripe-Should-Retry", "equals": v}, "outcome": o, "code": c}
    )
    for v, o, c in [("false", "permanent", "vendor_no_retry"), ("true", "transient", None)]
]


@given(reset_in=st.floats(-1e6, 1e7, allow_nan=False), status=st.sampled_from([403, 429]))
def test_a_reset_header_is_a_bounded_wait(reset_in: float, status: int) -> None:
    # Given GitHub's exhausted limit, its reset any time before or after now
    answer = Answer.of(
        status, {"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": repr(NOW + reset_in)}
    )
    # When it is classed
    ruled = OutcomeRules([GITHUB]).classify(answer, NOW)
    # Then it is throttled until then, never for less than nothing nor more than the cap
    assert ruled is not None
    assert ruled.outcome is OutcomeClass.THROTTLED
    assert ruled.retry_after_seconds is not None
    assert 0.0 <= ruled.retry_after_seconds <= MAX_WAIT_SECONDS
    assert ruled.retry_after_seconds == pytest.approx(
        min(max(0.0, reset_in), MAX_WAIT_SECONDS), abs=1e-3
    )


@given(remaining=st.text(max_size=4).filter(lambda v: v.strip() != "0"))
def test_a_403_with_requests_left_is_not_ruled(remaining: str) -> None:
    answer = Answer.of(403, {"x-ratelimit-remaining": remaining})
    assert OutcomeRules([GITHUB]).classify(answer, NOW) is None


@given(
    status=st.integers(100, 599),
    headers=st.dictionaries(
        st.sampled_from(["Stripe-Should-Retry", "X-Other", "Retry-After"]),
        st.sampled_from(["true", "false", "0", "x"]),
    ),
)
def test_the_first_rule_that_holds_decides_and_a_2xx_needs_its_status_named(
    status: int, headers: dict[str, str]
) -> None:
    ruled = OutcomeRules(STRIPE).classify(Answer.of(status, headers), NOW)
    says = headers.get("Stripe-Should-Retry")
    if 200 <= status <= 299 or says not in ("true", "false"):
        assert ruled is None
    elif says == "false":
        assert ruled is not None
        assert (ruled.outcome, ruled.code) == (OutcomeClass.PERMANENT, "vendor_no_retry")
    else:
        assert ruled is not None
        assert (ruled.outcome, ruled.code) == (OutcomeClass.TRANSIENT, f"http_{status}")


def test_a_json_path_rule_reads_the_body_only_for_its_statuses() -> None:
    rule = OutcomeRule.model_validate(
        {
            "status": 200,
            "json_path": {"path": "error.code", "equals": "rate_limited"},
            "outcome": "throttled",
        }
    )
    rules = OutcomeRules([rule])
    assert rules.reads_body(200)
    assert not rules.reads_body(404)
    body = json.dumps({"ok": False, "error": {"code": "rate_limited"}}).encode()
    ruled = rules.classify(Answer.of(200, {}, body), NOW)
    assert ruled is not None
    assert ruled.outcome is OutcomeClass.THROTTLED
    assert rules.classify(Answer.of(200, {}, b'{"ok": true}'), NOW) is None


@pytest.mark.parametrize(
    ("rule", "problem"),
    [
        ({"status": 403, "outcome": "throttled"}, "needs header"),
        ({"status": 99, "header": {"name": "x", "equals": "0"}, "outcome": "auth"}, "not HTTP"),
        ({"status": [], "header": {"name": "x", "equals": "0"}, "outcome": "auth"}, "empty"),
        ({"header": {"name": "bad name", "equals": "0"}, "outcome": "auth"}, "pattern"),
        ({"json_path": {"path": "a[*]", "equals": 1}, "outcome": "auth"}, "dotted keys"),
        ({"header": {"name": "x", "equals": "0"}, "outcome": "fine"}, "outcome"),
        ({"header": {"name": "x", "equals": "0"}, "outcome": "auth", "code": "Bad Code"}, "code"),
        (
            {
                "header": {"name": "x", "equals": "0"},
                "outcome": "permanent",
                "retry_at_header": "r",
            },
            "throttled or snooze",
        ),
        ({"header": {"name": "x", "equals": "0", "value": "1"}, "outcome": "auth"}, "extra"),
    ],
)
def test_a_rule_that_cannot_work_is_refused_when_the_policy_is_read(
    rule: dict[str, Any], problem: str
) -> None:
    with pytest.raises(ValidationError, match=problem):
        HttpActionConfig(outcome_rules=[rule])


@pytest.mark.parametrize("section", ["### Bodies: JSON or form", "### Outcome rules"])
def test_the_docs_examples_of_form_bodies_and_rules_are_valid(section: str) -> None:
    text = Path("docs/actions.md").read_text(encoding="utf-8")
    part = text[text.index(section) :].split("\n### ", 2)[0]
    (block,) = re.findall(r"```toml\n(.*?)```", part, flags=re.DOTALL)
    action = HttpActionConfig.model_validate(tomllib.loads(block)["policies"]["action"])
    assert action.outcome_rules or action.body_encoding == "form"

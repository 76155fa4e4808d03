"""`consumer.tracing`: the consumer's X-Ray mode, Lambda's two; the retired sampling rate."""

from __future__ import annotations

import logging

import pytest
from pydantic import ValidationError

from sweeper.config import Policy


def test_the_consumer_passes_traces_through_unless_its_policy_asks_for_active() -> None:
    # Given a policy that says nothing, and one that asks for every consumer trace
    quiet = Policy(name="exports")
    traced = Policy.model_validate({"name": "exports", "consumer": {"tracing": "active"}})
    # Then the first records no consumer trace (Lambda's PassThrough), the second Active
    assert quiet.consumer.tracing == "passthrough"
    assert traced.consumer.tracing == "active"


def test_a_tracing_mode_lambda_does_not_have_is_refused_naming_the_field() -> None:
    with pytest.raises(ValidationError, match=r"consumer\.tracing"):
        Policy.model_validate({"name": "exports", "consumer": {"tracing": "sampled"}})


def test_a_retired_sample_rate_still_loads_and_says_so_in_one_line(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # Given a policy file written for the sampling rule Lambda never read
    with caplog.at_level(logging.WARNING):
        policy = Policy.model_validate({"name": "exports", "trace_sample_rate": 1.0})
    # Then it loads, one warning line names the key and the setting that replaces it ...
    (record,) = [r for r in caplog.records if "trace_sample_rate" in r.getMessage()]
    message = record.getMessage()
    assert record.levelno == logging.WARNING
    assert "\n" not in message
    assert "exports" in message
    assert "consumer.tracing" in message
    # ... and the key goes no further: not in what the functions receive, tracing unchanged
    assert "trace_sample_rate" not in policy.model_dump_json(exclude_unset=True)
    assert policy.consumer.tracing == "passthrough"


def test_a_policy_without_the_retired_key_warns_nothing(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        Policy.model_validate({"name": "exports", "consumer": {"tracing": "active"}})
    assert not [r for r in caplog.records if "trace_sample_rate" in r.getMessage()]

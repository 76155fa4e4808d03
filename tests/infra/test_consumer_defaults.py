"""Synth sizes a consumer the policy leaves to the plan: its derived parallel calls, batch,
window and timeout are what the functions, the event source and the queue get."""

from __future__ import annotations

from typing import Any

from sweeper.config import Policy
from sweeper_tools.planning.consumer_defaults import derived_consumer
from sweeper_tools.policy_file import load_config
from tests.infra.conftest import FIXTURES, Synth


def _deployed(synth: Synth, policy: Policy) -> tuple[dict[str, Any], dict[str, Any], Policy]:
    prefix = f"Pipeline{policy.name.replace('-', '')}"
    function = synth.function(f"^{prefix}ConsumerFunction[0-9A-F]{{8}}$")["Properties"]
    mapping = synth.resource(f"^{prefix}Consumer", "AWS::Lambda::EventSourceMapping")
    shipped = Policy.model_validate_json(function["Environment"]["Variables"]["SWEEPER_POLICY"])
    return function, mapping["Properties"], shipped


def test_a_policy_without_its_consumer_sizing_synthesizes_the_derived_one(proxied: Synth) -> None:
    # Given exports as its file gives it: the vendor's latency, one call at a time, and no
    # batch, window or timeout
    written = load_config(FIXTURES / "two_policies.toml").policy("exports")
    assert not {"batch_size", "batch_window_seconds", "timeout_seconds"} & (
        written.consumer.model_fields_set
    )
    derived = derived_consumer(written)
    function, mapping, shipped = _deployed(proxied, written)
    # Then the function, its event source and its environment carry the derived figures
    assert function["Timeout"] == derived.timeout_seconds < written.consumer.timeout_seconds
    assert mapping["BatchSize"] == derived.batch_size
    assert mapping["MaximumBatchingWindowInSeconds"] == derived.batch_window_seconds
    assert shipped.consumer == derived
    # and the queue hides a killed environment's batch for six of its timeouts, not the default's
    queue = proxied.resource(r"^PipelineexportsWorkQueue[0-9A-F]{8}$", "AWS::SQS::Queue")
    assert queue["Properties"]["VisibilityTimeout"] == derived.visibility_timeout_seconds


def test_a_policy_that_sets_its_consumer_sizing_keeps_its_own(proxied: Synth) -> None:
    # Given stale-sessions, which sets its batch, window and timeout (not its parallel calls)
    written = load_config(FIXTURES / "two_policies.toml").policy("stale-sessions")
    function, mapping, shipped = _deployed(proxied, written)
    # Then those are its own
    assert function["Timeout"] == written.consumer.timeout_seconds == 120
    assert mapping["BatchSize"] == written.consumer.batch_size == 5
    assert mapping["MaximumBatchingWindowInSeconds"] == 20
    # and only its parallel calls are derived (10/s at 0.2 s needs no more than one at a time)
    assert shipped.consumer.parallel_calls == derived_consumer(written).parallel_calls == 1

"""The redrive's schedule follows `[policies.redrive] automatic`, and a queue that dead-letters
below AWS's advised five receives is read by an event source that never outruns its function."""

from __future__ import annotations

from typing import Any

from sweeper.config.consumer import AWS_ADVISED_MIN_RECEIVES
from tests.infra.conftest import Synth


def _redrive_schedules(synth: Synth) -> dict[str, str]:
    """Each policy's redrive schedule expression, by the policy's name."""
    found = {}
    for policy in synth.config.policies:
        prefix = f"^Redrive{policy.name.replace('-', '')}Schedule[0-9A-F]{{8}}$"
        schedule = synth.resource(prefix, "AWS::Scheduler::Schedule")
        found[policy.name] = schedule["Properties"]["ScheduleExpression"]
    return found


def test_the_throttled_option_runs_the_redrive_every_minute_and_todays_every_15(
    proxied: Synth,
) -> None:
    # Given two policies, stale-sessions with automatic = "throttled", exports without
    # Then the one's redrive runs every minute (Scheduler's finest rate), the other's as today
    assert _redrive_schedules(proxied) == {
        "exports": "rate(15 minutes)",
        "stale-sessions": "rate(1 minute)",
    }


def _by_function(synth: Synth, resource_type: str) -> dict[str, dict[str, Any]]:
    return {
        logical_id: resource["Properties"]
        for logical_id, resource in synth.resources(resource_type).items()
    }


def test_fewer_than_five_receives_only_where_the_poller_cannot_outrun_the_function(
    proxied: Synth,
) -> None:
    # Given every work queue's redrive policy and every SQS event source of the deployment
    functions = _by_function(proxied, "AWS::Lambda::Function")
    checked = []
    for mapping in _by_function(proxied, "AWS::Lambda::EventSourceMapping").values():
        (queue_id, _) = mapping["EventSourceArn"]["Fn::GetAtt"]
        queue = proxied.template_json["Resources"][queue_id]["Properties"]
        receives = queue.get("RedrivePolicy", {}).get("maxReceiveCount")
        if receives is None or receives >= AWS_ADVISED_MIN_RECEIVES:
            continue
        function = functions[mapping["FunctionName"]["Ref"]]
        # Then its event source's maximum is at most the function's reserved concurrency
        maximum = mapping["ScalingConfig"]["MaximumConcurrency"]
        assert maximum <= function["ReservedConcurrentExecutions"]
        checked.append(receives)
    assert checked == [2]  # stale-sessions' work queue: the case is there to check

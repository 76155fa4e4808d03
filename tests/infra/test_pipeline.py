"""Per policy: work queue + DLQ, producer on a schedule, consumer with capped concurrency."""

from __future__ import annotations

import json
from typing import Any

import pytest
from aws_cdk.assertions import Annotations, Match
from aws_lambda_powertools.utilities.parser.models import EventBridgeModel

from infra.pipeline import producer_timeout_seconds
from infra.policy_stack import POLICY_TAG_KEY
from infra.queues import DEAD_LETTER_RETENTION_DAYS, WORK_QUEUE_RETENTION_DAYS
from infra.stack import pascal_case
from infra.tracing import TRACING_MODES
from sweeper.config import Policy
from tests.infra.conftest import Synth

DAY_SECONDS = 86_400
#: What EventBridge Scheduler substitutes for its context attributes, and for the pseudo
#: parameters CloudFormation resolves.
SCHEDULER_VALUES = {
    "<aws.scheduler.execution-id>": "d32c5kddcf5bb8c3",
    "<aws.scheduler.scheduled-time>": "2026-11-29T02:00:00Z",
    "<aws.scheduler.schedule-arn>": "arn:aws:scheduler:eu-west-1:111122223333:schedule/default/x",
    "<aws.scheduler.attempt-number>": "1",
}
PSEUDO_PARAMETERS = {
    "AWS::AccountId": "111122223333",
    "AWS::Region": "eu-west-1",
    "AWS::Partition": "aws",
}


def _policy_prefix(policy: Policy) -> str:
    return f"Pipeline{policy.name.replace('-', '')}"


def _queue(synth: Synth, policy: Policy, name: str) -> dict[str, Any]:
    props: dict[str, Any] = synth.resource(
        f"^{_policy_prefix(policy)}{name}[0-9A-F]{{8}}$", "AWS::SQS::Queue"
    )["Properties"]
    return props


def _render(value: Any) -> str:
    """A Fn::Join of literals and pseudo-parameter Refs, as CloudFormation would resolve it."""
    if isinstance(value, str):
        return value
    if "Ref" in value:
        return PSEUDO_PARAMETERS[value["Ref"]]
    separator, parts = value["Fn::Join"]
    return str(separator).join(_render(part) for part in parts)


def test_work_queue_is_encrypted_standard_and_dead_letters_after_max_receives(
    proxied: Synth,
) -> None:
    for policy in proxied.config.policies:
        queue = _queue(proxied, policy, "WorkQueue")
        assert queue["SqsManagedSseEnabled"] is True
        # A standard queue: MessageGroupId (the tenant) makes it a fair queue, not a FIFO.
        assert "FifoQueue" not in queue
        assert queue["MessageRetentionPeriod"] == WORK_QUEUE_RETENTION_DAYS * DAY_SECONDS
        assert queue["RedrivePolicy"]["maxReceiveCount"] == policy.consumer.max_receive_count
        assert queue["RedriveAllowPolicy"] == {"redrivePermission": "denyAll"}


def test_visibility_timeout_covers_six_function_timeouts_plus_the_window(proxied: Synth) -> None:
    for policy in proxied.config.policies:
        consumer = policy.consumer
        visibility = _queue(proxied, policy, "WorkQueue")["VisibilityTimeout"]
        assert visibility == consumer.visibility_timeout_seconds
        assert visibility >= 6 * consumer.timeout_seconds + consumer.batch_window_seconds


def test_dlq_outlives_the_work_queue_and_admits_only_it(proxied: Synth) -> None:
    for policy in proxied.config.policies:
        dlq = _queue(proxied, policy, "DeadLetterQueue")
        work = _queue(proxied, policy, "WorkQueue")
        assert dlq["SqsManagedSseEnabled"] is True
        assert dlq["MessageRetentionPeriod"] == DEAD_LETTER_RETENTION_DAYS * DAY_SECONDS
        assert dlq["MessageRetentionPeriod"] > work["MessageRetentionPeriod"]
        assert dlq["RedriveAllowPolicy"]["redrivePermission"] == "byQueue"
        (source,) = dlq["RedriveAllowPolicy"]["sourceQueueArns"]
        assert _render(source).endswith(f":{work['QueueName']}")


def test_consumer_concurrency_is_capped_twice(proxied: Synth) -> None:
    for policy in proxied.config.policies:
        prefix = _policy_prefix(policy)
        function = proxied.function(f"^{prefix}ConsumerFunction[0-9A-F]{{8}}$")["Properties"]
        mapping = proxied.resource(f"^{prefix}Consumer", "AWS::Lambda::EventSourceMapping")
        props = mapping["Properties"]
        reserved = function["ReservedConcurrentExecutions"]
        assert reserved == policy.consumer.reserved_concurrency
        assert props["ScalingConfig"]["MaximumConcurrency"] == policy.consumer.max_concurrency
        assert props["ScalingConfig"]["MaximumConcurrency"] <= reserved


def test_consumer_reports_partial_batch_failures_with_the_configured_batching(
    proxied: Synth,
) -> None:
    for policy in proxied.config.policies:
        prefix = _policy_prefix(policy)
        props = proxied.resource(f"^{prefix}Consumer", "AWS::Lambda::EventSourceMapping")[
            "Properties"
        ]
        assert props["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
        assert props["BatchSize"] == policy.consumer.batch_size
        assert props["MaximumBatchingWindowInSeconds"] == policy.consumer.batch_window_seconds
        queue_id = proxied.logical_id(f"Pipeline-{policy.name}/WorkQueue/Resource")
        assert props["EventSourceArn"] == {"Fn::GetAtt": [queue_id, "Arn"]}


def test_function_timeouts_and_consumer_memory_follow_the_policy(proxied: Synth) -> None:
    # exports states its vendor's latency and sets no memory: synth derives the least whose CPU
    # carries its rate (planning.consumer_defaults); stale-sessions sets 1024 MB
    assert [p.consumer.memory_mb for p in proxied.config.policies] == [320, 1024]
    for policy in proxied.config.policies:
        prefix = _policy_prefix(policy)
        consumer = proxied.function(f"^{prefix}ConsumerFunction[0-9A-F]{{8}}$")["Properties"]
        producer = proxied.function(f"^{prefix}ProducerFunction[0-9A-F]{{8}}$")["Properties"]
        assert consumer["Timeout"] == policy.consumer.timeout_seconds
        assert consumer["MemorySize"] == policy.consumer.memory_mb
        assert producer["Timeout"] == producer_timeout_seconds(policy)
        assert producer["Timeout"] > policy.producer_budget_seconds


def test_every_function_runs_python313_on_arm64_with_both_layers(every_variant: Synth) -> None:
    layers = {
        every_variant.logical_id("Packaging/DepsLayer/Resource"),
        every_variant.logical_id("Packaging/SharedLayer/Resource"),
    }
    functions = every_variant.python_functions()
    policies = every_variant.config.policies
    discovering = sum(1 for policy in policies if policy.discovery is not None)
    pruning = sum(1 for policy in policies if policy.retention.enabled)
    webhooks = sum(1 for policy in policies if policy.intake.webhook)
    # migrate + per policy: producer, consumer, redrive, intake; and the webhook, discovery and
    # the scheduled prune where a policy has them
    # the migrations, the operator API's two, and per policy its own
    assert len(functions) == 1 + 2 + 4 * len(policies) + webhooks + discovering + pruning
    # Every function traced, but the consumers: those as their policy says (consumer.tracing)
    consumers = {
        every_variant.logical_id(f"Pipeline-{p.name}/Consumer/Function/Resource"): p
        for p in policies
    }
    for logical_id, function in functions.items():
        props = function["Properties"]
        policy = consumers.get(logical_id)
        mode = "Active" if policy is None else TRACING_MODES[policy.consumer.tracing]
        assert props["TracingConfig"] == {"Mode": mode}
        assert props["Runtime"] == "python3.13"
        assert props["Architectures"] == ["arm64"]
        assert props["Handler"] == "app.handler"
        # and the operator functions the policy file's layer besides (test_operator_api.py)
        config = {every_variant.logical_id("OperatorApi/ConfigLayer/Resource")}
        extra = config if props["Environment"]["Variables"].get("SWEEPER_CONFIG_FILE") else set()
        assert {ref["Ref"] for ref in props["Layers"]} == layers | extra


def test_policy_reaches_each_function_as_the_validated_json(proxied: Synth) -> None:
    for policy in proxied.config.policies:
        prefix = _policy_prefix(policy)
        for name in ("Producer", "Consumer"):
            variables = proxied.environment(f"^{prefix}{name}Function[0-9A-F]{{8}}$")
            assert Policy.model_validate_json(variables["SWEEPER_POLICY"]) == policy
            assert variables["POWERTOOLS_SERVICE_NAME"] == "sweeper"
            assert variables["POWERTOOLS_METRICS_NAMESPACE"] == "Sweeper"
        queue_id = proxied.logical_id(f"Pipeline-{policy.name}/WorkQueue/Resource")
        for name in ("Producer", "Consumer"):  # the consumer extends visibility of held messages
            variables = proxied.environment(f"^{prefix}{name}Function[0-9A-F]{{8}}$")
            assert variables["SWEEPER_QUEUE_URL"] == {"Ref": queue_id}


def test_schedule_runs_in_the_policy_time_zone_without_flexible_window(proxied: Synth) -> None:
    for policy in proxied.config.policies:
        props = proxied.resource(
            f"^{_policy_prefix(policy)}ProducerSchedule[0-9A-F]{{8}}$", "AWS::Scheduler::Schedule"
        )["Properties"]
        assert props["ScheduleExpression"] == policy.schedule
        assert props["ScheduleExpressionTimezone"] == policy.timezone
        assert props["FlexibleTimeWindow"] == {"Mode": "OFF"}
        target = props["Target"]
        assert target["RetryPolicy"]["MaximumRetryAttempts"] > 0
        dlq_id = proxied.logical_id(
            f"Pipeline-{policy.name}/ProducerSchedule/DeadLetterQueue/Resource"
        )
        assert target["DeadLetterConfig"] == {"Arn": {"Fn::GetAtt": [dlq_id, "Arn"]}}


@pytest.mark.parametrize("component", ["ProducerSchedule", "Redrive"])
def test_scheduled_input_parses_as_an_eventbridge_event(default: Synth, component: str) -> None:
    (policy,) = default.config.policies
    prefix = {
        "ProducerSchedule": f"{_policy_prefix(policy)}ProducerSchedule",
        "Redrive": f"Redrive{policy.name}Schedule",
    }[component]
    props = default.resource(f"^{prefix}[0-9A-F]{{8}}$", "AWS::Scheduler::Schedule")["Properties"]
    rendered = _render(props["Target"]["Input"])
    for placeholder, value in SCHEDULER_VALUES.items():
        rendered = rendered.replace(placeholder, value)

    event = EventBridgeModel.model_validate(json.loads(rendered))

    assert event.source == "aws.scheduler"
    assert event.detail_type == "Scheduled Event"
    assert event.account == PSEUDO_PARAMETERS["AWS::AccountId"]
    assert event.detail == {"policy": policy.name, "attempt": "1"}


def test_failed_async_runs_land_in_the_schedule_dlq(default: Synth) -> None:
    (policy,) = default.config.policies
    config = default.resource(
        f"^{_policy_prefix(policy)}Producer", "AWS::Lambda::EventInvokeConfig"
    )["Properties"]
    dlq_id = default.logical_id(f"Pipeline-{policy.name}/ProducerSchedule/DeadLetterQueue/Resource")
    destination = config["DestinationConfig"]["OnFailure"]["Destination"]
    assert destination == {"Fn::GetAtt": [dlq_id, "Arn"]}


def test_redrive_runs_per_policy_on_its_own_schedule(proxied: Synth) -> None:
    for policy in proxied.config.policies:
        prefix = f"Redrive{policy.name.replace('-', '')}"
        variables = proxied.environment(f"^{prefix}Function[0-9A-F]{{8}}$")
        assert Policy.model_validate_json(variables["SWEEPER_POLICY"]) == policy
        dlq_id = proxied.logical_id(f"Pipeline-{policy.name}/DeadLetterQueue/Resource")
        assert variables["SWEEPER_DLQ_URL"] == {"Ref": dlq_id}
        queue_id = proxied.logical_id(f"Pipeline-{policy.name}/WorkQueue/Resource")
        assert variables["SWEEPER_QUEUE_URL"] == {"Ref": queue_id}
        limiter_id = proxied.logical_id("Tables/Limiter/Resource")
        assert variables["SWEEPER_LIMITER_TABLE"] == {"Ref": limiter_id}
        schedule = proxied.resource(f"^{prefix}Schedule[0-9A-F]{{8}}$", "AWS::Scheduler::Schedule")
        assert schedule["Properties"]["ScheduleExpressionTimezone"] == policy.timezone


def test_no_schedule_fires_before_the_migrations(default: Synth) -> None:
    migrations_id = default.logical_id("Migrations/Apply/Default")
    for schedule in default.resources("AWS::Scheduler::Schedule").values():
        assert migrations_id in schedule["DependsOn"]


def test_every_tagged_resource_of_a_policy_carries_the_policy_tag(proxied: Synth) -> None:
    # Given two policies, each with its pipeline, redrive, intake, discovery and prune
    constructs = ("Pipeline", "Redrive", "Intake", "Discovery", "Retention")
    tagged: dict[tuple[str, str], int] = {}
    for resource in proxied.template_json["Resources"].values():
        path = str(resource.get("Metadata", {}).get("aws:cdk:path", ""))
        parts = path.split("/")
        if len(parts) > 2 and parts[1].startswith("Policy-"):
            parts = parts[1:]  # in the policy's nested stack
        top = parts[1] if len(parts) > 2 else ""
        kind, _, policy = top.partition("-")
        tags = resource["Properties"].get("Tags")
        if kind not in constructs or not isinstance(tags, list):
            continue
        # Then each of their taggable resources names its policy
        assert {"Key": POLICY_TAG_KEY, "Value": policy} in tags, path
        tagged[(kind, policy)] = tagged.get((kind, policy), 0) + 1
    names = [policy.name for policy in proxied.config.policies]
    assert sorted(tagged) == sorted((kind, name) for kind in constructs for name in names)


def test_outputs_have_stable_logical_ids(proxied: Synth) -> None:
    outputs = proxied.template_json["Outputs"]
    for policy in proxied.config.policies:
        prefix = pascal_case(policy.name)
        for suffix in (
            "QueueUrl",
            "DeadLetterQueueUrl",
            "ProducerFunctionName",
            "ConsumerFunctionName",
        ):
            assert f"{prefix}{suffix}" in outputs
    for name in (
        "IdempotencyTableName",
        "LimiterTableName",
        "DatabaseSecretArn",
        "DatabaseEndpoint",
        "DatabaseProxyEndpoint",
        "AlarmTopicArn",
        "DashboardName",
    ):
        assert name in outputs


def test_pascal_case_turns_policy_names_into_logical_id_parts() -> None:
    assert pascal_case("stale-sessions") == "StaleSessions"
    assert pascal_case("exports") == "Exports"


def test_synth_warns_when_a_policys_measured_vendor_is_too_slow_for_its_quota(
    proxied: Synth,
) -> None:
    # exports: 4 environments against a 0.4 s vendor; stale-sessions: 8 against 0.2 s, 10/s.
    # exports states no quota, so the default it runs below is an advisory, not a claim missed
    # (sweeper plan exits 0 for it); synth still says it.
    warnings = [
        str(entry.entry.data)
        for entry in Annotations.from_stack(proxied.stack).find_warning(
            "*", Match.string_like_regexp("cannot reach its quota|runs below the default quota")
        )
    ]
    assert len(warnings) == 1
    assert "policy exports runs below the default quota" in warnings[0]

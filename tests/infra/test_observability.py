"""Alarms: what an operator must act on, each notifying the topic; a dashboard."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from infra.observability import backlog_threshold, policy_dashboard_name
from sweeper.models import OutcomeClass
from sweeper.observability import METRICS_NAMESPACE, NOT_SUMMED, Metric
from tests.infra.conftest import Synth
from tests.infra.signals import dashboard_body, dashboard_signals, dashboard_widgets
from tests.infra.test_retention import PRUNE_ALARMS

ALARMS = (
    "QueueAge",
    "QueueBacklog",
    "DeadLetters",
    "ConsumerThrottles",
    "ConsumerErrors",
    "ProducerErrors",
    "ProducerScheduleDeadLetters",
    "OldestEligibleAge",
    "TerminalFailures",
    "SnoozeExhausted",
    "AuthCircuitOpen",
    "MismatchedMessages",
    "RedriveErrors",
    "RedriveScheduleDeadLetters",
    "ClaimsStalled",
    "CompletionsStalled",
    "LeaseExpiries",
    "VendorFailureRate",
    "PublishFailures",
)
#: Only for a policy whose jobs share one limiter scope; only for a cluster the stack creates.
SINGLE_SCOPE_ALARMS = ("LimiterSaturated",)
LEDGER_ALARMS = ("DatabaseCapacityAtMax", "SecretRotationErrors")
#: Per policy with its webhook on (infra/intake.py): under Observability/Intake-<policy>.
INTAKE_ALARMS = ("IntakeDeadLetters", "IntakeAge", "IntakeErrors", "WebhookErrors")


def _alarm(synth: Synth, policy: str, name: str) -> dict[str, Any]:
    props: dict[str, Any] = synth.resource(
        f"^ObservabilityPolicy{policy.replace('-', '')}{name}[0-9A-F]{{8}}$",
        "AWS::CloudWatch::Alarm",
    )["Properties"]
    return props


#: DiscoveryErrors, DiscoveryScheduleDeadLetters, DiscoveryLag.
DISCOVERY_ALARMS = 3


def test_every_policy_has_every_alarm_and_each_notifies_on_alarm_and_ok(proxied: Synth) -> None:
    topic = proxied.logical_id("Observability/AlarmTopic/Resource")
    for policy in proxied.config.policies:
        for name in ALARMS + SINGLE_SCOPE_ALARMS:  # both policies have one scope (global)
            alarm = _alarm(proxied, policy.name, name)
            assert alarm["AlarmActions"] == [{"Ref": topic}]
            assert alarm["OKActions"] == [{"Ref": topic}]
            assert alarm["AlarmName"] == f"Sweeper-{policy.name}-{name}"
            assert alarm["AlarmDescription"].endswith(f"(runbook: {name})")
        for name in INTAKE_ALARMS:
            intake: dict[str, Any] = proxied.resource(
                f"^ObservabilityIntake{policy.name.replace('-', '')}{name}[0-9A-F]{{8}}$",
                "AWS::CloudWatch::Alarm",
            )["Properties"]
            assert intake["AlarmActions"] == [{"Ref": topic}]
            assert intake["OKActions"] == [{"Ref": topic}]
            assert intake["AlarmName"] == f"Sweeper-{policy.name}-{name}"
    for name in LEDGER_ALARMS:
        alarm = _ledger_alarm(proxied, name)
        assert alarm["AlarmActions"] == [{"Ref": topic}]
        assert alarm["OKActions"] == [{"Ref": topic}]
        assert alarm["AlarmName"] == f"Sweeper-{name}"
    # and the scheduled prune's own (tests/infra/test_retention.py), and discovery's of each
    # policy with discovery (tests/infra/test_discovery.py)
    discovering = sum(1 for policy in proxied.config.policies if policy.discovery is not None)
    proxied.template.resource_count_is(
        "AWS::CloudWatch::Alarm",
        len(ALARMS + SINGLE_SCOPE_ALARMS + PRUNE_ALARMS) * len(proxied.config.policies)
        + len(LEDGER_ALARMS)
        + DISCOVERY_ALARMS * discovering
        + len(INTAKE_ALARMS) * len(proxied.config.policies),
    )


def _ledger_alarm(synth: Synth, name: str) -> dict[str, Any]:
    props: dict[str, Any] = synth.resource(
        f"^ObservabilityLedger{name}[0-9A-F]{{8}}$", "AWS::CloudWatch::Alarm"
    )["Properties"]
    return props


def test_a_policy_with_a_scope_per_tenant_has_no_saturation_alarm(default: Synth) -> None:
    # sweeper.toml's policy limits each tenant on its own: its figure sums every tenant's slots
    (policy,) = default.config.policies
    assert policy.scope.kind == "tenant"
    names = {
        r["Properties"]["AlarmName"] for r in default.resources("AWS::CloudWatch::Alarm").values()
    }
    assert f"Sweeper-{policy.name}-LimiterSaturated" not in names
    assert f"Sweeper-{policy.name}-VendorFailureRate" in names


def test_an_imported_cluster_has_no_ledger_alarms(imported: Synth) -> None:
    names = {
        r["Properties"]["AlarmName"] for r in imported.resources("AWS::CloudWatch::Alarm").values()
    }
    assert not {f"Sweeper-{name}" for name in LEDGER_ALARMS} & names


def test_queue_alarms_use_the_policy_thresholds(proxied: Synth) -> None:
    for policy in proxied.config.policies:
        age = _alarm(proxied, policy.name, "QueueAge")
        assert age["MetricName"] == "ApproximateAgeOfOldestMessage"
        assert age["Threshold"] == policy.alarms.queue_age_seconds
        backlog = _alarm(proxied, policy.name, "QueueBacklog")
        assert backlog["MetricName"] == "ApproximateNumberOfMessagesVisible"
        expected = backlog_threshold(policy.quota.rate_per_second, policy.alarms.queue_age_seconds)
        assert backlog["Threshold"] == expected


def test_any_dead_letter_or_throttle_alarms(default: Synth) -> None:
    for name, metric in (
        ("DeadLetters", "ApproximateNumberOfMessagesVisible"),
        ("ProducerScheduleDeadLetters", "ApproximateNumberOfMessagesVisible"),
        ("ConsumerThrottles", "Throttles"),
        ("ConsumerErrors", "Errors"),
        ("ProducerErrors", "Errors"),
    ):
        alarm = _alarm(default, "exports", name)
        assert alarm["MetricName"] == metric
        assert alarm["Threshold"] == 0
        assert alarm["ComparisonOperator"] == "GreaterThanThreshold"


def test_application_metrics_are_read_from_the_sweeper_namespace(proxied: Synth) -> None:
    for policy in proxied.config.policies:
        for name, metric, threshold in (
            (
                "OldestEligibleAge",
                "OldestEligibleAgeSeconds",
                policy.alarms.oldest_eligible_age_seconds,
            ),
            ("TerminalFailures", "TerminalFailures", policy.alarms.terminal_failures),
            ("SnoozeExhausted", "SnoozeExhausted", 1),
            ("AuthCircuitOpen", "AuthCircuitOpen", 1),
            ("MismatchedMessages", "MismatchedMessages", 1),
        ):
            alarm = _alarm(proxied, policy.name, name)
            assert alarm["Namespace"] == "Sweeper"
            assert alarm["MetricName"] == metric
            assert alarm["Threshold"] == threshold
            assert sorted(alarm["Dimensions"], key=lambda d: d["Name"]) == [
                {"Name": "policy", "Value": policy.name},
                {"Name": "service", "Value": "sweeper"},
            ]


def test_alarm_topic_mails_the_operator_when_asked(proxied: Synth, default: Synth) -> None:
    proxied.template.has_resource_properties(
        "AWS::SNS::Subscription", {"Protocol": "email", "Endpoint": "ops@example.com"}
    )
    default.template.resource_count_is("AWS::SNS::Subscription", 0)


def test_each_policy_has_a_dashboard_with_the_ledgers_row_and_the_stack_none(
    proxied: Synth,
) -> None:
    # Each policy on a dashboard of its own (CloudWatch draws 500 widgets a dashboard at most),
    # which also draws the ledger it shares; no dashboard of the stack's own ($3 a month each)
    by_name = {
        d["Properties"]["DashboardName"]: dashboard_body(d)
        for d in proxied.resources("AWS::CloudWatch::Dashboard").values()
    }
    stack = proxied.stack.stack_name
    assert sorted(by_name) == sorted(
        policy_dashboard_name(stack, policy.name) for policy in proxied.config.policies
    )
    for policy in proxied.config.policies:
        body = by_name[policy_dashboard_name(stack, policy.name)]
        assert f"## {policy.name}" in body
        assert "## Ledger" in body
        assert "ServerlessDatabaseCapacity" in body
    first = policy_dashboard_name(stack, proxied.config.policies[0].name)
    assert proxied.root_json["Outputs"]["DashboardName"]["Value"] == first


@given(
    rate=st.floats(min_value=0.001, max_value=10_000, allow_nan=False),
    age=st.integers(min_value=1, max_value=86_400),
)
def test_backlog_threshold_is_what_the_quota_drains_within_the_age_threshold(
    rate: float, age: int
) -> None:
    threshold = backlog_threshold(rate, age)
    assert threshold >= 1
    assert threshold >= rate * age  # below it, the age alarm would not follow
    assert threshold == 1 or threshold < rate * age + 1  # the smallest such whole number


# -- the stall and rate alarms: metric math, evaluated one period at a time ------------------------


def _expression(alarm: dict[str, Any]) -> tuple[str, dict[str, str], dict[str, str]]:
    """The alarm's returned expression, per query id the metric name that id reads, and the
    expressions it reads by id (an expression over other expressions)."""
    expression = ""
    reads: dict[str, str] = {}
    inner: dict[str, str] = {}
    for query in alarm["Metrics"]:
        if "Expression" in query and query.get("ReturnData", True):
            expression = query["Expression"]
        elif "Expression" in query:
            inner[query["Id"]] = query["Expression"]
        elif "MetricStat" in query:
            reads[query["Id"]] = query["MetricStat"]["Metric"]["MetricName"]
    assert expression, "no returned expression"
    return expression, reads, inner


def evaluate(alarm: dict[str, Any], period: Mapping[str, float | None]) -> float | None:
    """One period of the alarm's expression, given each metric's datapoint (None: none emitted).

    Covers the subset of CloudWatch metric math the alarms use (IF, FILL, AND, OR, comparisons,
    arithmetic, an expression over others); a division by zero yields no datapoint, which the
    alarms treat as not breaching.
    """
    expression, reads, inner = _expression(alarm)
    values: dict[str, float | None] = {
        query_id: period.get(metric) for query_id, metric in reads.items()
    }
    for query_id, text in inner.items():  # CDK lists an expression's inputs as its own queries
        values[query_id] = _eval(text, values)
        if values[query_id] is None:
            return None  # an input with no datapoint: none for the expression over it either
    return _eval(expression, values)


def _eval(expression: str, values: Mapping[str, float | None]) -> float | None:
    python = re.sub(r"\bOR\b", "or", re.sub(r"\bAND\b", "and", expression))
    functions = {
        "IF": lambda condition, then, otherwise: then if condition else otherwise,
        "FILL": lambda value, fill: fill if value is None else value,
    }
    try:
        return float(eval(python, {"__builtins__": {}}, {**functions, **values}))
    except ZeroDivisionError:
        return None


def _breaches(alarm: dict[str, Any], value: float | None) -> bool:
    assert alarm["ComparisonOperator"] == "GreaterThanOrEqualToThreshold"
    return value is not None and value >= alarm["Threshold"]


def test_claims_stalled_fires_only_when_a_run_saw_due_work_and_claimed_none(
    proxied: Synth,
) -> None:
    alarm = _alarm(proxied, "exports", "ClaimsStalled")
    age, claims = "OldestEligibleAgeSeconds", "Discovered"
    # due work, nothing claimed (in-flight cap, budget): fires
    assert _breaches(alarm, evaluate(alarm, {age: 0.0, claims: 0}))
    assert _breaches(alarm, evaluate(alarm, {age: 4000.0, claims: None}))
    # due work claimed: quiet
    assert not _breaches(alarm, evaluate(alarm, {age: 4000.0, claims: 1000}))
    # an idle policy (no due rows: no age reported), a paused one (no run metrics): quiet
    assert not _breaches(alarm, evaluate(alarm, {age: None, claims: 0}))
    assert not _breaches(alarm, evaluate(alarm, {age: None, claims: None}))
    assert alarm["EvaluationPeriods"] == 1


def test_completions_stalled_fires_when_consumers_run_and_nothing_settles(
    proxied: Synth,
) -> None:
    alarm = _alarm(proxied, "exports", "CompletionsStalled")
    waiting = {"ApproximateNumberOfMessagesVisible": 40, "Invocations": 12}
    # messages wait, consumers run, nothing settles: fires (three periods running)
    assert _breaches(alarm, evaluate(alarm, {**waiting, "Succeeded": 0, "TerminalFailures": None}))
    assert (alarm["EvaluationPeriods"], alarm["DatapointsToAlarm"]) == (3, 3)
    # settling, successfully or terminally: quiet
    assert not _breaches(alarm, evaluate(alarm, {**waiting, "Succeeded": 30}))
    assert not _breaches(alarm, evaluate(alarm, {**waiting, "TerminalFailures": 2}))
    # idle (no messages), paused (event source off: no invocations): quiet
    idle = {"ApproximateNumberOfMessagesVisible": 0, "Invocations": 0}
    assert not _breaches(alarm, evaluate(alarm, idle))
    paused = {"ApproximateNumberOfMessagesVisible": 40, "Invocations": None}
    assert not _breaches(alarm, evaluate(alarm, paused))


def _calls(**by_outcome: int) -> dict[str, float | None]:
    return {f"Attempts_{outcome}": float(n) for outcome, n in by_outcome.items()}


def test_one_alarm_fires_on_either_outcome_rate_as_a_share_of_all_calls(proxied: Synth) -> None:
    for policy in proxied.config.policies:
        alarm = _alarm(proxied, policy.name, "VendorFailureRate")
        assert alarm["EvaluationPeriods"] == 2
        # it reads each outcome class's count once: eight billed alarm metrics, not sixteen
        reads = [q for q in alarm["Metrics"] if "MetricStat" in q]
        assert len(reads) == len(OutcomeClass)
    (policy,) = [p for p in proxied.config.policies if p.name == "exports"]
    alarm = _alarm(proxied, "exports", "VendorFailureRate")
    transient = math.ceil(policy.alarms.transient_rate_percent)
    unknown = math.ceil(policy.alarms.unknown_rate_percent)
    # every outcome class counts in the whole (100 calls here); either rate at its threshold fires
    rest = {"absent": 4, "throttled": 2, "permanent": 1, "auth": 1}
    assert _breaches(
        alarm, evaluate(alarm, _calls(accepted=92 - transient, transient=transient, **rest))
    )
    assert _breaches(alarm, evaluate(alarm, _calls(accepted=92 - unknown, unknown=unknown, **rest)))
    # both just below: quiet
    below = {"transient": transient - 1, "unknown": unknown - 1}
    quiet = _calls(accepted=92 - sum(below.values()), **below, **rest)
    assert not _breaches(alarm, evaluate(alarm, quiet))
    # below twenty calls a period one 503 is not a rate; an idle period is no rate at all
    assert not _breaches(alarm, evaluate(alarm, _calls(accepted=10, transient=9)))
    assert not _breaches(alarm, evaluate(alarm, {}))


def test_limiter_saturation_is_slots_used_against_the_scope_s_slots(proxied: Synth) -> None:
    for policy in proxied.config.policies:
        alarm = _alarm(proxied, policy.name, "LimiterSaturated")
        slots = policy.quota.rate_per_second * 300
        assert evaluate(alarm, {"LimiterSlotsUsed": slots}) == pytest.approx(100.0)
        assert _breaches(alarm, evaluate(alarm, {"LimiterSlotsUsed": 0.95 * slots}))
        assert not _breaches(alarm, evaluate(alarm, {"LimiterSlotsUsed": 0.5 * slots}))
        assert not _breaches(alarm, evaluate(alarm, {}))
        assert alarm["EvaluationPeriods"] == 3


def test_lease_expiries_and_publish_failures_alarm_on_any(default: Synth) -> None:
    for name, metric in (
        ("LeaseExpiries", "LeasesReclaimed"),
        ("PublishFailures", "PublishFailures"),
    ):
        alarm = _alarm(default, "exports", name)
        assert (alarm["Namespace"], alarm["MetricName"]) == ("Sweeper", metric)
        assert (alarm["Statistic"], alarm["Threshold"]) == ("Sum", 1)
        assert alarm["ComparisonOperator"] == "GreaterThanOrEqualToThreshold"


# -- the ledger ---------------------------------------------------------------------------------


def test_ledger_capacity_alarms_at_the_configured_maximum(default: Synth) -> None:
    alarm = _ledger_alarm(default, "DatabaseCapacityAtMax")
    cluster = default.logical_id("Database/Cluster/Resource")
    assert (alarm["Namespace"], alarm["MetricName"]) == ("AWS/RDS", "ServerlessDatabaseCapacity")
    assert alarm["Dimensions"] == [{"Name": "DBClusterIdentifier", "Value": {"Ref": cluster}}]
    maximum = default.resource("^DatabaseCluster[0-9A-F]{8}$", "AWS::RDS::DBCluster")["Properties"][
        "ServerlessV2ScalingConfiguration"
    ]["MaxCapacity"]
    assert (alarm["Statistic"], alarm["Threshold"]) == ("Maximum", maximum)
    assert alarm["ComparisonOperator"] == "GreaterThanOrEqualToThreshold"


def test_rotation_alarm_reads_the_errors_of_every_rotation_function(proxied: Synth) -> None:
    alarm = _ledger_alarm(proxied, "SecretRotationErrors")
    # the hosted rotations are serverless applications named by a parameter: the same names
    applications = proxied.resources("AWS::Serverless::Application").values()
    rotation_functions = {app["Properties"]["Parameters"]["functionName"] for app in applications}
    assert len(rotation_functions) == 3  # the admin's, the application user's, the reader's
    read = {
        query["MetricStat"]["Metric"]["Dimensions"][0]["Value"]
        for query in alarm["Metrics"]
        if "MetricStat" in query
        and query["MetricStat"]["Metric"]["MetricName"] == "Errors"
        and query["MetricStat"]["Metric"]["Namespace"] == "AWS/Lambda"
    }
    assert read == rotation_functions
    assert _breaches(alarm, evaluate(alarm, {"Errors": 1}))
    assert not _breaches(alarm, evaluate(alarm, {}))


def test_the_dashboard_draws_every_signal_the_design_names(proxied: Synth) -> None:
    signals = dashboard_signals(proxied)
    for metric in (
        "OldestEligibleAgeSeconds",
        "Discovered",  # claims
        "Succeeded",  # completions
        "TerminalFailures",
        "LeasesReclaimed",
        "Attempts_transient",
        "Attempts_unknown",
        "LimiterSlotsUsed",
        "PublishFailures",
        "ServerlessDatabaseCapacity",
        "Errors",  # the rotation functions' (and the consumer's)
    ):
        assert metric in signals, metric
    for alarm_id in ALARMS + SINGLE_SCOPE_ALARMS + LEDGER_ALARMS:
        assert alarm_id in signals, alarm_id


def _sweeper_statistics(synth: Synth) -> set[tuple[str, str]]:
    """(metric name, statistic) of every read of a `Sweeper` metric, by an alarm (its own
    metric or one of its math expression's) or by a dashboard graph."""
    found: set[tuple[str, str]] = set()
    for resource in synth.resources("AWS::CloudWatch::Alarm").values():
        props = resource["Properties"]
        if props.get("Namespace") == METRICS_NAMESPACE:
            found.add((props["MetricName"], props.get("Statistic") or props["ExtendedStatistic"]))
        for query in props.get("Metrics", []):
            stat = query.get("MetricStat")
            if stat is not None and stat["Metric"]["Namespace"] == METRICS_NAMESPACE:
                found.add((stat["Metric"]["MetricName"], stat["Stat"]))
    for widget in dashboard_widgets(synth):
        for line in widget.get("properties", {}).get("metrics", []):
            if line and line[0] == METRICS_NAMESPACE:
                options = line[-1] if isinstance(line[-1], dict) else {}
                found.add((line[1], options.get("stat", "Average")))
    return found


def test_every_sweeper_metric_read_by_another_statistic_than_sum_is_never_summed(
    proxied: Synth,
) -> None:
    # The consumer hands Powertools one value per count name per invocation
    # (observability.SummedCounts): only Sum reads the same figure as from every value.
    reads = _sweeper_statistics(proxied)
    assert (Metric.AUTH_CIRCUIT_OPEN, "Maximum") in reads  # the walk finds alarm metrics
    assert (Metric.TERMINAL_FAILURES, "Sum") in reads
    other = {name for name, statistic in reads if statistic != "Sum"}
    assert other <= NOT_SUMMED, f"read with another statistic than Sum, summed: {other}"


def _tracing_mode(synth: Synth, policy: str, function: str) -> str | None:
    """The X-Ray mode of one of a policy's pipeline functions (None: no TracingConfig)."""
    logical_id = synth.logical_id(f"Pipeline-{policy}/{function}/Function/Resource")
    properties = synth.template_json["Resources"][logical_id]["Properties"]
    config: dict[str, str] | None = properties.get("TracingConfig")
    return None if config is None else config["Mode"]


def test_no_x_ray_sampling_rule_is_deployed(every_variant: Synth) -> None:
    # Lambda takes no sampling rule ("You can't configure the X-Ray sampling rate for your
    # functions", the Lambda developer guide): a rule would be a resource that does nothing
    assert every_variant.resources("AWS::XRay::SamplingRule") == {}


def test_each_consumer_traces_as_its_policy_says_passthrough_unless_active(
    proxied: Synth,
) -> None:
    # Given exports (no tracing set) and stale-sessions (`consumer.tracing = "active"`)
    assert _tracing_mode(proxied, "exports", "Consumer") == "PassThrough"
    assert _tracing_mode(proxied, "stale-sessions", "Consumer") == "Active"
    # Then the producers, a few runs an hour, stay traced either way: each run's trace id is
    # the one every job's log line and ledger row names
    for policy in ("exports", "stale-sessions"):
        assert _tracing_mode(proxied, policy, "Producer") == "Active"


def test_the_consumer_logs_at_its_policy_s_level_info_unless_set(proxied: Synth) -> None:
    # Given exports (no level set) and stale-sessions (`consumer.log_level = "DEBUG"`)
    for policy, level in (("exports", "INFO"), ("stale-sessions", "DEBUG")):
        prefix = f"Pipeline{policy.replace('-', '')}"
        environment = proxied.environment(f"^{prefix}ConsumerFunction[0-9A-F]{{8}}$")
        # Then its consumer's Powertools Logger runs at that level: INFO writes a line a batch
        assert environment["POWERTOOLS_LOG_LEVEL"] == level

"""Discovery in the CDK app: per policy with `[policies.discovery]`, a scheduled function with
exactly what its source needs, and its alarms."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from infra.discovery import discovery_timeout_seconds
from infra.observability import lag_alarm_window
from sweeper.config import Policy, S3Discovery, SqlDiscovery
from tests.infra.conftest import FIXTURES, Synth

SQL_SECRET = "arn:aws:secretsmanager:eu-west-1:111122223333:secret:crm-readonly-XyZ123"


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def _statements(synth: Synth, function: dict[str, Any]) -> list[dict[str, Any]]:
    role_id = function["Properties"]["Role"]["Fn::GetAtt"][0]
    found: list[dict[str, Any]] = []
    for policy in synth.resources("AWS::IAM::Policy").values():
        if {"Ref": role_id} in policy["Properties"]["Roles"]:
            found += policy["Properties"]["PolicyDocument"]["Statement"]
    return found


def _discovery_function(synth: Synth, policy: str) -> dict[str, Any]:
    return synth.function(f"^Discovery{policy.replace('-', '')}Function[0-9A-F]{{8}}$")


def test_each_policy_with_discovery_gets_a_function_and_schedule_of_its_own(
    proxied: Synth,
) -> None:
    for policy in proxied.config.policies:
        assert policy.discovery is not None
        prefix = f"Discovery{policy.name.replace('-', '')}"
        function = _discovery_function(proxied, policy.name)
        variables = function["Properties"]["Environment"]["Variables"]
        assert Policy.model_validate_json(variables["SWEEPER_POLICY"]) == policy
        assert function["Properties"]["Timeout"] == discovery_timeout_seconds(
            policy.discovery.budget_seconds
        )
        assert function["Properties"]["ReservedConcurrentExecutions"] == 1
        schedule = proxied.resource(f"^{prefix}Schedule[0-9A-F]{{8}}$", "AWS::Scheduler::Schedule")
        assert schedule["Properties"]["ScheduleExpression"] == policy.discovery.schedule
        assert schedule["Properties"]["ScheduleExpressionTimezone"] == policy.timezone


def test_the_default_stack_has_no_discovery_when_no_policy_asks_for_it(default: Synth) -> None:
    if all(p.discovery is None for p in default.config.policies):
        assert not [k for k in default.python_functions() if k.startswith("Discovery")]


def test_s3_discovery_may_list_its_bucket_under_its_prefix_only(proxied: Synth) -> None:
    policy = proxied.config.policy("exports")
    assert isinstance(policy.discovery, S3Discovery)
    statements = _statements(proxied, _discovery_function(proxied, "exports"))
    s3 = [s for s in statements if any(a.startswith("s3:") for a in _as_list(s["Action"]))]
    assert len(s3) == 1
    (listing,) = s3
    assert _as_list(listing["Action"]) == ["s3:ListBucket"]
    assert listing["Condition"] == {"StringLike": {"s3:prefix": ["exports/*"]}}
    resource = repr(listing["Resource"])
    assert ":s3:::example-exports" in resource
    assert "*" not in resource
    secrets = [s for s in statements if "secretsmanager:GetSecretValue" in _as_list(s["Action"])]
    assert len(secrets) == 1  # the ledger's application secret only


def test_sql_discovery_reads_its_own_secret_and_not_another(proxied: Synth) -> None:
    policy = proxied.config.policy("stale-sessions")
    assert isinstance(policy.discovery, SqlDiscovery)
    statements = _statements(proxied, _discovery_function(proxied, "stale-sessions"))
    reads = [s for s in statements if "secretsmanager:GetSecretValue" in _as_list(s["Action"])]
    resources = [repr(s["Resource"]) for s in reads]
    assert any(SQL_SECRET in r for r in resources)  # the source's read-only secret
    assert len(reads) == 2  # and the ledger's application secret; nothing else
    assert not [s for s in statements if any(a.startswith("s3:") for a in _as_list(s["Action"]))]


def test_sql_discovery_reaches_the_source_on_its_port(proxied: Synth) -> None:
    function = _discovery_function(proxied, "stale-sessions")
    (group_ref,) = function["Properties"]["VpcConfig"]["SecurityGroupIds"]
    group = proxied.template_json["Resources"][group_ref["Fn::GetAtt"][0]]
    ports = {
        (rule["FromPort"], rule["ToPort"]) for rule in group["Properties"]["SecurityGroupEgress"]
    }
    assert (5433, 5433) in ports


def test_discovery_alarms_on_errors_lost_runs_and_lag(proxied: Synth) -> None:
    alarms = {
        str(alarm["Properties"]["AlarmName"]).split("-", 1)[-1]: alarm["Properties"]
        for alarm in proxied.resources("AWS::CloudWatch::Alarm").values()
    }
    lag = alarms["exports-DiscoveryLag"]
    assert lag["MetricName"] == "DiscoveryLagSeconds"
    assert lag["TreatMissingData"] == "breaching"  # a discovery that stopped running alarms too
    assert lag["Threshold"] == 172_800
    assert lag["Period"] * lag["EvaluationPeriods"] >= 172_800
    for policy in ("exports", "stale-sessions"):
        assert f"{policy}-DiscoveryErrors" in alarms
        assert f"{policy}-DiscoveryScheduleDeadLetters" in alarms


def test_the_lag_window_spans_the_threshold_in_at_most_a_day_of_periods() -> None:
    for lag in (60, 3600, 86_400, 172_800, 30 * 86_400):
        period, periods = lag_alarm_window(lag)
        assert periods <= 24
        assert period % 60 == 0
        assert period * periods >= lag
        assert period * (periods - 1) < max(lag, period)


def test_discovery_function_name_is_an_output(proxied: Synth) -> None:
    outputs = proxied.template_json["Outputs"]
    assert "ExportsDiscoveryFunctionName" in outputs
    assert "StaleSessionsDiscoveryFunctionName" in outputs


def test_s3_discovery_reading_metadata_params_may_get_the_objects_under_its_prefix_only(
    synth_variant: Callable[[dict[str, Any]], Synth],
) -> None:
    # Given a policy whose discovery takes params from each due object's metadata
    synth = synth_variant({"config": str(FIXTURES / "s3_metadata_params.toml")})
    # Then its function may HeadObject (s3:GetObject) the objects under the prefix, no more
    statements = _statements(synth, _discovery_function(synth, "payments"))
    s3 = {a: s for s in statements for a in _as_list(s["Action"]) if a.startswith("s3:")}
    assert sorted(s3) == ["s3:GetObject", "s3:ListBucket"]
    resource = repr(s3["s3:GetObject"]["Resource"])
    assert ":s3:::example-payments/settlements/*" in resource

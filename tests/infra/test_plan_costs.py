"""`sweeper plan` counts what the stack bills as infra/ creates it: checked against a synth."""

from __future__ import annotations

import pytest

from sweeper_tools.planning.costs import (
    INTERFACE_ENDPOINT_SERVICES,
    LEDGER_ALARM_METRICS,
    LEDGER_SECRETS,
    NAT_GATEWAYS,
    Deployment,
    Network,
    alarm_metrics,
    at_rest,
    dashboards,
    scheduled_functions,
)
from sweeper_tools.planning.pause import AUTO_PAUSE_AFTER_SECONDS, runs_per_month
from tests.infra.conftest import Synth


@pytest.fixture(params=["default", "proxied"])
def synth(request: pytest.FixtureRequest) -> Synth:
    """The shipped policy file, and two policies behind a proxy (a new cluster either way)."""
    variant: Synth = request.getfixturevalue(request.param)
    return variant


def _alarm_metrics(synth: Synth) -> int:
    """The metrics the template's alarms read: one each, or each metric of a math alarm."""
    count = 0
    for alarm in synth.resources("AWS::CloudWatch::Alarm").values():
        metrics = alarm["Properties"].get("Metrics")
        count += 1 if metrics is None else sum("MetricStat" in m for m in metrics)
    return count


def test_the_plan_counts_the_alarm_metrics_the_stack_creates(synth: Synth) -> None:
    planned = LEDGER_ALARM_METRICS + sum(alarm_metrics(p) for p in synth.config.policies)
    assert planned == _alarm_metrics(synth)


def test_the_plan_counts_the_stacks_secrets_gateways_endpoints_and_schedules(
    synth: Synth,
) -> None:
    policies = synth.config.policies
    secrets = LEDGER_SECRETS + sum(1 for p in policies if p.intake.webhook)
    assert secrets == len(synth.resources("AWS::SecretsManager::Secret"))
    assert len(synth.resources("AWS::EC2::NatGateway")) == NAT_GATEWAYS
    assert dashboards(policies) == len(synth.resources("AWS::CloudWatch::Dashboard"))
    interface = [
        e
        for e in synth.resources("AWS::EC2::VPCEndpoint").values()
        if e["Properties"].get("VpcEndpointType") == "Interface"
    ]
    assert len(interface) == INTERFACE_ENDPOINT_SERVICES
    schedules = synth.resources("AWS::Scheduler::Schedule").values()
    synthesized = sum(runs_per_month(s["Properties"]["ScheduleExpression"]) for s in schedules)
    planned = sum(runs_per_month(e, "UTC") for p in policies for e, *_ in scheduled_functions(p))
    assert planned == synthesized


def test_the_plans_lean_profile_has_the_lean_synths_endpoints_and_nat(lean: Synth) -> None:
    """The plan's lean column bills no interface endpoint and the one NAT, as synthesized."""
    items = {item.name: item for item in at_rest(lean.config, Deployment(network=Network.LEAN))}
    interface = [
        e
        for e in lean.resources("AWS::EC2::VPCEndpoint").values()
        if e["Properties"].get("VpcEndpointType") == "Interface"
    ]
    assert items["Interface endpoints"].quantity == len(interface) == 0
    assert len(lean.resources("AWS::EC2::NatGateway")) == NAT_GATEWAYS


def test_the_plans_paused_ledger_pauses_when_the_synthesized_cluster_does(
    paused_lean: Synth,
) -> None:
    # The plan's pause delay is the one the paused cluster is synthesized with
    (cluster,) = paused_lean.resources("AWS::RDS::DBCluster").values()
    scaling = cluster["Properties"]["ServerlessV2ScalingConfiguration"]
    assert (scaling["MinCapacity"], scaling["SecondsUntilAutoPause"]) == (
        0,
        AUTO_PAUSE_AFTER_SECONDS,
    )

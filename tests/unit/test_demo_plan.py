"""The demo's defaults fill the quota: parallel calls and batch size planned from the rate and
the latency it measures, as `sweeper plan` computes them; a team's policy file runs as it is."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from sweeper.config import Policy, Quota
from sweeper_cli import main
from sweeper_local.demo import (
    LOCAL_CALL_OVERHEAD_SECONDS,
    MeasuredLatency,
    plan_consumer,
)
from sweeper_local.demo_audit import vendor_contract, vendor_utilization
from sweeper_tools.planning.plan import PlanInput, make_plan
from sweeper_tools.policy_file import load_config

RATE = Quota(limit=100, period_seconds=1)


def test_a_slow_vendor_gets_the_parallel_calls_the_plan_recommends_and_whole_rounds() -> None:
    # Given a 100/s quota, 8 consumers and a vendor measured at 130 ms (p95 160 ms)
    latency = MeasuredLatency(p50_seconds=0.13, p95_seconds=0.16, calls=8)
    consumer = plan_consumer(RATE, 8, latency)
    # Then each consumer makes the calls the plan recommends for the local stack's own time
    # per call, in batches of whole rounds
    assert consumer.parallel_calls == 4
    assert consumer.batch_size == 8
    assert consumer.environments == 8
    # and the plan of the resulting policy says it reaches the quota, with a timeout that
    # covers its batch
    policy = Policy(name="demo-check", quota=RATE, consumer=consumer)
    given = PlanInput(
        latency_p50_seconds=0.13,
        latency_p95_seconds=0.16,
        overhead_seconds=LOCAL_CALL_OVERHEAD_SECONDS,
    )
    plan = make_plan(policy, given)
    assert plan.utilization_of_quota == 1.0
    assert consumer.timeout_seconds >= plan.recommended_timeout_seconds
    assert not [w for w in plan.warnings if "cannot reach its quota" in w]


def test_the_local_stack_s_time_per_call_is_planned_for() -> None:
    # Given the calls a 100/s quota needs in flight with a vendor at 130 ms (p95 160 ms) when
    # each call also spends the local stack's measured time in sweeper (limiter, idempotency,
    # ledger: about 0.1 s, not a deployed function's 0.03 s)
    latency = MeasuredLatency(p50_seconds=0.13, p95_seconds=0.16, calls=8)
    consumer = plan_consumer(RATE, 8, latency)
    needed = RATE.rate_per_second * (latency.p95_seconds + LOCAL_CALL_OVERHEAD_SECONDS)
    # Then the demo's consumers hold at least that many calls in flight
    assert consumer.environments * consumer.parallel_calls >= needed
    # (a deployed function's overhead would have planned 24 for the 25 needed locally)
    aws = plan_consumer(RATE, 8, latency, overhead_seconds=0.03)
    assert aws.environments * aws.parallel_calls < needed


def test_the_old_defaults_would_not_have_reached_the_quota() -> None:
    # The figure the planned defaults replace: one call at a time, batches of 10
    policy = Policy(
        name="demo-check",
        quota=RATE,
        consumer={"reserved_concurrency": 8, "max_concurrency": 8, "batch_size": 10},
    )
    plan = make_plan(policy, PlanInput(latency_p50_seconds=0.13, latency_p95_seconds=0.16))
    assert plan.utilization_of_quota < 0.85


def test_a_fast_vendor_keeps_one_call_at_a_time_in_full_batches() -> None:
    consumer = plan_consumer(Quota(limit=20, period_seconds=1), 4, MeasuredLatency(0.004, 0.006, 8))
    assert (consumer.parallel_calls, consumer.batch_size) == (1, 10)


def test_given_values_are_kept_and_the_other_is_planned_around_them() -> None:
    latency = MeasuredLatency(0.13, 0.16, 8)
    assert plan_consumer(RATE, 8, latency, parallel_calls=5).batch_size == 10
    assert plan_consumer(RATE, 8, latency, parallel_calls=5).parallel_calls == 5
    # a given batch smaller than the planned parallel calls caps them
    assert plan_consumer(RATE, 8, latency, batch_size=2).parallel_calls == 2
    given = plan_consumer(RATE, 8, latency, batch_size=4, parallel_calls=2)
    assert (given.batch_size, given.parallel_calls) == (4, 2)


def test_utilization_is_the_calls_over_the_quota_across_their_span() -> None:
    # 101 calls 10 ms apart span 1 s: 100 calls/s of a 100/s quota
    arrivals = tuple(i * 0.01 for i in range(101))
    assert vendor_utilization(arrivals, RATE) == 1.0
    assert vendor_utilization(arrivals, Quota(limit=200, period_seconds=1)) == 0.5
    assert vendor_utilization((1.0,), RATE) is None


def test_the_demo_s_sizing_flags_do_not_mix_with_a_policy_file(tmp_path: Path) -> None:
    config = tmp_path / "sweeper.toml"
    config.write_text('[[policies]]\nname = "exports"\n', encoding="utf-8")
    result = CliRunner().invoke(main, ["demo", "--config", str(config), "--rate", "10/1s"])
    assert result.exit_code == 2
    assert "--rate cannot be used with --config: the policy file sets them" in result.output


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--policy", "exports"], "--policy needs --config"),
        (["--config", "{config}", "--policy", "nope"], "no policy named 'nope'"),
    ],
)
def test_a_wrong_policy_choice_is_one_line(tmp_path: Path, args: list[str], message: str) -> None:
    config = tmp_path / "sweeper.toml"
    config.write_text('[[policies]]\nname = "exports"\n', encoding="utf-8")
    argv = ["demo", *(a.replace("{config}", str(config)) for a in args)]
    result = CliRunner().invoke(main, argv)
    assert result.exit_code != 0
    assert message in result.output
    assert "Traceback" not in result.output


def test_a_batch_above_ten_gets_the_one_second_window_lambda_requires() -> None:
    latency = MeasuredLatency(0.13, 0.16, 8)
    large = plan_consumer(RATE, 8, latency, batch_size=100, parallel_calls=10)
    assert (large.batch_size, large.batch_window_seconds) == (100, 1)
    assert plan_consumer(RATE, 8, latency).batch_window_seconds == 0


@pytest.mark.parametrize(
    ("example", "contract"),
    [
        ("listings", "listings"),
        ("payments", "payments"),
        ("s3-exports", "bucket"),
        ("helpdesk", "helpdesk"),
        ("refunds", "refunds"),
        ("github-artifacts", "github"),
        ("shopify-graphql", "graphql"),
    ],
)
def test_the_demo_audits_a_worked_example_by_the_contract_its_action_calls(
    example: str, contract: str
) -> None:
    examples = Path(__file__).resolve().parents[2] / "docs" / "examples"
    policy = load_config(str(examples / f"{example}.toml")).policy(example)
    assert vendor_contract(policy) == contract
    # while a policy of the default delete contract is audited as before
    assert vendor_contract(Policy(name="exports")) == "delete"

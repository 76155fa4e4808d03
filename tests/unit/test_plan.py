"""`sweeper plan`: Little's law over the policy, checked against figures worked by hand."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from pathlib import Path

import pytest
from click.testing import CliRunner

from sweeper.config import ConsumerConfig, HttpActionConfig, Policy, Quota
from sweeper.errors import ConfigError
from sweeper_cli import main
from sweeper_cli.plan import render
from sweeper_tools.planning.plan import (
    PlanInput,
    Prices,
    limit_warnings,
    lognormal_mean,
    make_plan,
    quota_warning,
)


def _policy(**consumer: int) -> Policy:
    # 100 calls/s at headroom 0.8: a target of 80/s; every 5 minutes. A timeout of 18 s: the
    # default call's 2 + 10 s after the ledger read, and the 5 s the consumer leaves Lambda.
    return Policy(
        name="exports",
        quota=Quota(limit=100, period_seconds=1.0, headroom=0.8),
        consumer=ConsumerConfig(
            **{
                "reserved_concurrency": 4,
                "max_concurrency": 4,
                "batch_size": 10,
                "timeout_seconds": 18,
                **consumer,
            }
        ),
    )


def _with(policy: Policy, **changes: object) -> Policy:
    """The policy with some fields changed, validated again (its limits follow its quota)."""
    return Policy.model_validate({**policy.model_dump(exclude={"limits"}), **changes})


def test_the_lognormal_mean_is_above_the_median_by_the_spread() -> None:
    assert lognormal_mean(0.1, 0.1) == pytest.approx(0.1)
    sigma = math.log(3) / 1.6449
    assert lognormal_mean(0.1, 0.3) == pytest.approx(0.1 * math.exp(sigma**2 / 2))


def test_a_slow_vendor_with_few_environments_cannot_reach_the_quota_and_says_what_to_raise() -> (
    None
):
    # Given 4 environments, one call at a time, and a vendor at 0.3 s (no spread, no overhead)
    plan = make_plan(
        _policy(),
        PlanInput(latency_p50_seconds=0.3, latency_p95_seconds=0.3, overhead_seconds=0.0),
    )
    # Then the consumers complete 4 / 0.3 = 13.3 jobs/s of the 80/s target
    assert plan.consumer_capacity_per_second == pytest.approx(13.33, abs=0.01)
    assert plan.throughput_per_second == pytest.approx(13.33, abs=0.01)
    assert plan.utilization_of_quota == pytest.approx(13.33 / 80, abs=0.001)
    # And 80 x 0.3 = 24 calls must be in flight: 24 environments, or 6 calls in each of 4
    assert plan.needed_in_flight == 24
    assert plan.recommended_environments == 24
    assert plan.recommended_parallel_calls == 6
    assert len(plan.warnings) == 1
    assert "cannot reach its quota" in plan.warnings[0]
    assert "concurrency to 24 or parallel calls to 6" in plan.warnings[0]


def test_parallel_calls_multiply_what_each_environment_completes() -> None:
    given = PlanInput(
        latency_p50_seconds=0.3, latency_p95_seconds=0.3, overhead_seconds=0.0, parallel_calls=6
    )
    plan = make_plan(_policy(), given)
    assert plan.consumer_capacity_per_second == pytest.approx(80.0)
    assert plan.throughput_per_second == pytest.approx(80.0)
    assert plan.warnings == []


def test_the_limiter_caps_throughput_and_the_backlog_drains_at_the_net_rate() -> None:
    # Given a fast vendor (8 environments / 0.05 s = 160/s) and a backlog with arrivals
    plan = make_plan(
        _policy(reserved_concurrency=8, max_concurrency=8),
        PlanInput(
            latency_p50_seconds=0.05,
            latency_p95_seconds=0.05,
            overhead_seconds=0.0,
            backlog=60_000,
            arrival_per_second=20.0,
        ),
    )
    # Then throughput is the target rate, and 60,000 jobs drain at 80 - 20 = 60/s
    assert plan.consumer_capacity_per_second == pytest.approx(160.0)
    assert plan.throughput_per_second == pytest.approx(80.0)
    assert plan.drain_seconds == pytest.approx(1000.0)
    # And the oldest job waits the drain plus one schedule interval (5 minutes)
    assert plan.oldest_age_seconds == pytest.approx(1300.0)
    assert plan.warnings == []


def test_arrivals_at_or_over_the_throughput_never_drain_and_warn() -> None:
    plan = make_plan(
        _policy(),
        PlanInput(latency_p50_seconds=0.01, latency_p95_seconds=0.01, arrival_per_second=80.0),
    )
    assert plan.drain_seconds is None
    assert plan.oldest_age_seconds is None
    assert any("never drains" in w for w in plan.warnings)


def test_a_batch_that_may_outlast_half_the_timeout_warns() -> None:
    # 10 records one at a time at up to 4 s each, 10 slots at 80/s over 4 environments and the
    # ledger read: 40 + 0.5 + 1 = 41.5 s, twice that and 5 s unused against a 60 s timeout
    plan = make_plan(
        _policy(timeout_seconds=60),
        PlanInput(latency_p50_seconds=1.0, latency_p95_seconds=4.0, overhead_seconds=0.0),
    )
    assert plan.batch_seconds_p95 == pytest.approx(41.5)
    assert plan.recommended_timeout_seconds == 88
    assert any(
        "consumer timeout (60 s) is below the 88 s" in w and "raise timeout_seconds to 88" in w
        for w in plan.warnings
    )


def _fast_vendor(p95: float) -> PlanInput:
    return PlanInput(latency_p50_seconds=0.1, latency_p95_seconds=p95, overhead_seconds=0.0)


def test_a_batchs_need_is_its_calls_plus_its_slots_plus_its_ledger_read() -> None:
    # Given batches of 10, 4 calls at once, 4 environments sharing 80/s, a vendor at 2 s p95
    plan = make_plan(_policy(parallel_calls=4), _fast_vendor(2.0))
    # Then 3 rounds of 2 s (4, 4 and 2 records), 10 slots at 80 / 4 = 20/s each, and the
    # ledger read: 6 + 0.5 + 1
    assert plan.batch_calls_seconds == pytest.approx(6.0)
    assert plan.batch_slots_seconds == pytest.approx(0.5)
    assert plan.batch_seconds_p95 == pytest.approx(7.5)
    # And the timeout covers twice that, plus the 5 s the consumer never uses: 20 s
    assert plan.recommended_timeout_seconds == 20
    # And the visibility timeout is six of them plus the window: what a killed environment costs
    assert plan.recommended_visibility_timeout_seconds == 6 * 20


def test_the_slots_follow_the_environments_share_of_every_scopes_rate() -> None:
    # Given 8 environments: each takes one slot in 8 of the 80/s; with 4 tenants busy, of 320/s
    policy = _with(_policy(reserved_concurrency=8, max_concurrency=8), scope={"kind": "tenant"})
    one = make_plan(policy, _fast_vendor(0.1))
    four = make_plan(
        policy,
        PlanInput(latency_p50_seconds=0.1, latency_p95_seconds=0.1, overhead_seconds=0.0, scopes=4),
    )
    assert one.batch_slots_seconds == pytest.approx(10 * 8 / 80)
    assert four.batch_slots_seconds == pytest.approx(10 * 8 / 320)


def test_the_timeout_lets_one_call_run_its_whole_connect_and_read_timeout() -> None:
    # Given a fast batch (2 x (1 + 0.5 + 1) = 5 s) and a call allowed 2 + 30 s
    slow_calls = _policy(parallel_calls=10).model_copy(
        update={"action": HttpActionConfig(connect_timeout_seconds=2, read_timeout_seconds=30)}
    )
    plan = make_plan(slow_calls, _fast_vendor(1.0))
    # Then the timeout is the ledger read, that call and the unused 5 s: 1 + 32 + 5
    assert plan.batch_seconds_p95 == pytest.approx(2.5)
    assert plan.recommended_timeout_seconds == 38


def test_a_timeout_far_above_the_batchs_need_warns_with_the_delay_a_killed_environment_costs() -> (
    None
):
    # Given a batch that needs 18 s (the default call's 1 + 2 + 10 + 5) and a window of 1 s
    def warnings(timeout: int) -> list[str]:
        policy = _policy(parallel_calls=10, timeout_seconds=timeout, batch_window_seconds=1)
        plan = make_plan(policy, _fast_vendor(0.1))
        assert plan.recommended_timeout_seconds == 18
        assert plan.recommended_visibility_timeout_seconds == 6 * 18 + 1
        assert plan.visibility_timeout_seconds == 6 * timeout + 1
        return plan.warnings

    # Then up to twice that is fine, past it the plan says what the timeout costs and would cost
    assert warnings(18) == []
    assert warnings(36) == []
    (far,) = warnings(37)
    assert "consumer timeout (37 s) is over 2x the 18 s a batch needs" in far
    assert "delays its records up to 223 s (the visibility timeout), 109 s at" in far
    assert "timeout_seconds = 18" in far
    # And below the need it says to raise it
    (short,) = warnings(17)
    assert "raise timeout_seconds to 18" in short


def test_the_unused_seconds_are_the_ones_the_consumer_leaves_lambda() -> None:
    from sweeper.runtime import LAMBDA_SAFETY_MARGIN_SECONDS
    from sweeper_tools.planning.batch import UNUSED_LAMBDA_SECONDS

    assert UNUSED_LAMBDA_SECONDS == LAMBDA_SAFETY_MARGIN_SECONDS


#: `sweeper plan` as the README runs it on the shipped policy: the issue's figure, then the
#: worked example's.
SHIPPED_PLANS = [
    ["--latency-p50", "0.15"],
    ["--latency-p50", "0.15", "--latency-p95", "0.4", "--backlog", "20000", "--arrival", "5"],
]


@pytest.mark.parametrize("args", SHIPPED_PLANS)
def test_the_shipped_policy_reaches_its_quota_with_the_timeout_its_batch_needs(
    args: list[str],
) -> None:
    from sweeper_tools.policy_file import load_config

    result = CliRunner().invoke(
        main, ["plan", "--config", "sweeper.toml", "--json", *args], prog_name="sweeper"
    )
    assert result.exit_code == 0, result.output
    plan = json.loads(result.output)
    assert plan["errors"] == plan["advisories"] == []
    assert plan["throughput_per_second"] >= plan["target_rate_per_second"]
    consumer = load_config("sweeper.toml").policies[0].consumer
    assert consumer.timeout_seconds == plan["recommended_timeout_seconds"]
    assert consumer.visibility_timeout_seconds == plan["recommended_visibility_timeout_seconds"]


def test_the_runbook_states_the_delay_the_shipped_policy_gives_a_killed_environment() -> None:
    result = CliRunner().invoke(
        main, ["plan", "--config", "sweeper.toml", *SHIPPED_PLANS[0]], prog_name="sweeper"
    )
    delay = re.search(r"killed env delay up to (\d+) s", result.output)
    assert delay is not None, result.output
    runbook = " ".join(Path("docs/runbook.md").read_text(encoding="utf-8").split())
    assert f"delays its batch up to {delay.group(1)} s" in runbook


def test_requests_and_cost_per_million_jobs_follow_from_the_batch_and_the_prices() -> None:
    plan = make_plan(
        _policy(reserved_concurrency=8, max_concurrency=8),
        PlanInput(latency_p50_seconds=0.05, latency_p95_seconds=0.05, overhead_seconds=0.0),
        Prices(
            lambda_per_million_requests=1.0,
            lambda_per_gb_second=1e-6,
            sqs_per_million_requests=1.0,
            dynamodb_per_million_writes=1.0,
            dynamodb_per_million_reads=1.0,
        ),
    )
    # One send per 10 jobs, one receive and one delete per batch of 10
    assert plan.requests_per_job["sqs"] == pytest.approx(0.3)
    assert plan.requests_per_job["lambda_invocations"] == pytest.approx(0.1)
    # 8 busy environments of 0.5 GB at 80 jobs/s: 0.05 GB-s a job
    assert plan.requests_per_job["lambda_gb_seconds"] == pytest.approx(0.05)
    # Two idempotency writes, a limiter write a slot (one thread: blocks of one) and the
    # failed conditional writes (sweeper_tools.planning.writes)
    assert plan.requests_per_job["dynamodb_writes"] == pytest.approx(3.1)
    # The rate binds at 10 calls/s an environment: a look at its gate serves 1 + 10 x 0.05
    # calls, and each environment reads the live limit once a second (8 / 80 a job)
    reads = 1 / 1.5 + 8 / 80
    assert plan.requests_per_job["dynamodb_reads"] == pytest.approx(reads, abs=1e-4)
    assert plan.cost_per_million_jobs == pytest.approx(
        {
            "sqs": 0.3,
            "lambda_requests": 0.1,
            "lambda_duration": 0.05,
            "dynamodb": round(3.1 + reads, 2),
            "total": round(3.55 + reads, 2),
        }
    )


@pytest.mark.parametrize(
    "given",
    [
        {"latency_p50_seconds": 0.0, "latency_p95_seconds": 0.1},
        {"latency_p50_seconds": 0.2, "latency_p95_seconds": 0.1},
        {"latency_p50_seconds": 0.1, "latency_p95_seconds": 0.1, "backlog": -1},
        {"latency_p50_seconds": 0.1, "latency_p95_seconds": 0.1, "scopes": 0},
        {"latency_p50_seconds": 0.1, "latency_p95_seconds": 0.1, "cpu_seconds_per_job": -0.001},
    ],
)
def test_impossible_figures_are_refused(given: dict[str, float]) -> None:
    with pytest.raises(ConfigError):
        PlanInput(**given)  # type: ignore[arg-type]


def test_synth_is_warned_only_when_the_measured_latency_cannot_reach_the_quota() -> None:
    assert quota_warning(_policy()) is None  # not measured: not checked
    slow = _policy().model_copy(
        update={"action": HttpActionConfig(latency_p50_seconds=0.3, latency_p95_seconds=0.5)}
    )
    fast = _policy().model_copy(update={"action": HttpActionConfig(latency_p50_seconds=0.01)})
    warning = quota_warning(slow)
    assert warning is not None
    assert "cannot reach its quota" in warning
    assert quota_warning(fast) is None


def test_p95_without_p50_or_below_it_is_refused_in_the_policy_file() -> None:
    with pytest.raises(ValueError, match="latency_p95_seconds"):
        HttpActionConfig(latency_p95_seconds=0.5)
    with pytest.raises(ValueError, match="latency_p95_seconds"):
        HttpActionConfig(latency_p50_seconds=0.6, latency_p95_seconds=0.5)


def test_the_command_prints_the_plan_and_exits_1_on_a_warning() -> None:
    runner = CliRunner()
    ok = runner.invoke(
        main, ["plan", "--latency-p50", "0.01", "--config", "sweeper.toml"], prog_name="sweeper"
    )
    assert ok.exit_code == 0, ok.output
    assert "throughput" in ok.output
    slow = runner.invoke(
        main,
        ["plan", "--latency-p50", "0.5", "--config", "sweeper.toml", "--json"],
        prog_name="sweeper",
    )
    assert slow.exit_code == 1
    assert "cannot reach its quota" in slow.output


def test_turnovers_cost_their_share_of_a_batch_and_a_longer_batch_keeps_it_within_3_percent() -> (
    None
):
    # Given 80/s over 4 environments (20/s each, the rate binds), a vendor at 0.1 s with no
    # spread or overhead, and batches of 10 records
    plan = make_plan(_policy(parallel_calls=4), _fast_vendor(0.1))
    # Then a turnover is the batch's last calls and the event source's turnaround: 0.1 + 0.25 s,
    # against a batch of 10 / 20 = 0.5 s: 0.35 / 0.85 of the rate
    assert plan.turnover_seconds == pytest.approx(0.35)
    assert plan.turnover_share == pytest.approx(0.35 / 0.85, abs=0.001)
    # And the batch recommended is the smallest round one whose turnover is within 3 %:
    # 20 x 0.35 x 0.97 / 0.03 = 226.3 records, 230
    assert plan.recommended_batch_size == 230
    longer = make_plan(
        _policy(parallel_calls=4, batch_size=230, batch_window_seconds=1), _fast_vendor(0.1)
    )
    shorter = make_plan(
        _policy(parallel_calls=4, batch_size=220, batch_window_seconds=1), _fast_vendor(0.1)
    )
    assert longer.turnover_share <= 0.03 < shorter.turnover_share
    assert longer.recommended_batch_size == 230  # a batch that long is told to stay


def test_the_batch_recommended_for_turnovers_lasts_a_minute_at_most_and_holds_the_calls() -> None:
    # Given 16 environments of 10 calls sharing 80/s (5/s each) and a vendor at 2 s: a
    # turnover of 2.25 s would want 5 x 2.25 x 0.97 / 0.03 = 364 records, 73 s of 5/s
    slow = make_plan(
        _policy(reserved_concurrency=16, max_concurrency=16, parallel_calls=10),
        PlanInput(latency_p50_seconds=2.0, latency_p95_seconds=2.0, overhead_seconds=0.0),
    )
    assert slow.throughput_per_second == pytest.approx(80)
    # Then it is held to a minute's records: 300
    assert slow.recommended_batch_size == 300
    # And a rate so low that a few records would do still gets a batch of its parallel calls
    trickle = make_plan(
        _with(_policy(parallel_calls=8), quota=Quota(limit=1, period_seconds=60.0)),
        _fast_vendor(0.1),
    )
    assert trickle.recommended_batch_size == 8


def test_the_command_prints_what_turnovers_cost_and_the_batch_that_keeps_them_small() -> None:
    args = ["plan", "--latency-p50", "0.15", "--config", "docs/examples/plan-real-rates.toml"]
    args += ["--policy", "one-scope"]
    text = CliRunner().invoke(main, args, prog_name="sweeper").output
    plan = json.loads(CliRunner().invoke(main, [*args, "--json"], prog_name="sweeper").output)
    line = next(x for x in text.splitlines() if x.strip().startswith("turnovers"))
    assert f"up to {plan['turnover_share']:.0%} of the rate" in line
    assert f"{plan['recommended_batch_size']} records a batch keep it within 3%" in line


def test_the_command_without_a_latency_is_one_line_that_says_what_to_give(tmp_path: Path) -> None:
    # Given the shipped policy file without the vendor's latency it states
    shipped = Path("sweeper.toml").read_text(encoding="utf-8").splitlines()
    silent = tmp_path / "sweeper.toml"
    silent.write_text("\n".join(x for x in shipped if not x.startswith("latency_p")), "utf-8")
    result = CliRunner().invoke(main, ["plan", "--config", str(silent)], prog_name="sweeper")
    assert result.exit_code == 2
    assert "--latency-p50" in result.output
    assert "Traceback" not in result.output


def _cpu_policy(memory_mb: int, environments: int = 4) -> Policy:
    # 80/s as above, ten calls at once in each environment: the calls in flight never bind
    return _policy(
        reserved_concurrency=environments,
        max_concurrency=max(2, environments),
        parallel_calls=10,
        memory_mb=memory_mb,
    )


def _fast(cpu_seconds_per_job: float = 0.010) -> PlanInput:
    """A vendor at 50 ms, no overhead: the calls in flight are never the bound here."""
    return PlanInput(
        latency_p50_seconds=0.05,
        latency_p95_seconds=0.05,
        overhead_seconds=0.0,
        cpu_seconds_per_job=cpu_seconds_per_job,
    )


def test_an_environment_runs_short_of_cpu_before_it_runs_short_of_threads() -> None:
    # Given 4 environments of 256 MB (256 / 1769 = 0.1447 vCPU) and 10 ms of CPU per job
    plan = make_plan(_cpu_policy(256), _fast(0.010))
    # Then each completes 0.1447 x 0.7 / 0.010 = 10.13 jobs/s: 40.5 in all, not the 80/s
    # that 4 x 10 calls of 50 ms could make
    assert plan.calls_capacity_per_second == pytest.approx(800.0)
    assert plan.vcpu_per_environment == pytest.approx(256 / 1769, abs=0.001)
    assert plan.cpu_capacity_per_second == pytest.approx(4 * 256 / 1769 * 0.7 / 0.010, abs=0.01)
    assert plan.throughput_per_second == pytest.approx(40.52, abs=0.01)
    # And 80 x 0.010 / (4 x 0.7) = 0.2857 vCPU each carries it: 506 MB, or 8 environments
    assert plan.recommended_memory_mb == 506
    assert plan.recommended_environments == 8
    (warning,) = plan.warnings
    assert "runs short of CPU" in warning
    assert "raise consumer.memory_mb to 506 or environments to 8" in warning


def test_memory_past_one_vcpu_adds_no_capacity_and_the_plan_says_to_add_environments() -> None:
    # Given one environment: 80/s x 10 ms needs 0.8 / 0.7 = 1.14 vCPU, more than one process has
    plan = make_plan(_cpu_policy(3538, environments=1), _fast())
    assert plan.vcpu_per_environment == 1.0
    assert plan.cpu_capacity_per_second == pytest.approx(70.0)
    assert plan.recommended_memory_mb == 1769
    assert plan.recommended_environments == 2
    (warning,) = plan.warnings
    assert "raise environments to 2 (one uses at most one vCPU)" in warning
    # And at 512 MB it takes 4 environments of 0.29 vCPU, or 2 of one vCPU
    (warning,) = make_plan(_cpu_policy(512, environments=1), _fast()).warnings
    assert "raise environments to 4, or to 2 with consumer.memory_mb = 1769" in warning


def test_enough_memory_for_the_rate_is_not_raised() -> None:
    plan = make_plan(_cpu_policy(1024), _fast())
    assert plan.cpu_capacity_per_second == pytest.approx(4 * 1024 / 1769 * 70, abs=0.01)
    assert plan.throughput_per_second == pytest.approx(80.0)
    assert plan.recommended_memory_mb == 1024
    assert plan.recommended_environments == 4
    assert plan.warnings == []


def test_without_a_cpu_figure_cpu_is_not_the_bound() -> None:
    plan = make_plan(_cpu_policy(128), _fast(0.0))
    assert plan.cpu_capacity_per_second is None
    assert plan.throughput_per_second == pytest.approx(80.0)
    assert plan.warnings == []


def test_lambda_duration_per_job_follows_the_consumers_memory() -> None:
    small = make_plan(_cpu_policy(1024), _fast())
    large = make_plan(_cpu_policy(2048), _fast())
    # 4 busy environments of 1 GB at 80 jobs/s: 0.05 GB-s a job; twice that at 2 GB
    assert small.requests_per_job["lambda_gb_seconds"] == pytest.approx(0.05)
    assert large.requests_per_job["lambda_gb_seconds"] == pytest.approx(0.1)


def test_synth_is_warned_when_only_the_cpu_cannot_carry_the_quota() -> None:
    measured = HttpActionConfig(latency_p50_seconds=0.05, latency_p95_seconds=0.05)
    short = _cpu_policy(256).model_copy(update={"action": measured})
    enough = _cpu_policy(1024).model_copy(update={"action": measured})
    warning = quota_warning(short)
    assert warning is not None
    assert "runs short of CPU" in warning
    assert quota_warning(enough) is None


def test_the_command_takes_the_cpu_per_job() -> None:
    runner = CliRunner()
    args = ["plan", "--latency-p50", "0.01", "--config", "sweeper.toml", "--parallel-calls", "4"]
    assert runner.invoke(main, args, prog_name="sweeper").exit_code == 0
    heavy = runner.invoke(main, [*args, "--cpu-ms", "40"], prog_name="sweeper")
    assert heavy.exit_code == 1
    assert "runs short of CPU" in heavy.output
    bad = runner.invoke(main, [*args, "--cpu-ms", "-1"], prog_name="sweeper")
    assert bad.exit_code == 2
    assert "Traceback" not in bad.output


@pytest.mark.parametrize(
    ("args", "shown"),
    [
        (
            ["--policy", "one-scope", "--memory-mb", "512"],
            [
                "512 MB = 0.289 vCPU an environment: 81.04 jobs/s at most",
                "memory 596 MB",
                "raise consumer.memory_mb to 596 or environments to 5",
            ],
        ),
        (
            ["--policy", "ten-scopes", "--scopes", "10", "--memory-mb", "512"],
            ["202.6 jobs/s at most", "raise consumer.memory_mb to 1192 or environments to 24"],
        ),
    ],
)
def test_the_docs_cpu_example_is_what_the_command_prints(args: list[str], shown: list[str]) -> None:
    config = ["plan", "--config", "docs/examples/plan-real-rates.toml"]
    result = CliRunner().invoke(main, [*config, *args], prog_name="sweeper")
    assert result.exit_code == 1
    for text in shown:
        assert text in result.output


def test_parallel_calls_are_never_recommended_past_what_a_policy_may_set() -> None:
    # Given 4 environments and a vendor at 0.5 s (p95 0.6 s): 80/s needs 48 calls in flight at
    # the p95, 12 per environment, past the 10 a policy may set
    plan = make_plan(
        _policy(),
        PlanInput(latency_p50_seconds=0.5, latency_p95_seconds=0.6, overhead_seconds=0.0),
    )
    assert plan.needed_in_flight_p95 == 48
    assert plan.recommended_parallel_calls == 10
    assert plan.recommended_environments == 48
    assert "concurrency to 41 (p95: 48; parallel calls stop at 10)" in plan.warnings[0]


def test_the_plan_names_what_each_job_does() -> None:
    result = CliRunner().invoke(
        main, ["plan", "--config", "sweeper.toml", *SHIPPED_PLANS[0]], prog_name="sweeper"
    )
    assert (
        "  action           http DELETE https://api.example.com/v1/tenants/{tenant_id}/objects/"
        "{object_id}, auth none, one call up to 12 s"
    ) in result.output.splitlines()


def test_the_plan_of_an_oauth2_action_with_a_body_says_so_without_its_secret() -> None:
    secret = "arn:aws:secretsmanager:eu-west-1:111122223333:secret:payments-oauth"
    policy = _policy(reserved_concurrency=4, max_concurrency=4).model_copy(
        update={
            "action": HttpActionConfig(
                method="POST",
                api_url="https://payments.example.com",
                url_template="{api_url}/v1/reconciliations",
                body={"payment_id": "{object_id}"},
                auth={"type": "oauth2", "token_url": "{api_url}/oauth/token", "secret_arn": secret},
            )
        }
    )
    plan = make_plan(policy, PlanInput(latency_p50_seconds=0.1, latency_p95_seconds=0.2))
    assert plan.action == (
        "http POST https://payments.example.com/v1/reconciliations, a JSON body, auth oauth2, "
        "one call up to 12 s"
    )


@pytest.mark.parametrize(
    ("action", "expected"),
    [
        (
            {"kind": "http", "api_url": "https://api.example.com"},
            "http DELETE https://api.example.com/v1/tenants/{tenant_id}/objects/{object_id}, "
            "auth none, one call up to 12 s",
        ),
        (
            {"kind": "s3_delete", "bucket": "acme-exports", "key_template": "exports/{object_id+}"},
            # two requests (the listing, then the delete), each with its own timeouts
            "s3_delete: bucket acme-exports, one call up to 24 s",
        ),
        (
            {
                "kind": "lambda",
                "function_arn": "arn:aws:lambda:eu-west-1:111122223333:function:acme-x",
            },
            "lambda: function acme-x, one call up to 32 s",
        ),
        (
            {"kind": "python", "callable": "acme.cleanup:run", "package_path": "pkg"},
            "python: callable acme.cleanup:run, one call up to 30 s",
        ),
    ],
)
def test_the_plan_names_each_kind_and_its_longest_call(
    action: dict[str, str], expected: str, tmp_path: Path
) -> None:
    # Given a policy of each kind, planned at a measured latency
    config = tmp_path / "kinds.toml"
    fields = "\n".join(f'{k} = "{v}"' for k, v in action.items())
    config.write_text(f'[[policies]]\nname = "p"\n\n[policies.action]\n{fields}\n', "utf-8")
    result = CliRunner().invoke(
        main, ["plan", "--config", str(config), "--latency-p50", "0.1"], prog_name="sweeper"
    )
    # Then the plan says which kind it planned, what it calls and its longest call
    assert f"  action           {expected}" in result.output.splitlines(), result.output


def test_an_s3_delete_plan_runs_at_s3s_per_prefix_rate_by_default() -> None:
    policy = Policy.model_validate(
        {
            "name": "p",
            "action": {
                "kind": "s3_delete",
                "bucket": "acme-exports",
                "key_template": "e/{object_id}",
            },
        }
    )
    plan = make_plan(policy, PlanInput(latency_p50_seconds=0.05, latency_p95_seconds=0.1))
    assert policy.quota.limit == 3500
    assert plan.target_rate_per_second == pytest.approx(policy.quota.rate_per_second, rel=1e-3)


# -- several limits ([[limits]]) ------------------------------------------------------------------


def _rate(limit: int, period: float = 1.0) -> dict[str, float]:
    # headroom 1: the vendor's figures, so that the ceilings below are worked by hand
    return {"limit": limit, "period_seconds": period, "headroom": 1.0}


STORE = {"name": "store", "key": "{tenant_id}", "rate": _rate(2)}
APP = {"name": "app", "key": "app", "rate": _rate(40)}


def _limited(
    *limits: Mapping[str, object], latency: float | None = None, **consumer: int
) -> Policy:
    """The issue's marketplace: limits narrowest first, 4 environments of 10 calls at once."""
    action: dict[str, object] = {"api_url": "https://api.example.com"}
    if latency is not None:
        action["latency_p50_seconds"] = latency
    return Policy.model_validate(
        {
            "name": "listings",
            "limits": list(limits),
            "action": action,
            "consumer": {
                "reserved_concurrency": 4,
                "max_concurrency": 4,
                "parallel_calls": 10,
                "batch_size": 10,
                "timeout_seconds": 18,
                **consumer,
            },
        }
    )


def _vendor(latency: float = 0.1, **given: object) -> PlanInput:
    return PlanInput(
        latency_p50_seconds=latency,
        latency_p95_seconds=latency,
        overhead_seconds=0.0,
        **given,  # type: ignore[arg-type]
    )


def test_fifty_stores_at_2_per_second_are_held_to_the_apps_40_and_the_plan_says_app_binds() -> None:
    # Given 2/s per store and 40/s for the app, 50 stores busy, consumers good for 400/s
    plan = make_plan(_limited(STORE, APP), _vendor(scopes=50))
    # Then the stores allow 100/s, the app 40/s: the plan is for 40/s, bound by the app
    store, app = plan.limits
    assert (store["name"], store["keys"], store["ceiling_per_second"]) == ("store", 50, 100.0)
    assert (app["name"], app["keys"], app["ceiling_per_second"]) == ("app", 1, 40.0)
    assert plan.target_rate_per_second == pytest.approx(40.0)
    assert plan.throughput_per_second == pytest.approx(40.0)
    assert plan.binding == "app"
    # And each limit says how much of it the plan uses
    assert (store["used"], app["used"]) == (0.4, 1.0)
    # And the slots a batch waits for and the calls in flight follow the 40/s, not the 100/s:
    # each store asked 0.8/s of its 2/s, a call waits 0.4 x 0.5 / 2 = 0.1 s for its store's
    # slot besides its 0.1 s at the vendor: 40 x 0.2 = 8 in flight
    assert plan.batch_slots_seconds == pytest.approx(10 * 4 / 40)
    assert plan.needed_in_flight == 8
    assert plan.warnings == []


def test_ten_stores_at_2_per_second_bind_below_the_apps_40() -> None:
    plan = make_plan(_limited(STORE, APP), _vendor(scopes=10))
    store, app = plan.limits
    assert plan.binding == "store"
    assert plan.target_rate_per_second == pytest.approx(20.0)
    assert (store["used"], app["used"]) == (1.0, 0.5)


def test_a_concurrency_cap_allows_its_calls_in_flight_over_the_service_time() -> None:
    # Given 10 accounts at 5/s each, at most 10 calls at the vendor at once for the app, and a
    # vendor at 0.3 s
    account = {"name": "account", "key": "{tenant_id}", "rate": _rate(5)}
    cap = {"name": "concurrent", "key": "app", "max_in_flight": 10}
    policy = _limited(account, cap, reserved_concurrency=10, max_concurrency=10)
    plan = make_plan(policy, _vendor(0.3, scopes=10))
    # Then the cap allows 10 / 0.3 = 33.3 calls/s: it binds, not the accounts' 50/s
    accounts, concurrent = plan.limits
    assert accounts["ceiling_per_second"] == pytest.approx(50.0)
    assert concurrent["in_flight_per_second"] == pytest.approx(33.33, abs=0.01)
    assert concurrent["bound"] == "in flight"
    assert plan.binding == "concurrent"
    assert plan.target_rate_per_second == pytest.approx(33.333, abs=0.001)
    # and the threads hold the 10 at the vendor and the calls waiting for their account's slot
    # (each account asked 3.33/s of its 5/s: 0.667 x 0.2 / 2 = 0.067 s): 33.3 x 0.367 = 13
    assert plan.needed_in_flight == 13
    assert plan.warnings == []
    # And one account at 100/s under that cap is never reached: the plan warns
    fast = _limited({**account, "rate": _rate(100)}, cap, reserved_concurrency=10)
    (warning,) = make_plan(fast, _vendor(0.3)).warnings
    assert warning == (
        "limit account of policy listings is never reached: it allows 100.0/s a key, but every "
        "call under one of its keys is under one key of limit concurrent, which allows 33.3/s "
        "(10 in flight)"
    )


def test_consumers_that_complete_less_than_every_limit_bind_and_warn_with_the_limit() -> None:
    # Given one environment of one call at 0.1 s, each call waiting for its store's slot
    # (at X/s, each of 50 stores asked X/50 a second of its 2: 0.5^2 / 100 = 0.0025 X s): it
    # carries X = 1 / (0.1 + 0.0025 X), 8.28 jobs/s under the app's 40
    policy = _limited(STORE, APP, reserved_concurrency=1, max_concurrency=2, parallel_calls=1)
    plan = make_plan(policy, _vendor(scopes=50, cpu_seconds_per_job=0.0))
    assert plan.binding == "consumers"
    assert plan.throughput_per_second == pytest.approx(8.28)
    # Then one warning says so (the binding app limit is not warned about twice)
    (warning,) = plan.warnings
    assert "cannot reach its quota" in warning
    assert "against a rate of 40.0/s (limit app)" in warning
    assert "  binds            the consumers, 8.28 jobs/s" in render(plan.as_dict())


def test_a_policy_without_limits_plans_and_prints_its_quota_as_its_one_limit() -> None:
    plan = make_plan(_policy(parallel_calls=4), _vendor())
    (quota,) = plan.limits
    assert (quota["name"], quota["key"], quota["ceiling_per_second"]) == ("quota", "{policy}", 80.0)
    assert plan.binding == "quota"
    lines = render(plan.as_dict())
    assert "  rate             80.0/s (the smallest limit's ceiling)" in lines
    assert "  limit quota      80.0/s a key ({policy}) x 1 key = 80.0/s; 1.0 used" in lines
    assert "  binds            limit quota, 80.0/s" in lines


def test_a_params_key_spans_the_scopes_unless_told_and_a_constant_key_one() -> None:
    account = {"name": "account", "key": "{params.account}", "rate": _rate(5)}
    host = {"name": "host", "key": "{host}", "rate": _rate(100)}
    policy = _limited(STORE, account, host)
    store, by_default, one = make_plan(policy, _vendor(scopes=20)).limits
    assert (store["keys"], by_default["keys"], one["keys"]) == (20, 20, 1)
    _, told, _ = make_plan(policy, _vendor(scopes=20, keys={"account": 3})).limits
    assert (told["keys"], told["ceiling_per_second"]) == (3, 15.0)
    # And keys for a limit it does not list, the first (its scopes) or a constant are refused
    for keys, says in [
        ({"nope": 2}, "does not list: ['nope'] (its limits are store, account, host)"),
        ({"store": 2}, "its keys are the scopes, give those instead"),
        ({"host": 2}, "has one key"),
    ]:
        with pytest.raises(ConfigError, match=re.escape(says)):
            make_plan(policy, _vendor(keys=keys))


def _limits_file(tmp_path: Path) -> str:
    # The marketplace at the default headroom (1 / 1.06 for a 1 s window)
    config = tmp_path / "listings.toml"
    config.write_text(
        '[[policies]]\nname = "listings"\n\n'
        '[[policies.limits]]\nname = "store"\nkey = "{tenant_id}"\n'
        "rate = { limit = 2, period_seconds = 1 }\n\n"
        '[[policies.limits]]\nname = "app"\nkey = "app"\n'
        "rate = { limit = 40, period_seconds = 1 }\n\n"
        '[policies.action]\napi_url = "https://api.example.com"\n\n'
        "[policies.consumer]\nreserved_concurrency = 4\nmax_concurrency = 4\n"
        "parallel_calls = 10\ntimeout_seconds = 18\n",
        "utf-8",
    )
    return str(config)


def test_the_command_says_which_limit_binds_where_it_once_planned_94_per_second(
    tmp_path: Path,
) -> None:
    args = ["plan", "--config", _limits_file(tmp_path), "--latency-p50", "0.1", "--scopes", "50"]
    result = CliRunner().invoke(main, args, prog_name="sweeper")
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert "  rate             37.72/s (the smallest limit's ceiling)" in lines
    assert "  limit store      1.886/s a key ({tenant_id}) x 50 keys = 94.3/s; 0.4 used" in lines
    assert "  limit app        37.72/s a key (app) x 1 key = 37.72/s; 1.0 used" in lines
    assert "  binds            limit app, 37.72/s" in lines
    # And docs/configuration.md shows what it prints
    docs = Path("docs/configuration.md").read_text(encoding="utf-8").splitlines()
    for line in lines[2:6]:
        assert line in docs, line
    as_json = CliRunner().invoke(main, [*args, "--json"], prog_name="sweeper")
    plan = json.loads(as_json.output)
    assert plan["binding"] == "app"
    assert [limit["name"] for limit in plan["limits"]] == ["store", "app"]


def test_the_command_takes_keys_per_limit_and_refuses_a_malformed_one(tmp_path: Path) -> None:
    config = _limits_file(tmp_path)
    base = ["plan", "--config", config, "--latency-p50", "0.1"]
    bad = CliRunner().invoke(main, [*base, "--keys", "store"], prog_name="sweeper")
    assert bad.exit_code == 2
    assert "LIMIT=N" in bad.output
    unknown = CliRunner().invoke(main, [*base, "--keys", "other=2"], prog_name="sweeper")
    assert unknown.exit_code != 0
    assert "does not list: ['other']" in unknown.output
    assert "Traceback" not in unknown.output + bad.output


def test_a_limit_held_under_a_tighter_one_key_of_another_is_never_reached() -> None:
    # Given a store limit of 50/s under the app's 40/s: one store never gets past the app's 40
    wide_store = {**STORE, "rate": _rate(50)}
    (warning,) = limit_warnings(_limited(wide_store, APP))
    assert warning.startswith("limit store of policy listings is never reached")
    assert "under one key of limit app, which allows 40.0/s" in warning
    # And two app-wide limits: the wider is never reached
    host = {"name": "host", "key": "{host}", "rate": _rate(30)}
    (warning,) = limit_warnings(_limited(STORE, APP, host))
    assert warning.startswith("limit app of policy listings is never reached")
    # But 2/s per store under the app's 40/s depends on how many stores are busy: not warned
    assert limit_warnings(_limited(STORE, APP)) == []


def test_a_limit_whose_key_another_policy_holds_too_is_not_judged_by_one_policys_limits() -> None:
    # Given the app's 40/s under a vendor limit of 30/s for the policy ({policy}: one key)
    vendor = {"name": "vendor", "key": "{policy}", "rate": _rate(30)}
    policy = _limited(STORE, vendor, APP)
    (warning,) = limit_warnings(policy)
    assert warning.startswith("limit app of policy listings is never reached")
    # When another policy holds the app limit too, their calls add up: not judged
    other = policy.model_copy(update={"name": "listings-archive"})
    assert limit_warnings(policy, sharing=[other]) == []
    # And a policy of its own app key leaves it judged
    apart = _limited(STORE, vendor, {**APP, "key": "other-app"}).model_copy(
        update={"name": "elsewhere"}
    )
    assert len(limit_warnings(policy, sharing=[apart])) == 1


def test_a_limit_beyond_what_the_consumers_complete_is_never_reached() -> None:
    # Given one environment of 2 calls at a measured 0.1 s: about 16 jobs/s with the overhead
    slow = _limited(
        STORE, APP, latency=0.1, reserved_concurrency=1, max_concurrency=2, parallel_calls=2
    )
    (warning,) = limit_warnings(slow)
    assert warning.startswith("limit app of policy listings is never reached: it allows 40.0/s")
    assert "the consumers complete at most 15.4 jobs/s" in warning
    # And 4 of 10 calls complete 300/s: reached
    assert limit_warnings(_limited(STORE, APP, latency=0.1)) == []
    # And without a measured latency the consumers are not judged
    unmeasured = _limited(STORE, APP, reserved_concurrency=1, max_concurrency=2, parallel_calls=2)
    assert limit_warnings(unmeasured) == []


def test_an_app_limit_shared_by_two_policies_counts_both_policies_consumers() -> None:
    slow = _limited(
        STORE, APP, latency=0.1, reserved_concurrency=1, max_concurrency=2, parallel_calls=2
    )
    other = slow.model_copy(update={"name": "listings-archive"})
    # Two policies of 15.4 jobs/s each under one app's 40/s: still short
    (warning,) = limit_warnings(slow, sharing=[other])
    assert "consumers with the policies that share its key complete at most 30.8" in warning
    # Three are enough
    third = slow.model_copy(update={"name": "listings-drafts"})
    assert limit_warnings(slow, sharing=[other, third]) == []
    # And a sharer without a measured latency leaves it unjudged
    unmeasured = _limited(STORE, APP, reserved_concurrency=1, max_concurrency=2).model_copy(
        update={"name": "x"}
    )
    assert limit_warnings(slow, sharing=[unmeasured]) == []


def test_a_rate_with_a_slack_plans_at_the_headroom_the_slack_leaves_and_says_so() -> None:
    # Given one scope at 100/s with a slack of 0.5 s, under a cap of 10 calls in flight
    policy = Policy.model_validate(
        {
            "name": "capped",
            "limits": [
                {
                    "name": "scope",
                    "key": "{policy}",
                    "rate": {"limit": 100, "period_seconds": 1, "slack_seconds": 0.5},
                },
                {"name": "vendor", "key": "vendor", "max_in_flight": 10},
            ],
            "consumer": {
                "reserved_concurrency": 4,
                "max_concurrency": 4,
                "parallel_calls": 10,
                "batch_size": 100,
                "batch_window_seconds": 1,
                "timeout_seconds": 60,
                "memory_mb": 1769,
            },
        }
    )
    plan = make_plan(policy, PlanInput(latency_p50_seconds=0.3, latency_p95_seconds=0.58))
    # Then the scope's ceiling is its rate at h = 1 / 1.56, and the cap still binds
    scope = plan.limits[0]
    assert scope["rate_per_second"] == pytest.approx(100 * 0.641)
    assert plan.binding == "vendor"
    # And the plan says what the slack costs: the rate without it beside
    assert plan.as_dict()["slack"] == [
        {
            "limit": "scope",
            "slack_seconds": 0.5,
            "rate_per_second": pytest.approx(64.1),
            "without_slack_per_second": pytest.approx(94.3),
        }
    ]
    lines = render(plan.as_dict())
    assert any(line.startswith("  slack scope") and "94.3/s without" in line for line in lines)


def test_a_plan_without_a_slack_says_nothing_of_it() -> None:
    plan = make_plan(_policy(), PlanInput(latency_p50_seconds=0.01, latency_p95_seconds=0.01))
    assert "slack" not in plan.as_dict()
    assert not any("slack" in line for line in render(plan.as_dict()))

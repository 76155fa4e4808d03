"""The rate benchmark's per-job figures: AWS requests by service and cost per million jobs."""

from __future__ import annotations

import os

import pytest

from sweeper_bench.rate import (
    Scenario,
    _busy_share,
    _consumer_cpu,
    _cores_needed,
    _costs,
    _cpu_per_job,
    _cpu_ticks,
    _diff,
    _per_second,
)
from sweeper_tools.planning.plan import Prices


def test_requests_per_job_and_cost_come_from_the_counted_requests() -> None:
    # Given 100 settled jobs and the requests the stand-in counted for them
    requests = {
        "dynamodb:PutItem": 100,  # idempotency: saved in progress
        "dynamodb:UpdateItem": 140,  # idempotency completed (100) + limiter blocks (40)
        "dynamodb:UpdateItem:condition_failed": 10,  # of those 140: counted once, not again
        "dynamodb:GetItem": 60,  # gate re-checks
        "dynamodb:Scan": 20,  # the producer's closed-gates read
        "sqs:ReceiveMessage": 30,
        "sqs:DeleteMessageBatch": 10,
        "sqs:SendMessageBatch": 10,
    }
    # When the figures are computed
    figures = _costs(
        requests,
        settled=100,
        consumer_invocations=2,
        consumer_seconds=10.0,
        producer_runs=20,
    )
    # Then writes and reads are told apart, and each service is per settled job
    assert figures["dynamodb_writes_per_job"] == 2.4
    assert figures["dynamodb_failed_conditional_writes_per_job"] == 0.1
    assert figures["dynamodb_reads_per_job"] == 0.8
    assert figures["aws_requests_per_job"] == {
        "sqs": 0.5,
        "dynamodb": 3.2,
        "lambda_consumer_invocations": 0.02,
    }
    prices = Prices()
    cost = figures["cost_per_million_jobs_usd"]
    assert cost["dynamodb"] == pytest.approx(
        round(2.4 * prices.dynamodb_per_million_writes + 0.8 * prices.dynamodb_per_million_reads, 2)
    )
    assert cost["sqs"] == pytest.approx(round(0.5 * prices.sqs_per_million_requests, 2))
    # 10 s of 512 MB over 100 jobs: 0.05 GB-s per job
    assert figures["consumer_gb_seconds_per_job"] == 0.05
    assert cost["lambda_duration"] == pytest.approx(
        round(0.05 * prices.lambda_per_gb_second * 1e6, 2)
    )
    assert cost["total"] == pytest.approx(
        cost["dynamodb"] + cost["sqs"] + cost["lambda_duration"] + cost["lambda_requests"], abs=0.02
    )


def test_a_batch_get_is_one_read_request_billed_one_read_unit_per_key() -> None:
    # Given 100 settled jobs whose gates were read by 10 GetItems and 20 BatchGetItems of 50 keys
    requests = {
        "dynamodb:GetItem": 10,
        "dynamodb:BatchGetItem": 20,
        "dynamodb:BatchGetItem:keys": 50,
        "dynamodb:UpdateItem": 100,
    }
    # When the figures are computed
    figures = _costs(
        requests, settled=100, consumer_invocations=1, consumer_seconds=1.0, producer_runs=1
    )
    # Then 30 read requests, billed as 60 read units
    assert figures["dynamodb_reads_per_job"] == 0.3
    assert figures["dynamodb_read_units_per_job"] == 0.6
    assert figures["aws_requests_per_job"]["dynamodb"] == 1.3
    prices = Prices()
    assert figures["cost_per_million_jobs_usd"]["dynamodb"] == pytest.approx(
        round(1.0 * prices.dynamodb_per_million_writes + 0.6 * prices.dynamodb_per_million_reads, 2)
    )


def test_a_scenario_counts_only_its_own_requests() -> None:
    before = {"sqs:CreateQueue": 2, "dynamodb:PutItem": 10}
    after = {"sqs:CreateQueue": 2, "dynamodb:PutItem": 15, "sqs:ReceiveMessage": 3}
    assert _diff(after, before) == {"dynamodb:PutItem": 5, "sqs:ReceiveMessage": 3}
    assert _diff(None, before) is None  # moto counts nothing


def test_calls_are_counted_in_each_second_from_the_first() -> None:
    assert _per_second((10.0, 10.5, 11.2, 13.9)) == [2, 1, 0, 1]
    assert _per_second(()) == []


def test_the_machines_busy_share_is_busy_ticks_over_all_ticks_between_two_readings() -> None:
    # Given two readings of the machine's CPU ticks (busy, total)
    # Then the share is the busy part of the ticks that passed, and no reading gives none
    assert _busy_share((100, 1_000), (550, 1_500)) == 0.9
    assert _busy_share(None, (550, 1_500)) is None
    assert _busy_share((100, 1_000), (100, 1_000)) is None  # no time passed
    # and this machine's reading, where there is one, is two counts with busy within total,
    # and the ticks its host took (steal) within the same total
    reading, stolen = _cpu_ticks()
    if reading is not None and stolen is not None:
        busy, total = reading
        assert 0 <= busy <= total
        assert 0 <= stolen[0] <= stolen[1] == total


def test_the_cores_needed_are_cpu_per_job_times_the_quotas_calls_per_second() -> None:
    # Given 10 ms of CPU per job, ten scopes at 250 calls per 5 s each (500 calls/s in all)
    scenario = Scenario("ten", "shared", 250, 5.0, None, scopes=10)
    figures = _cores_needed(0.010, scenario)
    # Then the stack needs 5 cores to carry the quota, and a missing reading gives no figure
    assert figures["machine_cpu_ms_per_job"] == 10.0
    assert figures["cores_needed_at_quota_here"] == 5.0
    assert _cores_needed(None, scenario) == {}


def test_cpu_per_job_is_the_busy_ticks_in_seconds_over_the_settled_jobs() -> None:
    tick = os.sysconf("SC_CLK_TCK")
    # Given 2 busy seconds of ticks while 400 jobs settled: 5 ms per job
    assert _cpu_per_job((0, 0), (2 * tick, 8 * tick), 400) == pytest.approx(0.005)
    # and nothing settled, or no reading: no figure
    assert _cpu_per_job((0, 0), (2 * tick, 8 * tick), 0) is None
    assert _cpu_per_job(None, (2 * tick, 8 * tick), 400) is None


def test_the_consumers_cpu_per_job_and_the_cores_they_alone_need() -> None:
    # Given the consumer environments used 4 s of CPU while 500 jobs settled: 8 ms a job
    scenario = Scenario("ten", "shared", 50, 1.0, None, scopes=10)
    figures = _consumer_cpu(4.0, 500, scenario)
    # Then at ten scopes of 50/s they alone need 500 x 0.008 = 4 cores
    assert figures == {"consumer_cpu_ms_per_job": 8.0, "consumer_cores_needed_at_quota_here": 4.0}
    assert _consumer_cpu(4.0, 0, scenario) == {}


def test_lambda_duration_is_priced_at_the_scenarios_memory() -> None:
    requests = {"sqs:ReceiveMessage": 10}
    at = {
        m: _costs(
            requests,
            settled=100,
            consumer_invocations=1,
            consumer_seconds=10.0,
            producer_runs=1,
            memory_mb=m,
        )
        for m in (512, 1024)
    }
    # 10 s over 100 jobs: 0.05 GB-s per job at 512 MB, twice that at 1,024 MB
    assert at[512]["consumer_gb_seconds_per_job"] == 0.05
    assert at[1024]["consumer_gb_seconds_per_job"] == 0.1

"""The rate benchmark's baselines run on the local stack as a consumer handler of their own: the
layer's consumer, unchanged, asking the baseline for slots instead of the shared limiter."""

from __future__ import annotations

import pytest

from sweeper.config import ConsumerConfig, HttpActionConfig, Policy, Quota
from sweeper_bench import baseline_consumer
from sweeper_local.pipeline import LocalPipeline
from sweeper_local.stack import LocalStack
from tests.conftest import PgServer

pytestmark = pytest.mark.integration


def test_the_per_worker_baseline_settles_every_job_and_never_writes_the_shared_limiter(
    pg_server: PgServer,
) -> None:
    # Given the local pipeline whose consumer is the benchmark's per-worker baseline
    url = pg_server.create_database("sweeper_bench_baseline")
    policy = Policy(
        name="baseline",
        quota=Quota(limit=1000, period_seconds=1),
        consumer=ConsumerConfig(reserved_concurrency=2, max_concurrency=2, timeout_seconds=30),
        lease_seconds=120,
        producer_budget_seconds=30,
    )
    with LocalStack(database_url=url) as stack:
        assert stack.api_url is not None
        action = HttpActionConfig(api_url=stack.api_url, allow_plain_http=True)
        policy = policy.model_copy(update={"action": action})
        with LocalPipeline(
            stack,
            policy,
            prefix="sweeper-baseline",
            log_prefix="sweeper-baseline-",
            extra_env={baseline_consumer.WORKERS_VARIABLE: "2"},
            consumer_handler=baseline_consumer.HANDLERS["per_worker"],
        ) as run:
            # When a scheduled run releases ten obligations
            run.seed(10, 2)
            assert run.tick() is not None
            # Then every job is settled
            assert run.run(lambda: run.final() == 10, timeout_seconds=120)
            table = run.resources.limiter_table
            items = stack.aws.dynamodb().scan(TableName=table)["Items"]
    # and the shared limiter's table holds nothing: no slot was taken from it
    assert items == []

"""The plan's DynamoDB writes a job come from the consumer's rules: the idempotency record's two
writes of under 1 KB each, and a limiter write per block of slots."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from sweeper.consumer import dynamodb_idempotent, guard_with_idempotency, job_idempotency_config
from sweeper.models import ActionCall, ActionResult, OutcomeClass
from sweeper_tools.planning.plan import PlanInput, make_plan
from sweeper_tools.planning.writes import (
    FAILED_LIMITER_WRITES_PER_JOB,
    IDEMPOTENCY_WRITES_PER_JOB,
    dynamodb_writes_per_job,
    limiter_block,
)
from sweeper_tools.policy_file import load_config

SHIPPED = Path(__file__).resolve().parents[2] / "sweeper.toml"
WRITE_UNIT_BYTES = 1024
#: The largest settled result a record can hold: every field at its longest.
LARGEST = ActionResult(
    outcome=OutcomeClass.ACCEPTED,
    status_code=429,
    code="c" * 64,
    retry_after_seconds=1234567.891011,
    limit_value="v" * 64,
)
JOB = ActionCall(
    key="k" * 200,
    idempotency_key="k" * 200 + "#12",
    policy="exports",
    policy_version=1,
    tenant_id="t" * 256,
    object_id="o" * 256,
    scope="s",
    attempt=7,
    batch_id="b-1",
)


class LambdaTime:
    def get_remaining_time_in_millis(self) -> int:
        return 18_000


class RecordingClient:
    """A DynamoDB client that keeps the item Powertools writes, as the table would hold it."""

    def __init__(self) -> None:
        self.item: dict[str, dict[str, str]] = {}
        self.writes: list[int] = []  # the item's size after each write

    def put_item(self, **kwargs: Any) -> dict[str, Any]:
        self.item = dict(kwargs["Item"])
        self.writes.append(_item_bytes(self.item))
        return {}

    def update_item(self, **kwargs: Any) -> dict[str, Any]:
        before = _item_bytes(self.item)
        names, values = kwargs["ExpressionAttributeNames"], kwargs["ExpressionAttributeValues"]
        for assignment in kwargs["UpdateExpression"].removeprefix("SET ").split(", "):
            name, value = assignment.split(" = ")
            self.item[names[name]] = values[value]
        self.writes.append(max(before, _item_bytes(self.item)))  # billed: the larger
        return {}


def _item_bytes(item: dict[str, dict[str, str]]) -> int:
    """DynamoDB's item size: each attribute's name and value in bytes (a number counted as its
    digits plus one, above what DynamoDB bills for it)."""
    return sum(
        len(name.encode()) + len(value.get("S", value.get("N", "")).encode()) + 1
        for name, value in item.items()
    )


def test_the_idempotency_record_costs_two_write_units_a_job() -> None:
    # Given the consumer's idempotency over a client that keeps what Powertools writes
    client = RecordingClient()
    config = job_idempotency_config(expires_after_seconds=7 * 86_400)
    # as the handler does: the record then holds an in-progress expiry too
    config.register_lambda_context(LambdaTime())  # type: ignore[arg-type]
    idempotent = dynamodb_idempotent("table", "a-policy-name-of-some-length", config, client)  # type: ignore[arg-type]
    guarded = guard_with_idempotency(lambda job, timeout: LARGEST, idempotent)
    # When a job's call settles with the largest result a record holds
    assert guarded(JOB, lambda: 5.0) == LARGEST
    # Then two writes (in progress, completed), each of one write unit
    assert len(client.writes) == IDEMPOTENCY_WRITES_PER_JOB
    assert all(size <= WRITE_UNIT_BYTES for size in client.writes), client.writes


def test_a_limiter_block_covers_a_share_of_the_threads_within_its_span() -> None:
    (policy,) = load_config(SHIPPED).policies  # 32 calls/s a scope: 7 slots within 0.2 s
    assert limiter_block(policy, 4) == 2  # 30 % of 4 threads, rounded up
    assert limiter_block(policy, 10) == 3
    assert limiter_block(policy, 1) == 1
    slow = policy.model_copy(update={"quota": policy.quota.model_copy(update={"limit": 5})})
    assert limiter_block(slow, 10) == 1  # 4/s: one slot within the 0.2 s span


def test_the_plans_writes_a_job_are_the_rules() -> None:
    # Given the shipped policy (4 calls at once an environment): blocks of 2 slots
    (policy,) = load_config(SHIPPED).policies
    plan = make_plan(policy, PlanInput(latency_p50_seconds=0.2, latency_p95_seconds=0.2))
    # Then 2 idempotency writes, half a limiter write and the failed conditional writes
    expected = 2 + 1 / 2 + FAILED_LIMITER_WRITES_PER_JOB
    assert dynamodb_writes_per_job(policy, 4) == pytest.approx(expected)
    assert plan.requests_per_job["dynamodb_writes"] == pytest.approx(expected)


def test_the_rule_is_near_the_measured_writes_a_job() -> None:
    """docs/benchmarks.md, "At real rates": one scope at 100/s, ten threads (2.33 measured);
    ten scopes at 10/s with the headroom's spacing (2.65 measured)."""
    (policy,) = load_config(SHIPPED).policies
    fast = policy.model_copy(
        update={"quota": policy.quota.model_copy(update={"limit": 100, "headroom": 1.0})}
    )
    assert dynamodb_writes_per_job(fast, 10) == pytest.approx(2.33, abs=0.15)
    slow = policy.model_copy(
        update={"quota": policy.quota.model_copy(update={"limit": 10, "headroom": 0.94})}
    )
    assert dynamodb_writes_per_job(slow, 10) == pytest.approx(2.65, abs=0.1)

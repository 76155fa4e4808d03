"""A budget through the consumer, on a fake clock: the real ledger, the real limiter table on
the local stand-in, every wait exact and none slept (sweeper.admission.budget).

A budget of 600 calls per 60 s "day", 20 % kept for others: sweeper spends at most 480 in a
window, one every 0.125 s while demand exceeds it, and a call past them waits for the next.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest
from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType

from sweeper.admission.budget import budget_rule
from sweeper.config import LimitConfig, Policy, Quota, ThrottleConfig
from sweeper.config.budget import BudgetConfig
from sweeper.consumer import ConsumerDeps, process_batch
from sweeper.ledger.store import Ledger
from sweeper.limiter import DynamoLimiter
from sweeper.limiter.budget import BudgetBook, BudgetRule
from sweeper.models import JobMessage, JobStatus, NewJob
from sweeper.observability import Metric
from sweeper_local.aws import LocalAws
from sweeper_local.lambda_runtime import LocalLambdaContext
from sweeper_local.metric_totals import CountingSink
from tests.integration.test_consumer_waits import (
    START,
    Calls,
    FakeTime,
    Hidden,
    Rig,
    ScriptedLimiter,
)

pytestmark = pytest.mark.integration

DAY = 60.0  # the budget's "day"
BUDGET = BudgetConfig(limit=600, period_seconds=DAY, reserve_fraction=0.2)
SPENDABLE = 480
assert START % DAY == 0  # the fake clock starts a window


def budget_policy() -> Policy:
    return Policy(
        name="exports",
        limits=[
            LimitConfig(
                name="org",
                key="{policy}:{tenant_id}",
                rate=Quota(limit=100, period_seconds=1.0),  # far above the budget's pace
                budget=BUDGET,
            )
        ],
        throttle=ThrottleConfig(max_wait_seconds=2.0, reopen_jitter_seconds=0.5),
    )


class BudgetRig:
    """A consumer whose batches come from the ledger and whose limiter is the real table."""

    def __init__(self, ledger: Ledger, aws: LocalAws, table: str, jobs: int) -> None:
        self.ledger = ledger
        self.time = FakeTime()
        self.policy = budget_policy()
        self.calls = Calls(self.time)
        self.hidden = Hidden()
        self.metrics = CountingSink()
        self.limiter = DynamoLimiter(aws.dynamodb(), table, clock=lambda: self.time.now)
        now = self.time.utc()
        new = [NewJob("t1", f"o{i}", now) for i in range(jobs)]
        ledger.schedule(self.policy.name, self.policy.version, lambda j: "exports:t1", new, now)
        self.batches = 0
        self.keys: list[str] = []  # the operation keys claimed, in order

    def deliver_batch(self, size: int = 10) -> int:
        """Claim up to `size` due jobs and deliver them as one batch; how many were claimed."""
        self.batches += 1
        owner = f"b-{self.batches}"
        claimed = self.ledger.claim(
            self.policy.name, owner, self.time.utc(), timedelta(seconds=900), size
        )
        records: list[dict[str, Any]] = []
        self.keys += [job.operation_key for job in claimed]
        for i, job in enumerate(claimed):
            body = JobMessage.for_claim(self.policy.name, job, owner).to_body()
            records.append(
                {
                    "messageId": f"{owner}-{i}",
                    "receiptHandle": f"{owner}-{i}",
                    "body": body,
                    "attributes": {},
                    "messageAttributes": {},
                    "eventSource": "aws:sqs",
                }
            )
        if records:
            process_batch(
                {"Records": records},
                LocalLambdaContext(function_name="sweeper-consumer", timeout_seconds=900),
                self.deps(),
                BatchProcessor(event_type=EventType.SQS, raise_on_entire_batch_failure=False),
                call_timeout=lambda: 600.0,
            )
        return len(claimed)

    def deps(self) -> ConsumerDeps:
        """The fake-clock consumer's (test_consumer_waits.Rig), with the real limiter."""
        scripted = ScriptedLimiter(self.time, [])
        rig = Rig(
            self.ledger, self.time, scripted, self.calls, self.hidden, self.metrics, self.policy
        )
        return replace(rig.deps(), limiter=self.limiter)


def test_a_budget_is_spent_evenly_and_never_past_its_reserve(
    ledger: Ledger, local_aws: LocalAws, table: str
) -> None:
    # Given 600 due jobs, more than one window's 480, under a budget of 600 per 60 s, 0.2 kept
    rig = BudgetRig(ledger, local_aws, table, jobs=600)
    # When batches of ten are delivered one after another until the first window is over
    while rig.time.now < START + DAY + 1.0 and rig.deliver_batch():
        pass
    sent = rig.calls.sent_at
    first = [t for t in sent if t < START + DAY]
    # Then the first window held exactly its 480 calls: the reserve was never spent
    assert len(first) == SPENDABLE
    # And the fleet's count, the window's item in the limiter table, says so too
    in_window = BudgetBook(local_aws.dynamodb(), table, clock=lambda: START + DAY / 2)
    assert in_window.spent("exports:t1", _rule()) == SPENDABLE
    # And at any time from the tenth slot on, the calls made were within 5 % of an even pace
    step = DAY / SPENDABLE
    for k, at in enumerate(first):
        even = (at - START) / step
        if even >= 10:
            assert 0.95 * even <= k + 1 <= 1.05 * even + 1, (k, at - START)
    # And the next window's calls began at its start, paced the same
    later = [t for t in sent if t >= START + DAY]
    assert later
    assert later[0] == pytest.approx(START + DAY, abs=step)
    assert len(later) <= 1.0 / step + 2


def test_a_call_past_the_spent_budget_goes_back_until_the_next_window(
    ledger: Ledger, local_aws: LocalAws, table: str
) -> None:
    # Given a window whose 480 calls are spent (another environment spent them) and a due job,
    # ten seconds into the window
    rig = BudgetRig(ledger, local_aws, table, jobs=1)
    rig.time.now = START + 10.0
    local_aws.dynamodb().update_item(
        TableName=table,
        Key={"pk": {"S": _rule().item_key("exports:t1", rig.time.now)}},
        UpdateExpression="SET spent = :spent, next_us = :next",
        ExpressionAttributeValues={
            ":spent": {"N": str(SPENDABLE)},
            ":next": {"N": str(int((START + DAY) * 1e6))},
        },
    )
    # When it is delivered
    assert rig.deliver_batch() == 1
    # Then it was not called: it went back until the window's end, with the budget's reason
    assert rig.calls.sent_at == []
    assert list(rig.hidden.seconds.values()) == [DAY - 10.0]
    assert rig.metrics.totals.get(Metric.BUDGET_DEFERRALS) == 1
    (key,) = rig.keys
    job = ledger.get(key)
    assert job is not None
    assert (job.status, job.last_error_code) == (JobStatus.LEASED, "wait_budget")


def _rule() -> BudgetRule:
    rule = budget_rule(budget_policy().limits[0])
    assert rule is not None
    return rule

"""Every outcome class over real HTTP (vendor simulator), through the consumer's own paths.

The limiter and gate are the real ones on DynamoDB (moto server); the ledger is PostgreSQL. The
only fake is the recorder of visibility changes, so that the tests can read when each record
was told to come back.
"""

from __future__ import annotations

import dataclasses
import itertools
import random
import time
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, cast

import pytest
from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType
from aws_lambda_powertools.utilities.typing import LambdaContext

from sweeper import runtime
from sweeper.actions.http import HttpAction, HttpActionConfig
from sweeper.config import Policy, RetryConfig, ThrottleConfig
from sweeper.consumer import ConsumerDeps, guard_with_idempotency, process_batch
from sweeper.limiter import DynamoLimiter
from sweeper.models import JobMessage, JobStatus, OutcomeClass
from sweeper.observability import Metric
from sweeper.producer.run import run_producer
from sweeper.sqs_queue import Hide
from sweeper_local.metric_totals import CountingSink
from tests.conftest import Pipeline, load_event

pytestmark = pytest.mark.integration


class RecordingVisibility:
    def __init__(self) -> None:
        self.hidden: dict[str, float] = {}

    def hide_for(self, receipt_handle: str, seconds: float) -> None:
        self.hidden[receipt_handle] = seconds

    def hide_each(self, hides: Sequence[Hide]) -> list[str]:
        self.hidden.update((hide.receipt_handle, hide.seconds) for hide in hides)
        return []


class Harness:
    def __init__(self, p: Pipeline, policy: Policy) -> None:
        self.p = p
        self.policy = policy
        self.visibility = RecordingVisibility()
        self.metrics = CountingSink()
        self.limiter = DynamoLimiter(p.aws.dynamodb(), p.resources.limiter_table)
        self.sleeps: list[float] = []
        runtime.idempotency_config().register_lambda_context(
            cast(LambdaContext, p.lambda_context())
        )
        self.deps = ConsumerDeps(
            policy,
            p.ledger,
            runtime.guarded_call(),
            runtime.utcnow,
            self.metrics,
            self.limiter,
            self.visibility,
            sleep=self._sleep,
            rng=random.Random(7),
        )

    def _sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        time.sleep(seconds)

    def records(self, n: int) -> list[dict[str, Any]]:
        self.p.seed(n)
        run_producer(
            self.policy,
            datetime.now(UTC),
            self.p.ledger,
            runtime.publisher(),
            clock=runtime.utcnow,
            remaining_seconds=lambda: 60.0,
        )
        sqs = self.p.aws.sqs()
        template = load_event("sqs_batch.json")["Records"][0]
        out: list[dict[str, Any]] = []
        while len(out) < n:
            got = sqs.receive_message(QueueUrl=self.p.resources.queue_url, MaxNumberOfMessages=10)
            out += [
                {
                    **template,
                    "messageId": m["MessageId"],
                    "receiptHandle": m["ReceiptHandle"],
                    "body": m["Body"],
                }
                for m in got.get("Messages", [])
            ]
        return out

    def deliver(self, records: list[dict[str, Any]]) -> set[str]:
        processor = BatchProcessor(event_type=EventType.SQS, raise_on_entire_batch_failure=False)
        response = process_batch(
            {"Records": records},
            self.p.lambda_context(),
            self.deps,
            processor,
            call_timeout=lambda: 5.0,
        )
        return {str(item["itemIdentifier"]) for item in response["batchItemFailures"]}

    def redeliver(self, records: list[dict[str, Any]]) -> set[str]:
        """Deliver again when the queue shows them again: the consumer's clock at the latest
        of their jobs' next attempts (the message was hidden until then), or now if later."""
        due = max(self.job(r).next_attempt_at for r in records)
        deps = self.deps
        self.deps = dataclasses.replace(deps, clock=lambda: max(runtime.utcnow(), due))
        try:
            return self.deliver(records)
        finally:
            self.deps = deps

    def job(self, record: dict[str, Any]) -> Any:
        return self.p.ledger.get(JobMessage.model_validate_json(record["body"]).key)


def harness(p: Pipeline, **changes: Any) -> Harness:
    return Harness(p, p.policy.model_copy(update=changes))


def test_absent_objects_succeed_without_an_effect(pipeline: Pipeline) -> None:
    h = harness(pipeline)
    (record,) = h.records(1)
    pipeline.vendor.fail_next(1, 404)
    assert h.deliver([record]) == set()
    job = h.job(record)
    assert (job.status, job.last_outcome) == (JobStatus.SUCCEEDED, OutcomeClass.ABSENT)


def test_a_throttle_closes_the_scope_for_every_consumer_until_retry_after(
    pipeline: Pipeline,
) -> None:
    # Given three records of one scope and a vendor that answers the first with 429, Retry-After 3
    h = harness(pipeline)
    records = h.records(3)
    pipeline.vendor.fail_next(1, 429, retry_after="3")
    before = time.time()
    # When the batch is delivered
    failed = h.deliver(records)
    # Then the vendor saw one call only: the gate closed the scope for the two others
    assert failed == {r["messageId"] for r in records}
    assert pipeline.vendor.audit().calls_total == 1
    state = h.limiter.state("exports")
    assert state.closed_until is not None
    assert before + 3 <= state.closed_until <= time.time() + 3 + 0.1 + 0.01
    # every message comes back when the scope reopens (whole seconds, never later), and the
    # ledger knows when each job may run again; no attempt was counted for waiting
    assert all(1 <= s <= 3 for s in h.visibility.hidden.values())
    for record in records:
        job = h.job(record)
        assert job.status is JobStatus.LEASED
        assert job.attempt_count == 0
        assert job.next_attempt_at.timestamp() >= before + 1
    assert h.metrics.totals[Metric.THROTTLE_EVENTS] == 1
    assert h.metrics.totals[Metric.GATE_DEFERRALS] == 2


def test_an_adaptive_scope_is_called_at_its_found_rate_and_a_429_cuts_it(
    pipeline: Pipeline,
) -> None:
    # Given a policy told only a cap (100/s), not its vendor's quota, from 10/s, halved on a 429
    quota = pipeline.policy.quota.model_copy(
        update={
            "limit": 100,
            "period_seconds": 1.0,
            "headroom": 1.0,
            "adaptive": True,
            "adaptive_floor": 0.1,
            "adaptive_increase": 0.001,
            "adaptive_cut": 0.5,
        }
    )
    h = harness(pipeline, quota=quota)
    records = h.records(4)
    # When a batch of three is called, the calls are a tenth of a second apart (10/s), not 10 ms
    assert h.deliver(records[:3]) == set()
    arrivals = sorted(pipeline.vendor.audit().arrivals)
    assert min(b - a for a, b in itertools.pairwise(arrivals)) >= 0.1 - 0.035 - 0.025
    # When, two seconds later, consumers told to raise it by 50/s each second (so it is at the
    # cap, 100/s) meet a 429, the scope's shared rate is cut, once, by half
    time.sleep(2.0)
    faster = harness(pipeline, quota=quota.model_copy(update={"adaptive_increase": 0.5}))
    pipeline.vendor.fail_next(1, 429, retry_after="1")
    assert faster.deliver(records[3:]) == {records[3]["messageId"]}
    item = pipeline.aws.dynamodb().get_item(
        TableName=pipeline.resources.limiter_table, Key={"pk": {"S": "scope#exports"}}
    )["Item"]
    assert int(item["ar_v"]["N"]) == 2  # set at the floor, then cut once
    assert int(item["ar"]["N"]) == 50_000  # the cap halved, in thousandths of a call per second
    # and the gate is closed for the Retry-After, as for any 429
    assert "closed_until" in item


def test_a_known_quota_keeps_no_adaptive_rate(pipeline: Pipeline) -> None:
    h = harness(pipeline)
    records = h.records(1)
    pipeline.vendor.fail_next(1, 429, retry_after="1")
    h.deliver(records)
    item = pipeline.aws.dynamodb().get_item(
        TableName=pipeline.resources.limiter_table, Key={"pk": {"S": "scope#exports"}}
    )["Item"]
    assert "closed_until" in item
    assert "ar_v" not in item


def test_no_consumer_calls_a_closed_scope_and_a_reopened_one_is_called_at_once(
    pipeline: Pipeline,
) -> None:
    # Given a scope closed for one second (the vendor's clock is this process's monotonic one)
    h = harness(pipeline)
    records = h.records(2)
    until = time.time() + 1.0
    reopens = time.monotonic() + (until - time.time())
    h.limiter.close("exports", until, "throttled")
    # When both records are delivered (the first waits in place, within max_wait)
    assert h.deliver(records) == set()
    # Then the vendor saw no call while the scope was closed, and the first one right after
    audit = pipeline.vendor.audit()
    assert audit.calls_total == 2
    assert min(audit.arrivals) >= reopens - 0.005  # clock conversion slack only
    assert min(audit.arrivals) <= reopens + h.policy.throttle.reopen_jitter_seconds + 1.0
    assert h.sleeps  # it waited in place, not by a queue round trip
    assert h.metrics.totals[Metric.GATE_DEFERRALS] == 1


class TopOfRange(random.Random):
    """Draws the top of every range asked for, so a delay shows the bound it was drawn from."""

    def uniform(self, a: float, b: float) -> float:
        return b


def test_a_transient_failure_backs_off_and_counts_an_attempt(pipeline: Pipeline) -> None:
    h = harness(pipeline, retry=RetryConfig(base_seconds=4, cap_seconds=60))
    h.deps = dataclasses.replace(h.deps, rng=TopOfRange())
    (record,) = h.records(1)
    pipeline.vendor.fail_next(1, 500)
    assert h.deliver([record]) == {record["messageId"]}
    job = h.job(record)
    assert (job.status, job.attempt_count, job.last_outcome, job.last_error_code) == (
        JobStatus.LEASED,
        1,
        OutcomeClass.TRANSIENT,
        "http_500",
    )
    # it comes back after the first backoff (full jitter over [0, base]; this rng draws the top)
    assert h.visibility.hidden[record["receiptHandle"]] == 4.0
    assert job.next_attempt_at - job.updated_at == timedelta(seconds=4)
    # the idempotency record was released: the retry calls again and succeeds
    assert h.redeliver([record]) == set()
    assert h.job(record).status is JobStatus.SUCCEEDED


def test_an_unknown_outcome_retries_with_the_same_key_and_one_effect(pipeline: Pipeline) -> None:
    # Given a vendor that deletes, then never answers (a read timeout after the effect)
    h = harness(pipeline)
    (record,) = h.records(1)
    pipeline.vendor.set_fault_rates(timeout_after_effect_rate=1.0)
    failed = h.deliver([record])
    assert failed == {record["messageId"]}
    job = h.job(record)
    assert (job.last_outcome, job.attempt_count) == (OutcomeClass.UNKNOWN, 1)
    # When it answers again, the retry with the same key is replayed: one effect in all
    pipeline.vendor.set_fault_rates(timeout_after_effect_rate=0.0)
    assert h.redeliver([record]) == set()
    key = JobMessage.model_validate_json(record["body"]).key
    audit = pipeline.vendor.audit()
    assert (audit.calls_by_key[key], audit.effects_by_key[key]) == (2, 1)
    assert h.job(record).status is JobStatus.SUCCEEDED


def test_attempts_exhausted_make_the_job_terminal(pipeline: Pipeline) -> None:
    h = harness(pipeline, max_attempts=2, retry=RetryConfig(base_seconds=0.01, cap_seconds=0.01))
    (record,) = h.records(1)
    pipeline.vendor.fail_next(2, 503)
    assert h.deliver([record]) == {record["messageId"]}
    assert h.redeliver([record]) == set()  # acknowledged: terminal now
    job = h.job(record)
    assert (job.status, job.last_error_code, job.attempt_count) == (
        JobStatus.FAILED,
        "exhausted",
        2,
    )
    assert h.metrics.totals[Metric.EXHAUSTED] == 1


def test_auth_failure_opens_the_circuit_without_burning_the_job(pipeline: Pipeline) -> None:
    h = harness(pipeline, throttle=ThrottleConfig(auth_cooloff_seconds=120))
    records = h.records(2)
    pipeline.vendor.fail_next(1, 401)
    assert h.deliver(records) == {r["messageId"] for r in records}
    assert pipeline.vendor.audit().calls_total == 1
    state = h.limiter.state("exports")
    assert state.reason == "auth"
    assert state.closed(time.time() + 100)
    assert h.metrics.totals[Metric.AUTH_CIRCUIT_OPEN] == 1
    for record in records:
        job = h.job(record)
        assert (job.status, job.attempt_count) == (JobStatus.LEASED, 0)


def test_a_policy_can_reclassify_a_status(pipeline: Pipeline) -> None:
    assert isinstance(pipeline.policy.action, HttpActionConfig)
    action = pipeline.policy.action.model_copy(update={"outcomes": {409: "absent"}})
    h = harness(pipeline, action=action)
    guarded = guard_with_idempotency(HttpAction(action).perform, runtime.idempotent())
    h.deps = dataclasses.replace(h.deps, guarded_call=guarded)
    (record,) = h.records(1)
    pipeline.vendor.fail_next(1, 409)
    assert h.deliver([record]) == set()
    assert h.job(record).last_outcome is OutcomeClass.ABSENT


def test_a_slot_beyond_the_wait_returns_the_record_without_an_attempt(pipeline: Pipeline) -> None:
    h = harness(pipeline, throttle=ThrottleConfig(max_wait_seconds=0.0))
    (record,) = h.records(1)
    for _ in range(5):  # take the scope's next slots, far ahead at 1/s
        h.limiter.reserve("exports", 1.0, horizon=10)
    slow = h.policy.quota.model_copy(update={"limit": 1, "period_seconds": 1.0})
    h.deps = dataclasses.replace(h.deps, policy=h.policy.model_copy(update={"quota": slow}))
    assert h.deliver([record]) == {record["messageId"]}
    assert pipeline.vendor.audit().calls_total == 0
    assert 3 <= h.visibility.hidden[record["receiptHandle"]] <= 5
    assert h.job(record).attempt_count == 0
    assert h.metrics.totals[Metric.LIMITER_DEFERRALS] == 1

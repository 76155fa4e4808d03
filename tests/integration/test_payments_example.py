"""docs/examples/payments.toml end to end on the local stack (issue 24, item 4).

The policy file as shipped, on the stack `sweeper local up` runs: its OAuth2 client made in the
local Secrets Manager and registered with the vendor simulator, the producer ticking, consumers
calling `POST /v1/reconciliations`. Obligations come in with their business date as a param.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import UTC, datetime
from functools import partial
from pathlib import Path

import pytest

from sweeper.config import Policy
from sweeper.ledger.store import Ledger
from sweeper.models import (
    Job,
    JobMessage,
    JobStatus,
    NewJob,
    OutcomeClass,
    operation_key,
    params_digest,
)
from sweeper.scheduling import schedule_jobs
from sweeper_local.background import LocalConsoleStack
from sweeper_local.vendor import PaymentsAudit
from tests.integration.examples import example_stack, simulator, wait_for
from tests.integration.examples import final_jobs as _final

pytestmark = pytest.mark.integration

EXAMPLE = Path(__file__).parents[2] / "docs" / "examples" / "payments.toml"
TICK_SECONDS = 0.5
DEADLINE_SECONDS = 90.0
#: The locked payment's 409s, and the Retry-After they carry.
LOCKED_TIMES, LOCK_RETRY_AFTER_SECONDS = 2, 1

FIRST = [  # (tenant, payment, business date)
    ("acct_1", "pay_1", "2026-11-29"),
    ("acct_1", "pay_1", "2026-11-30"),  # the same payment, another business date
    ("acct_2", "pay_3", "2026-02-30"),  # passes the schema's pattern, but is no date: 422
    ("acct_2", "pay_4", "2026-11-30"),  # its answer is lost after the effect
]
SECOND = [("acct_1", "pay_2", "2026-11-30")]  # locked, after every token expired
#: Obligations of a burst that gets every consumer environment a token of its own.
BURST = 20


@pytest.fixture
def payments(db_url: str) -> Iterator[LocalConsoleStack]:
    with example_stack(EXAMPLE, db_url, TICK_SECONDS) as stack:
        yield stack


def _policy(stack: LocalConsoleStack) -> Policy:
    return stack.policies["payments"].policy


def _schedule(ledger: Ledger, policy: Policy, rows: list[tuple[str, str, str]]) -> list[str]:
    now = datetime.now(UTC)
    jobs = [NewJob(t, p, now, params={"business_date": d}) for t, p, d in rows]
    schedule_jobs(ledger, policy, jobs, now)
    return [operation_key(policy.name, t, p, policy.version, (d,)) for t, p, d in rows]


_wait = partial(wait_for, deadline_seconds=DEADLINE_SECONDS)


def _tokens_in_every_environment(
    stack: LocalConsoleStack, ledger: Ledger, scheduled: list[tuple[str, str, str]]
) -> None:
    """Bursts of obligations until every consumer environment has fetched its token, so that
    the next call of any of them presents a token (then expired), never a first fetch."""
    policy, vendor = _policy(stack), simulator(stack)
    environments = policy.consumer.max_concurrency
    deadline = time.monotonic() + DEADLINE_SECONDS
    burst = 0
    while vendor.payments_audit().tokens_issued < environments:
        assert time.monotonic() < deadline, "a consumer environment never called the vendor"
        burst += 1
        rows = [("acct_3", f"pay_b{burst}_{i}", "2026-11-30") for i in range(BURST)]
        keys = _schedule(ledger, policy, rows)
        scheduled.extend(rows)
        _wait("a burst final", partial(_all_final, ledger, keys))


def _all_final(ledger: Ledger, keys: list[str]) -> bool:
    return len(_final(ledger, keys)) == len(keys)


def _redeliver(stack: LocalConsoleStack, job: Job) -> None:
    """Send a finished job's message again, as SQS may deliver one more than once."""
    message = JobMessage(
        key=job.operation_key,
        policy=job.policy,
        policy_version=job.policy_version,
        tenant_id=job.tenant_id,
        object_id=job.object_id,
        scope=job.scope,
        attempt=0,
        batch_id="redelivered",
        params_digest=params_digest(job.params),
    )
    queue_url = stack.policies[job.policy].resources.queue_url
    stack.stack.aws.sqs().send_message(QueueUrl=queue_url, MessageBody=message.to_body())


def _queue_empty(stack: LocalConsoleStack) -> bool:
    attributes = stack.stack.aws.sqs().get_queue_attributes(
        QueueUrl=stack.policies["payments"].resources.queue_url,
        AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
    )["Attributes"]
    return all(int(n) == 0 for n in attributes.values())


def test_the_payments_example_reconciles_each_payment_and_date_once(
    payments: LocalConsoleStack, db_url: str
) -> None:
    policy, vendor = _policy(payments), simulator(payments)
    ledger = Ledger(db_url)
    try:
        # Given the example's policy on the local stack, and obligations with business dates
        # (one payment's answer to be lost after its effect)
        vendor.payments.lose_answer_once("pay_4")
        first = _schedule(ledger, policy, FIRST)
        # (two dates of one payment: two jobs, their keys naming the date)
        assert all(ledger.get(key) is not None for key in first)
        assert len(set(first)) == len(FIRST)
        # When the producer and the consumers run them
        _wait("the first obligations final", lambda: len(_final(ledger, first)) == len(first))
        bursts: list[tuple[str, str, str]] = []
        _tokens_in_every_environment(payments, ledger, bursts)
        before_expiry = vendor.payments_audit()
        # And then every token expires, and a locked payment's obligation comes in
        vendor.payments.expire_tokens()
        vendor.payments.lock("pay_2", LOCKED_TIMES, retry_after_seconds=LOCK_RETRY_AFTER_SECONDS)
        second = _schedule(ledger, policy, SECOND)
        _wait("the locked obligation final", lambda: len(_final(ledger, second)) == 1)
        # And a finished job's message is delivered once more
        calls_before_redelivery = vendor.payments_audit().calls_total
        _redeliver(payments, _final(ledger, first)[first[0]])
        _wait("the redelivered message consumed", lambda: _queue_empty(payments))
        burst_keys = [operation_key(policy.name, t, p, policy.version, (d,)) for t, p, d in bursts]
        jobs = _final(ledger, first + second + burst_keys)
        audit = vendor.payments_audit()
    finally:
        ledger.close()

    # Then every job is final in the ledger with the outcome its answers call for
    outcomes = {key: (j.status, j.last_outcome, j.last_error_code) for key, j in jobs.items()}
    accepted = (JobStatus.SUCCEEDED, OutcomeClass.ACCEPTED)
    assert len(jobs) == len(FIRST + SECOND + bursts)
    assert {k: o[:2] for k, o in outcomes.items() if k != first[2]} == dict.fromkeys(
        [first[0], first[1], first[3], second[0], *burst_keys], accepted
    )
    assert outcomes[first[2]] == (JobStatus.FAILED, OutcomeClass.PERMANENT, "http_422")
    # (a call refused for its expired token counts an attempt: `auth_token_renewed`, resent
    # with the new token at the next attempt, sweeper.actions.http)
    renewals = audit.expired_token_calls_by_key
    # ... the lost answer was retried under the same token and answered as a replay
    assert jobs[first[3]].attempt_count == 2 + renewals.get(first[3], 0)
    assert audit.replays == 1
    assert audit.answers_lost == 1
    # ... the locked payment was snoozed, then accepted, without spending an attempt
    locked = jobs[second[0]]
    assert audit.locked_answers == LOCKED_TIMES
    assert locked.attempt_count == 1 + renewals.get(second[0], 0)
    assert locked.snoozed_seconds >= LOCKED_TIMES * LOCK_RETRY_AFTER_SECONDS
    # ... the expired token was renewed once per refusal, and no job ended AUTH
    assert audit.expired_token_calls >= 1
    assert audit.responses_by_status.get(401, 0) == audit.expired_token_calls
    assert audit.tokens_issued - before_expiry.tokens_issued == audit.expired_token_calls
    assert all(j.last_outcome is not OutcomeClass.AUTH for j in jobs.values())
    # ... the redelivered message reached no vendor
    assert audit.calls_total == calls_before_redelivery
    # And the vendor reconciled each distinct (payment, business date) exactly once
    _assert_one_effect_per_pair(audit, FIRST + SECOND + bursts)


def _assert_one_effect_per_pair(audit: PaymentsAudit, rows: list[tuple[str, str, str]]) -> None:
    pairs = {f"{p}/{d}" for _, p, d in rows if d != "2026-02-30"}
    assert audit.effects_by_pair == dict.fromkeys(pairs, 1)
    assert audit.effects_total == len(pairs)
    assert set(audit.effects_by_token.values()) == {1}

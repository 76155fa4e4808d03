"""The guarded call: an outcome that settles nothing is raised (so Powertools stores no
completed record for it) as an error that carries the data its paths need."""

from __future__ import annotations

from typing import Any

import pytest

from sweeper.consumer import guard_with_idempotency
from sweeper.errors import RetryableActionError
from sweeper.models import ActionCall, ActionResult, OutcomeClass

JOB = ActionCall(
    key="k-1",
    idempotency_key="k-1#0",
    policy="exports",
    policy_version=1,
    tenant_id="t",
    object_id="o",
    scope="s",
    attempt=0,
    batch_id="b-1",
)


def answering(answer: ActionResult) -> Any:
    return guard_with_idempotency(lambda job, timeout: answer, lambda f: f)


def test_a_throttle_is_raised_with_the_key_status_code_and_retry_after() -> None:
    throttled = ActionResult(
        outcome=OutcomeClass.THROTTLED, status_code=429, code="http_429", retry_after_seconds=3.0
    )
    with pytest.raises(RetryableActionError) as err:
        answering(throttled)(JOB, lambda: 5.0)
    got = err.value
    assert (got.operation_key, got.outcome, got.status_code, got.code) == (
        "k-1",
        "throttled",
        429,
        "http_429",
    )
    assert got.retry_after_seconds == 3.0


def test_a_settled_outcome_is_returned_with_the_timeout_prepare_gave() -> None:
    seen: list[float | None] = []
    accepted = ActionResult(outcome=OutcomeClass.ACCEPTED, status_code=200, code="http_200")

    def perform(job: ActionCall, timeout: float | None) -> ActionResult:
        seen.append(timeout)
        return accepted

    assert guard_with_idempotency(perform, lambda f: f)(JOB, lambda: 4.5) is accepted
    assert seen == [4.5]

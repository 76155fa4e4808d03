"""The guarded call: an outcome that settles nothing is raised (so Powertools stores no
completed record for it) as an error that carries the data its paths need."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from sweeper.consumer import Attempt, guard_with_idempotency
from sweeper.errors import RetryableActionError
from sweeper.models import ActionCall, ActionResult, OutcomeClass
from sweeper.vendor_reading import LimitReading, VendorReading

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


def recording(events: list[str]) -> Callable[[Callable[..., ActionResult]], Any]:
    """An idempotency stand-in that notes when the record would be completed (or released)."""

    def idempotent(fn: Callable[..., ActionResult]) -> Callable[..., ActionResult]:
        def wrapped(**kwargs: Any) -> ActionResult:
            try:
                return fn(**kwargs)
            finally:
                events.append("record")

        return wrapped

    return idempotent


def test_the_attempt_hears_the_call_end_before_the_idempotency_record_is_completed() -> None:
    # Given a guarded call whose idempotency notes when it completes its record, and an action
    # that says when its request left
    events: list[str] = []
    accepted = ActionResult(
        outcome=OutcomeClass.ACCEPTED, status_code=200, code="http_200", request_sent_at=812.5
    )

    def perform(job: ActionCall, timeout: float | None) -> ActionResult:
        events.append("call")
        return accepted

    guarded = guard_with_idempotency(perform, recording(events))
    # When it runs with an attempt
    attempt = Attempt(lambda: 4.5, lambda sent_at, _: events.append(f"ended {sent_at}"))
    # Then the end of the call, with when its request left, is heard between the call and the
    # record's completion
    assert guarded(JOB, attempt) is accepted
    assert events == ["call", "ended 812.5", "record"]


def test_when_a_request_left_is_not_stored_with_the_idempotency_record() -> None:
    # A replay made no request: the time is this process's clock, meaningless in another
    result = ActionResult(
        outcome=OutcomeClass.ACCEPTED, status_code=200, code="http_200", request_sent_at=812.5
    )
    assert "request_sent_at" not in result.model_dump()
    assert ActionResult.model_validate(result.model_dump()).request_sent_at is None


def test_the_attempt_hears_the_end_of_a_call_that_failed() -> None:
    # Given an action that fails (a read timeout the action did not map, say)
    events: list[str] = []

    def perform(job: ActionCall, timeout: float | None) -> ActionResult:
        events.append("call")
        raise TimeoutError("read timed out")

    guarded = guard_with_idempotency(perform, recording(events))
    # When it runs with an attempt, the failure comes out, after the end was heard
    with pytest.raises(TimeoutError):
        guarded(JOB, Attempt(lambda: 4.5, lambda sent_at, _: events.append(f"ended {sent_at}")))
    assert events == ["call", "ended None", "record"]


def test_no_end_is_heard_for_a_call_never_made() -> None:
    # Given an attempt whose preparation gives up before the request (a deferral)
    events: list[str] = []

    def give_up() -> float | None:
        raise RuntimeError("deferred")

    accepted = ActionResult(outcome=OutcomeClass.ACCEPTED, status_code=200, code="http_200")

    def perform(job: ActionCall, timeout: float | None) -> ActionResult:
        events.append("call")
        return accepted

    guarded = guard_with_idempotency(perform, recording(events))
    with pytest.raises(RuntimeError):
        guarded(JOB, Attempt(give_up, lambda sent_at, _: events.append("ended")))
    # Then nothing was called and no end heard (the delivery gives its leases back itself)
    assert events == ["record"]


def test_a_throttled_answers_reading_is_heard_by_the_attempt_and_carried_by_its_error() -> None:
    # Given an action whose 429 states that nothing remains of the vendor's quota for 30 s
    reading = VendorReading((LimitReading("quota", quota=5, remaining=0, reset_seconds=30.0),))
    throttled = ActionResult(
        outcome=OutcomeClass.THROTTLED, status_code=429, code="http_429", reading=reading
    )
    heard: list[VendorReading | None] = []
    guarded = guard_with_idempotency(lambda job, timeout: throttled, recording([]))
    # When it runs with an attempt
    with pytest.raises(RetryableActionError) as raised:
        guarded(JOB, Attempt(lambda: 4.5, lambda sent_at, read: heard.append(read)))
    # Then the attempt heard what the answer said, and the retryable error carries it too
    assert heard == [reading]
    assert raised.value.reading is reading
    # And it is never stored with an idempotency record
    assert "reading" not in throttled.model_dump()

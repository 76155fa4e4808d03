"""The automatic redrive of throttled letters (`[policies.redrive] automatic = "throttled"`):
a letter whose job died of a limit moves back at its limit's reopening, not before; the rest
wait for an operator. Against the real ledger, SQS and the limiter's gate (moto)."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from functools import partial
from typing import Any

import pytest

from functions.redrive import app as redrive_app
from sweeper import runtime
from sweeper.config import Policy
from sweeper.limiter import DynamoLimiter
from sweeper.limiter.gates import closed_gates_after
from sweeper.models import OutcomeClass
from sweeper.redrive.auto import Watch
from sweeper.redrive.letters import DeadLetter, SqsDeadLetterQueue
from sweeper.redrive.run import RedriveReport, RedriveRequest
from sweeper_local.redrive_runner import LocalRedrive
from tests.conftest import Pipeline, load_event
from tests.integration.test_redrive import body, dead_letters, key, redrive, work_queue_bodies

pytestmark = pytest.mark.integration

#: A scheduled run's window: the minute less its margin (Watch.for_period(60, ...)).
WINDOW_SECONDS = 55.0


class WallClock:
    """The run's clocks (wall and monotonic), moving only when the run sleeps."""

    def __init__(self) -> None:
        self.epoch = time.time()
        self.mono = 1000.0
        self.slept: list[float] = []
        self.on_sleep: list[Any] = []  # called once each, at the next sleep

    def now(self) -> datetime:
        return datetime.fromtimestamp(self.epoch, UTC)

    def monotonic(self) -> float:
        return self.mono

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.epoch += seconds
        self.mono += seconds
        while self.on_sleep:
            self.on_sleep.pop(0)()


class Moves(SqsDeadLetterQueue):
    """The real DLQ, noting when (on the run's wall clock) each letter moved, and its receives."""

    def __init__(self, pipeline: Pipeline, clock: WallClock) -> None:
        super().__init__(
            pipeline.aws.sqs(), pipeline.resources.dlq_url, pipeline.resources.queue_url
        )
        self.clock = clock
        self.moved_at: list[float] = []
        self.receives = 0

    def receive(self, max_messages: int, visibility_seconds: int) -> list[DeadLetter]:
        self.receives += 1
        return super().receive(max_messages, visibility_seconds)

    def move(self, letter: DeadLetter, group_id: str | None) -> None:
        super().move(letter, group_id)
        self.moved_at.append(self.clock.epoch)


def died(pipeline: Pipeline, i: int, *, code: str, outcome: OutcomeClass | None = None) -> None:
    """Job i's last delivery ended with `code` (a wait: `wait_<reason>`) and `outcome`."""
    now = datetime.now(UTC)
    pipeline.ledger.record_unsettled(
        key(i),
        now,
        next_attempt_at=now,
        lease_until=now,
        outcome=outcome,
        code=code,
    )


def watching(
    pipeline: Pipeline, clock: WallClock, client: Any = None, **kw: Any
) -> tuple[RedriveReport, Moves]:
    """A scheduled run of the throttled letters' redrive, on `clock`, started every minute,
    reading the closed gates as the function does (through `client`, if given)."""
    dlq = Moves(pipeline, clock)
    closed_since = partial(
        closed_gates_after, client or pipeline.aws.dynamodb(), pipeline.resources.limiter_table
    )
    report = redrive(
        pipeline,
        RedriveRequest(policy="exports"),
        dlq=dlq,
        clock=clock.now,
        sleep=clock.sleep,
        monotonic=clock.monotonic,
        actor="redrive-schedule",
        watch=Watch.for_period(60, clock.mono, closed_since),
        **kw,
    )
    return report, dlq


def automatic_in_functions(pipeline: Pipeline, monkeypatch: pytest.MonkeyPatch) -> None:
    """The functions run the policy with its automatic redrive (a new cold start)."""
    policy = Policy.model_validate(
        {**pipeline.policy.model_dump(), "redrive": {"automatic": "throttled"}}
    )
    monkeypatch.setenv("SWEEPER_POLICY", policy.model_dump_json())
    runtime.reset()


def recording(client: Any) -> list[str]:
    """The DynamoDB operations `client` sends from now on, by name, one per request."""
    sent: list[str] = []

    def note(model: Any, **_: Any) -> None:
        sent.append(model.name)

    client.meta.events.register("before-call.dynamodb", note)
    return sent


def close_gate(pipeline: Pipeline, until: float) -> None:
    DynamoLimiter(pipeline.aws.dynamodb(), pipeline.resources.limiter_table).close(
        "exports", until, "throttled"
    )


def test_a_throttled_letter_is_not_moved_before_its_limit_reopens_and_is_moved_at_it(
    pipeline: Pipeline,
) -> None:
    # Given a letter whose job waited for its closed gate, closed for another 20 s
    dead_letters(pipeline, 1)
    died(pipeline, 0, code="wait_throttled")
    clock = WallClock()
    reopening = clock.epoch + 20
    close_gate(pipeline, reopening)
    # When a scheduled run looks at the DLQ
    report, dlq = watching(pipeline, clock)
    # Then it waited in place for the reopening and moved the letter at it, not before
    assert report.moved == 1
    assert report.kept_closed == 0
    assert reopening - 1e-3 <= dlq.moved_at[0] < reopening + 1  # the gate's microseconds
    assert report.waited_seconds == pytest.approx(20, abs=0.5)
    assert work_queue_bodies(pipeline) == [body(0)]


def test_a_letter_that_died_otherwise_stays_for_an_operator(pipeline: Pipeline) -> None:
    # Given two letters: one whose job's last answer was a 503, one that waited for its slot
    dead_letters(pipeline, 2)
    died(pipeline, 0, code="http_503", outcome=OutcomeClass.TRANSIENT)
    died(pipeline, 1, code="wait_rate", outcome=OutcomeClass.TRANSIENT)
    clock = WallClock()
    # When a scheduled run looks at the DLQ (every limit open)
    report, _ = watching(pipeline, clock)
    # Then the throttled one moved, the other stays for an operator
    assert (report.moved, report.kept_for_operator, report.left) == (1, 1, 1)
    assert work_queue_bodies(pipeline) == [body(1)]


def test_a_reopening_beyond_the_run_leaves_the_letter_to_the_first_run_after_it(
    pipeline: Pipeline,
) -> None:
    # Given a throttled letter whose gate reopens in two minutes, past the run's window
    dead_letters(pipeline, 1)
    died(pipeline, 0, code="http_429", outcome=OutcomeClass.THROTTLED)
    clock = WallClock()
    close_gate(pipeline, clock.epoch + 120)
    # When a run with the time to wait for it looks now, and another after the reopening
    before, _ = watching(pipeline, clock, remaining_seconds=lambda: 600.0)
    clock.epoch += 121
    after, _ = watching(pipeline, clock)
    # Then the first kept it without waiting for it; the second moved it
    assert (before.moved, before.kept_closed, before.left) == (0, 1, 1)
    assert before.waited_seconds == 0
    assert (after.moved, after.left) == (1, 0)


def test_letters_landing_while_the_run_waits_are_moved_by_the_same_run(
    pipeline: Pipeline,
) -> None:
    # Given a throttled letter waiting on a gate closed for 10 s
    dead_letters(pipeline, 2)
    for i in (0, 1):
        died(pipeline, i, code="wait_throttled")
    sqs = pipeline.aws.sqs()
    first, second = sqs.receive_message(
        QueueUrl=pipeline.resources.dlq_url, MaxNumberOfMessages=10, VisibilityTimeout=600
    )["Messages"]
    sqs.delete_message(QueueUrl=pipeline.resources.dlq_url, ReceiptHandle=second["ReceiptHandle"])
    sqs.change_message_visibility(
        QueueUrl=pipeline.resources.dlq_url,
        ReceiptHandle=first["ReceiptHandle"],
        VisibilityTimeout=0,
    )
    clock = WallClock()
    close_gate(pipeline, clock.epoch + 10)
    # ... and the other letter reaching the DLQ at the reopening (as a deferred record does)
    clock.on_sleep.append(
        lambda: sqs.send_message(QueueUrl=pipeline.resources.dlq_url, MessageBody=second["Body"])
    )
    # When a scheduled run looks at the DLQ
    report, dlq = watching(pipeline, clock)
    # Then it moved both, the second within a poll of its landing, and kept watch to its end
    assert report.moved == 2
    assert sorted(work_queue_bodies(pipeline)) == sorted([body(0), body(1)])
    assert dlq.moved_at[1] - dlq.moved_at[0] <= 1.0 + 0.01
    assert clock.mono == pytest.approx(1000.0 + WINDOW_SECONDS, abs=1.0)


def test_a_run_on_an_empty_dlq_returns_after_reading_its_depth(pipeline: Pipeline) -> None:
    # Given an empty DLQ
    clock = WallClock()
    # When a scheduled run looks
    report, dlq = watching(pipeline, clock)
    # Then it received nothing and slept not at all: one GetQueueAttributes
    assert (report.stop_reason, dlq.receives, clock.slept) == ("empty", 0, [])


def test_an_empty_dlq_is_watched_when_a_gate_reopened_lately(pipeline: Pipeline) -> None:
    # Given an empty DLQ and the scope's gate, reopened 5 s ago
    clock = WallClock()
    close_gate(pipeline, clock.epoch - 5)
    # ... and a letter deferred to that reopening dying 3 s into the run
    dead = partial(
        pipeline.aws.sqs().send_message, QueueUrl=pipeline.resources.dlq_url, MessageBody=body(0)
    )
    pipeline.seed(1)
    died(pipeline, 0, code="wait_throttled")
    clock.on_sleep.append(lambda: None)
    clock.on_sleep.append(lambda: None)
    clock.on_sleep.append(dead)
    client = pipeline.aws.dynamodb()
    sent = recording(client)
    # When a scheduled run looks
    report, dlq = watching(pipeline, clock, client)
    # Then it read the latest closure's end, Scanned for the gate (it ended within the run's
    # minute), kept watch and moved the letter within a poll of its landing
    assert sent[:2] == ["GetItem", "Scan"]
    assert report.moved == 1
    assert dlq.moved_at[0] - (clock.epoch - clock.mono + 1000.0 + 3.0) <= 1.0 + 0.01


def test_an_empty_dlq_is_not_watched_long_after_a_reopening(pipeline: Pipeline) -> None:
    # Given an empty DLQ and the scope's gate, reopened two minutes ago
    clock = WallClock()
    close_gate(pipeline, clock.epoch - 120)
    # When a scheduled run looks
    report, dlq = watching(pipeline, clock)
    # Then it returned at once
    assert (report.stop_reason, dlq.receives, clock.slept) == ("empty", 0, [])


def test_a_run_that_met_only_letters_for_an_operator_keeps_no_watch(pipeline: Pipeline) -> None:
    # Given a letter of a job whose last answer was a 503
    dead_letters(pipeline, 1)
    died(pipeline, 0, code="http_503", outcome=OutcomeClass.TRANSIENT)
    clock = WallClock()
    # When a scheduled run looks
    report, _ = watching(pipeline, clock)
    # Then it returned once the DLQ was read, without polling
    assert (report.kept_for_operator, report.stop_reason, clock.slept) == (1, "drained", [])


def test_the_schedule_leaves_a_letter_that_died_otherwise_and_an_operator_moves_it(
    pipeline: Pipeline, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given the policy's automatic redrive, and a letter of a job whose call timed out
    automatic_in_functions(pipeline, monkeypatch)
    dead_letters(pipeline, 1)
    died(pipeline, 0, code="raised:Timeout", outcome=OutcomeClass.UNKNOWN)
    # When its schedule runs the redrive, then an operator asks for one
    scheduled = redrive_app.handler(
        load_event("scheduler_event.json"), pipeline.lambda_context("redrive")
    )
    asked = redrive_app.handler({}, pipeline.lambda_context("redrive"))
    # Then the schedule left it for the operator, whose run moved it
    assert (scheduled["moved"], scheduled["kept_for_operator"], scheduled["left"]) == (0, 1, 1)
    assert (asked["moved"], asked["kept_for_operator"], asked["left"]) == (1, 0, 0)


def test_the_local_stack_runs_the_redrive_on_its_schedule(pipeline: Pipeline) -> None:
    # Given the policy's automatic redrive and a letter whose job waited for its slot
    policy = Policy.model_validate(
        {**pipeline.policy.model_dump(), "redrive": {"automatic": "throttled"}}
    )
    dead_letters(pipeline, 1)
    died(pipeline, 0, code="wait_rate")
    env = {**pipeline.env, "SWEEPER_POLICY": policy.model_dump_json()}
    # When the local stack's schedule runs it (its first run at once), and no one else
    with LocalRedrive(policy, env, every_seconds=60.0, first_run_seconds=0.0):
        deadline = time.monotonic() + 60
        moved: list[str] = []
        while not moved and time.monotonic() < deadline:
            moved = work_queue_bodies(pipeline)
    # Then the letter is back on the work queue
    assert moved == [body(0)]

"""Redrive against the real ledger, SQS (moto) and the limiter's gate (DynamoDB on moto)."""

from __future__ import annotations

import itertools
import json
import logging
import math
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import psycopg
import pytest

from functions.redrive import app as redrive_app
from sweeper.errors import QueueError, RedriveIncompleteError
from sweeper.limiter import DynamoLimiter
from sweeper.models import ControlAction, JobMessage, JobSelection, JobStatus, OutcomeClass
from sweeper.operations import control_jobs
from sweeper.redrive.letters import DeadLetter, SqsDeadLetterQueue, queue_depth
from sweeper.redrive.run import (
    MIN_REMAINING_SECONDS,
    VISIBILITY_MARGIN_SECONDS,
    RedriveReport,
    RedriveRequest,
    run_redrive,
)
from sweeper_local.lambda_runtime import parse_emf
from tests.conftest import Pipeline, load_event

pytestmark = pytest.mark.integration


def key(i: int, tenants: int = 3) -> str:
    return f"exports:tenant-{i % tenants}:obj-{i:05d}:v1"


def body(i: int, tenants: int = 3) -> str:
    return JobMessage(
        key=key(i, tenants),
        policy="exports",
        policy_version=1,
        tenant_id=f"tenant-{i % tenants}",
        object_id=f"obj-{i:05d}",
        scope="exports",
        attempt=0,
        batch_id="b-1",
    ).to_body()


def dead_letters(pipeline: Pipeline, n: int, *, extra: Sequence[str] = ()) -> None:
    """n jobs in the ledger, each with its message in the DLQ (plus any extra bodies)."""
    pipeline.seed(n)
    sqs = pipeline.aws.sqs()
    for text in [body(i) for i in range(n)] + list(extra):
        sqs.send_message(QueueUrl=pipeline.resources.dlq_url, MessageBody=text)


def work_queue_bodies(pipeline: Pipeline) -> list[str]:
    sqs = pipeline.aws.sqs()
    found: list[str] = []
    while True:
        got = sqs.receive_message(
            QueueUrl=pipeline.resources.queue_url, MaxNumberOfMessages=10, VisibilityTimeout=60
        ).get("Messages", [])
        if not got:
            return found
        found.extend(m["Body"] for m in got)


def dlq_depth(pipeline: Pipeline) -> int:
    return queue_depth(pipeline.aws.sqs(), pipeline.resources.dlq_url)[0]


class Clock:
    """A monotonic clock that only moves when the code under test sleeps."""

    def __init__(self, start: float = 1000.0) -> None:
        self.now = start
        self.moves: list[float] = []

    def sleep(self, seconds: float) -> None:
        self.now += seconds

    def monotonic(self) -> float:
        return self.now


class Recording(SqsDeadLetterQueue):
    """The real DLQ, noting what the run asked of it."""

    def __init__(self, pipeline: Pipeline, clock: Clock | None = None) -> None:
        super().__init__(
            pipeline.aws.sqs(), pipeline.resources.dlq_url, pipeline.resources.queue_url
        )
        self.clock = clock
        self.visibilities: list[int] = []
        self.moves: list[tuple[str, str | None]] = []  # (body, group id)
        self.moved_at: list[float] = []  # on the clock
        self.released: list[str] = []  # message ids
        self.move_seconds = 0.0  # how long the first move takes on the clock

    def receive(self, max_messages: int, visibility_seconds: int) -> list[DeadLetter]:
        self.visibilities.append(visibility_seconds)
        return super().receive(max_messages, visibility_seconds)

    def move(self, letter: DeadLetter, group_id: str | None) -> None:
        self.moves.append((letter.body, group_id))
        super().move(letter, group_id)
        if self.clock is not None:
            self.moved_at.append(self.clock.now)
            if len(self.moves) == 1:
                self.clock.now += self.move_seconds

    def release(self, letters: Sequence[DeadLetter]) -> None:
        self.released.extend(letter.message_id for letter in letters)
        super().release(letters)


def redrive(pipeline: Pipeline, request: RedriveRequest | None = None, **kw: Any) -> RedriveReport:
    kw.setdefault("remaining_seconds", lambda: 100.0)
    kw.setdefault("clock", lambda: datetime.now(UTC))
    kw.setdefault("actor", "ops")
    dlq = kw.pop(
        "dlq",
        SqsDeadLetterQueue(
            pipeline.aws.sqs(), pipeline.resources.dlq_url, pipeline.resources.queue_url
        ),
    )
    limiter = DynamoLimiter(pipeline.aws.dynamodb(), pipeline.resources.limiter_table)
    return run_redrive(
        request or RedriveRequest(),
        pipeline.ledger,
        dlq,
        limiter.state,
        policy="exports",
        default_rate_per_second=1000.0,
        **kw,
    )


def test_letters_of_unsettled_jobs_move_and_of_succeeded_jobs_are_dropped(
    pipeline: Pipeline,
) -> None:
    # Given five dead letters, two of whose jobs have since succeeded
    dead_letters(pipeline, 5)
    for i in (0, 1):
        pipeline.ledger.mark_succeeded(key(i), OutcomeClass.ACCEPTED, datetime.now(UTC))
    # When redriving
    report = redrive(pipeline)
    # Then three move with their bodies unchanged, two are dropped, the DLQ is empty
    assert (report.moved, report.dropped_settled, report.left) == (3, 2, 0)
    assert sorted(work_queue_bodies(pipeline)) == sorted(body(i) for i in (2, 3, 4))
    assert report.stop_reason == "drained"


def test_terminal_jobs_stay_unless_included_then_get_a_fresh_budget(pipeline: Pipeline) -> None:
    # Given two dead letters of terminal jobs
    dead_letters(pipeline, 2)
    for i in (0, 1):
        pipeline.ledger.mark_failed(
            key(i), OutcomeClass.PERMANENT, "http_400", datetime.now(UTC), count_attempt=True
        )
    # When redriving without, then with terminal jobs
    kept = redrive(pipeline)
    included = redrive(pipeline, RedriveRequest(include_terminal=True))
    # Then they stay at first, and then are retried in the ledger and moved
    assert (kept.kept_terminal, kept.moved, kept.left) == (2, 0, 2)
    assert (included.moved, included.retried_terminal, included.left) == (2, 2, 0)
    job = pipeline.ledger.get(key(0))
    assert job is not None
    assert (job.status, job.attempt_count) == (JobStatus.PENDING, 0)
    assert len(work_queue_bodies(pipeline)) == 2


def test_letters_of_a_closed_scope_stay_until_it_reopens(pipeline: Pipeline) -> None:
    # Given dead letters whose scope the vendor closed for a minute
    dead_letters(pipeline, 3)
    limiter = DynamoLimiter(pipeline.aws.dynamodb(), pipeline.resources.limiter_table)
    limiter.close("exports", time.time() + 60, "throttled")
    # When redriving
    report = redrive(pipeline)
    # Then every letter stays, visible again for the next run
    assert (report.kept_closed, report.moved, report.left) == (3, 0, 3)
    assert report.closed_scopes == ["exports"]
    assert work_queue_bodies(pipeline) == []
    assert queue_depth(pipeline.aws.sqs(), pipeline.resources.dlq_url)[1] == 0


def test_filters_by_tenant_and_outcome_leave_other_letters_alone(pipeline: Pipeline) -> None:
    dead_letters(pipeline, 6)
    now = datetime.now(UTC)
    pipeline.ledger.record_unsettled(
        key(0), now, next_attempt_at=now, lease_until=now, outcome=OutcomeClass.THROTTLED
    )
    pipeline.ledger.record_unsettled(
        key(3), now, next_attempt_at=now, lease_until=now, outcome=OutcomeClass.TRANSIENT
    )
    report = redrive(
        pipeline, RedriveRequest(tenant_id="tenant-0", outcome=[OutcomeClass.THROTTLED])
    )
    assert (report.moved, report.not_matching, report.left) == (1, 5, 5)
    assert work_queue_bodies(pipeline) == [body(0)]


def test_at_most_max_messages_move(pipeline: Pipeline) -> None:
    dead_letters(pipeline, 5)
    report = redrive(pipeline, RedriveRequest(max_messages=2))
    assert (report.moved, report.left, report.stop_reason) == (2, 3, "max_messages")


def test_a_dry_run_reports_what_would_move_and_changes_nothing(pipeline: Pipeline) -> None:
    # Given four dead letters: one succeeded, one terminal, two movable
    dead_letters(pipeline, 4)
    now = datetime.now(UTC)
    pipeline.ledger.mark_succeeded(key(0), OutcomeClass.ACCEPTED, now)
    pipeline.ledger.mark_failed(key(1), OutcomeClass.PERMANENT, "http_400", now, count_attempt=True)
    before = pipeline.ledger.counts("exports")
    # When redriving dry
    report = redrive(pipeline, RedriveRequest(dry_run=True))
    # Then the report says what would happen, and the queues and the ledger are as they were
    assert (report.moved, report.dropped_settled, report.kept_terminal) == (2, 1, 1)
    assert report.left == 4
    assert work_queue_bodies(pipeline) == []
    assert pipeline.ledger.counts("exports") == before
    assert queue_depth(pipeline.aws.sqs(), pipeline.resources.dlq_url) == (4, 0)


def test_moves_are_paced_at_the_requested_rate(pipeline: Pipeline) -> None:
    dead_letters(pipeline, 6)
    clock = Clock()
    moved_at: list[float] = []
    real = SqsDeadLetterQueue(
        pipeline.aws.sqs(), pipeline.resources.dlq_url, pipeline.resources.queue_url
    )

    class Recording(SqsDeadLetterQueue):
        def move(self, letter: DeadLetter, group_id: str | None) -> None:
            moved_at.append(clock.monotonic())
            real.move(letter, group_id)

    report = redrive(
        pipeline,
        RedriveRequest(rate_per_second=4),
        dlq=Recording(pipeline.aws.sqs(), pipeline.resources.dlq_url, pipeline.resources.queue_url),
        sleep=clock.sleep,
        monotonic=clock.monotonic,
    )
    assert report.moved == 6
    gaps = [b - a for a, b in itertools.pairwise(moved_at)]
    assert all(gap >= 0.25 - 1e-9 for gap in gaps)


def test_the_first_move_is_not_delayed_whatever_the_clock_reads(pipeline: Pipeline) -> None:
    # Given a monotonic clock below zero (its reference point is undefined, so it may be)
    dead_letters(pipeline, 2)
    clock = Clock(start=-50.0)
    moved_at: list[float] = []
    real = SqsDeadLetterQueue(
        pipeline.aws.sqs(), pipeline.resources.dlq_url, pipeline.resources.queue_url
    )

    class Recording(SqsDeadLetterQueue):
        def move(self, letter: DeadLetter, group_id: str | None) -> None:
            moved_at.append(clock.monotonic())
            real.move(letter, group_id)

    # When redriving at 2/s
    report = redrive(
        pipeline,
        RedriveRequest(rate_per_second=2),
        dlq=Recording(pipeline.aws.sqs(), pipeline.resources.dlq_url, pipeline.resources.queue_url),
        sleep=clock.sleep,
        monotonic=clock.monotonic,
    )
    # Then the first letter moves at once and the second one interval later
    assert report.moved == 2
    assert moved_at == [-50.0, -49.5]


def test_it_stops_before_the_time_budget_and_leaves_the_rest(pipeline: Pipeline) -> None:
    # Given a budget that has room for three paced moves at 1/s
    dead_letters(pipeline, 6)
    clock = Clock()
    end = clock.now + 8.5
    report = redrive(
        pipeline,
        RedriveRequest(rate_per_second=1),
        sleep=clock.sleep,
        monotonic=clock.monotonic,
        remaining_seconds=lambda: end - clock.now,
    )
    assert report.stop_reason == "budget"
    assert report.moved == 4  # at 0, 1, 2, 3 s: a fifth would leave less than 5 s
    assert report.left == 2


def test_a_queue_failure_raises_and_loses_nothing(pipeline: Pipeline) -> None:
    dead_letters(pipeline, 3)

    class Broken(SqsDeadLetterQueue):
        def move(self, letter: DeadLetter, group_id: str | None) -> None:
            raise QueueError("SendMessage to the work queue failed: EndpointConnectionError")

    broken = Broken(pipeline.aws.sqs(), pipeline.resources.dlq_url, pipeline.resources.queue_url)
    with pytest.raises(QueueError):
        redrive(pipeline, dlq=broken)
    # The letters it held are visible again at once
    assert queue_depth(pipeline.aws.sqs(), pipeline.resources.dlq_url) == (3, 0)


def test_the_scheduled_handler_fails_on_an_unreadable_letter_after_handling_the_rest(
    pipeline: Pipeline,
) -> None:
    # Given a good dead letter and one whose body is not a job message
    dead_letters(pipeline, 1, extra=["{not json"])
    event = load_event("scheduler_event.json")
    # When the scheduled redrive runs
    with pytest.raises(RedriveIncompleteError) as failure:
        redrive_app.handler(event, pipeline.lambda_context("redrive"))
    # Then it moved what it could and raised (so the error alarm fires), keeping the bad one
    report = failure.value.report
    assert isinstance(report, RedriveReport)
    assert (report.moved, report.errors, report.left) == (1, 1, 1)


def test_a_scheduled_redrive_with_no_dead_letter_sends_no_metric(
    pipeline: Pipeline, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given an empty dead-letter queue
    # When the scheduled redrive runs (every 15 minutes)
    redrive_app.handler(load_event("scheduler_event.json"), pipeline.lambda_context("redrive"))
    # Then it sends no metric: its five zeros would each be billed for the hour
    assert parse_emf(capsys.readouterr().out) == {}


def test_the_on_demand_handler_runs_the_sample_request(pipeline: Pipeline) -> None:
    # Given dead letters of tenant-1 with a throttled last outcome
    dead_letters(pipeline, 3)
    now = datetime.now(UTC)
    pipeline.ledger.record_unsettled(
        key(1), now, next_attempt_at=now, lease_until=now, outcome=OutcomeClass.THROTTLED
    )
    # When the sample on-demand request (a dry run for tenant-1) is invoked
    response = redrive_app.handler(
        load_event("redrive_request.json"), pipeline.lambda_context("redrive")
    )
    # Then it reports the one letter it would move and moves nothing
    assert (response["moved"], response["not_matching"], response["dry_run"]) == (1, 2, True)
    assert dlq_depth(pipeline) == 3


def test_a_dead_letter_that_disagrees_with_its_ledger_row_stays_and_fails_the_run(
    pipeline: Pipeline, caplog: pytest.LogCaptureFixture
) -> None:
    # Given two forged dead letters: a real job's key, but another object, or another scope
    forged = json.loads(body(0)) | {"object_id": "victim-object"}
    other_scope = json.loads(body(0)) | {"scope": "elsewhere"}
    dead_letters(pipeline, 1, extra=[json.dumps(forged), json.dumps(other_scope)])
    # When redriving
    with caplog.at_level(logging.ERROR, logger="sweeper.redrive.run"):
        report = redrive(pipeline)
    # Then the genuine letter moves, each forged one stays and is counted as an error
    assert (report.moved, report.errors, report.left) == (1, 2, 2)
    assert work_queue_bodies(pipeline) == [body(0)]
    # and each is logged with its ids and the names of the fields that differ, not their values
    logged = [r for r in caplog.records if r.name == "sweeper.redrive.run"]
    assert sorted(getattr(r, "fields", []) for r in logged) == [["object_id"], ["scope"]]
    assert {getattr(r, "operation_key", None) for r in logged} == {key(0)}
    assert all(getattr(r, "message_id", None) for r in logged)
    assert "victim-object" not in caplog.text


def recorded(pipeline: Pipeline) -> list[tuple[str, str, dict[str, Any], list[dict[str, Any]]]]:
    """Each redrive action: (policy, actor, detail, its steps' details in order)."""
    with psycopg.connect(pipeline.env["SWEEPER_DATABASE_URL"]) as conn:
        rows = conn.execute(
            "SELECT a.policy, a.actor, a.detail, "
            "coalesce(array_agg(s.detail ORDER BY s.id) FILTER (WHERE s.id IS NOT NULL), '{}') "
            "FROM sweeper_operator_actions a "
            "LEFT JOIN sweeper_operator_action_steps s ON s.action_id = a.id "
            "WHERE a.action = 'redrive' GROUP BY a.id ORDER BY a.id"
        ).fetchall()
    return [(str(p), str(a), dict(d), list(s)) for p, a, d, s in rows]


def test_a_redrive_reports_its_policy_and_time_and_is_recorded_only_when_it_changed_things(
    pipeline: Pipeline,
) -> None:
    # Given three dead letters, one of whose jobs has since succeeded
    dead_letters(pipeline, 3)
    pipeline.ledger.mark_succeeded(key(0), OutcomeClass.ACCEPTED, datetime.now(UTC))
    clock = Clock()
    seen: list[RedriveReport] = []

    # When a dry run looks at them, nothing is recorded
    dry = redrive(pipeline, RedriveRequest(dry_run=True))
    assert (dry.dry_run, dry.moved) == (True, 2)
    assert recorded(pipeline) == []
    # When they are redriven at 3/s on a clock that moves only while the redrive waits
    report = redrive(
        pipeline,
        RedriveRequest(rate_per_second=3),
        sleep=clock.sleep,
        monotonic=clock.monotonic,
        progress=seen.append,
    )
    # Then the report names the policy, its time is the clock's, and progress was reported
    assert (report.policy, report.moved, report.dropped_settled) == ("exports", 2, 1)
    assert clock.now > 1000.0
    assert report.elapsed_seconds == round(clock.now - 1000.0, 3)
    assert seen[-1:] == [report]
    # and the redrive is recorded once, with its request, its page and its end
    ((policy, actor, detail, steps),) = recorded(pipeline)
    assert (policy, actor) == ("exports", "ops")
    assert detail == {
        "request": RedriveRequest(rate_per_second=3).model_dump(mode="json", exclude_none=True)
    }
    figures = {"moved": 2, "retried_terminal": 0, "dropped_settled": 1, "dropped_cancelled": 0}
    assert steps == [figures, {**figures, "stop_reason": "drained", "done": True}]
    # When a later redrive only drops a letter whose job has succeeded, that is recorded too
    sqs = pipeline.aws.sqs()
    sqs.send_message(QueueUrl=pipeline.resources.dlq_url, MessageBody=body(0))
    dropped = redrive(pipeline)
    assert (dropped.moved, dropped.dropped_settled) == (0, 1)
    assert [s[0]["dropped_settled"] for _, _, _, s in recorded(pipeline)] == [1, 1]
    # and a run that changes nothing records nothing
    redrive(pipeline)
    assert len(recorded(pipeline)) == 2


def test_a_redrive_records_its_caller_page_by_page_with_the_cancelled_letters_it_drops(
    pipeline: Pipeline,
) -> None:
    # Given 15 dead letters (two pages of ten), three of whose jobs were cancelled
    dead_letters(pipeline, 15)
    control_jobs(
        ControlAction.CANCEL,
        "exports",
        pipeline.ledger,
        JobSelection(keys=tuple(key(i) for i in (1, 11, 12))),
        actor="o",
        now=datetime.now(UTC),
        reason="customer withdrew",
    )
    progress_seen: list[int] = []

    def look(report: RedriveReport) -> None:
        # what the ledger holds as each page ends: the steps recorded so far
        progress_seen.append(len(recorded(pipeline)[0][3]) if recorded(pipeline) else 0)

    # When alice redrives them
    report = redrive(pipeline, actor="alice", progress=look)
    # Then each page was recorded as it ended, under her name, and the run's end after it
    assert (report.moved, report.dropped_cancelled) == (12, 3)
    ((_, actor, _, steps),) = recorded(pipeline)
    assert actor == "alice"
    pages = [s for s in steps if not s.get("done")]
    assert len(pages) == 2
    assert progress_seen[:2] == [1, 2]
    assert sum(s["moved"] for s in pages) == 12
    assert sum(s["dropped_cancelled"] for s in pages) == 3
    assert steps[-1]["done"] is True
    assert (steps[-1]["moved"], steps[-1]["dropped_cancelled"]) == (12, 3)


def test_a_terminal_job_redriven_is_retried_under_the_callers_name(pipeline: Pipeline) -> None:
    # Given a dead letter whose job is terminal
    dead_letters(pipeline, 1)
    pipeline.ledger.mark_failed(
        key(0), OutcomeClass.PERMANENT, "http_500", datetime.now(UTC), count_attempt=True
    )
    # When alice redrives it with terminal jobs included
    report = redrive(pipeline, RedriveRequest(include_terminal=True), actor="alice")
    # Then its retry and the redrive are both recorded as hers
    assert report.retried_terminal == 1
    with psycopg.connect(pipeline.env["SWEEPER_DATABASE_URL"]) as conn:
        rows = conn.execute("SELECT action, actor FROM sweeper_operator_actions ORDER BY id")
        assert [(str(a), str(b)) for a, b in rows] == [("retry", "alice"), ("redrive", "alice")]


def test_the_scheduled_function_records_itself_and_an_invoke_says_so() -> None:
    from sweeper.redrive.log import INVOKE_ACTOR, SCHEDULE_ACTOR, function_actor

    assert (
        function_actor(load_event("scheduler_event.json")) == SCHEDULE_ACTOR == "redrive-schedule"
    )
    assert function_actor(load_event("redrive_request.json")) == INVOKE_ACTOR


def test_letters_that_cannot_be_handled_stay_counted_one_by_one_and_the_rest_move(
    pipeline: Pipeline, caplog: pytest.LogCaptureFixture
) -> None:
    # Given, received first, two unreadable letters and one naming a job the ledger never had,
    # then four good ones, one of whose jobs has since succeeded
    orphan = JobMessage.model_validate_json(body(7)).model_copy(update={"key": "exports:x:y:v1"})
    dead_letters(pipeline, 0, extra=["{not json", "[]", orphan.to_body()])
    dead_letters(pipeline, 4)
    pipeline.ledger.mark_succeeded(key(3), OutcomeClass.ACCEPTED, datetime.now(UTC))
    dlq = Recording(pipeline)
    # When redriving
    with caplog.at_level(logging.INFO, logger="sweeper.redrive.run"):
        report = redrive(pipeline, dlq=dlq)
    # Then each bad letter is one error and stays; the good ones move or are dropped; the
    # readable ones were examined; only the letters that stay are released
    assert (report.errors, report.moved, report.dropped_settled) == (3, 3, 1)
    assert (report.examined, report.left) == (5, 3)
    assert sorted(work_queue_bodies(pipeline)) == sorted(body(i) for i in range(3))
    assert len(dlq.released) == 3
    # and each diagnostic names the message (and the key, once read), never the body
    records = [r for r in caplog.records if r.name == "sweeper.redrive.run"]
    errors = [r for r in records if r.levelno == logging.ERROR]
    assert len(errors) == 3
    assert all(getattr(r, "message_id", None) for r in records)
    assert [getattr(r, "operation_key", None) for r in errors].count("exports:x:y:v1") == 1
    done = [r for r in records if r.levelno == logging.INFO]
    assert sorted(getattr(r, "operation_key", "") for r in done) == sorted(map(key, range(4)))
    assert [getattr(r, "terminal", None) for r in done].count(False) == 3
    assert "not json" not in caplog.text


def test_a_dry_run_counts_the_terminal_jobs_it_would_retry(pipeline: Pipeline) -> None:
    dead_letters(pipeline, 3)
    now = datetime.now(UTC)
    for i in (0, 1):
        pipeline.ledger.mark_failed(
            key(i), OutcomeClass.PERMANENT, "http_400", now, count_attempt=True
        )
    before = pipeline.ledger.counts("exports")
    report = redrive(pipeline, RedriveRequest(dry_run=True, include_terminal=True))
    assert (report.moved, report.retried_terminal, report.left) == (3, 2, 3)
    assert pipeline.ledger.counts("exports") == before


def test_only_the_terminal_jobs_whose_letters_move_are_retried(pipeline: Pipeline) -> None:
    # Given two terminal jobs, only one of which has a letter in the DLQ
    dead_letters(pipeline, 1)
    pipeline.seed(2)
    now = datetime.now(UTC)
    for i in (0, 1):
        pipeline.ledger.mark_failed(
            key(i), OutcomeClass.PERMANENT, "http_400", now, count_attempt=True
        )
    # When redriving terminal jobs too
    report = redrive(pipeline, RedriveRequest(include_terminal=True))
    # Then only that job is back to pending, and the retry is recorded as the caller's
    assert (report.moved, report.retried_terminal) == (1, 1)
    statuses = [job.status for job in map(pipeline.ledger.get, (key(0), key(1))) if job]
    assert statuses == [JobStatus.PENDING, JobStatus.FAILED]
    with psycopg.connect(pipeline.env["SWEEPER_DATABASE_URL"]) as conn:
        retries = conn.execute(
            "SELECT actor, reason FROM sweeper_operator_actions WHERE action = 'retry'"
        ).fetchall()
    assert retries == [("ops", "redrive")]


def test_a_scope_filter_moves_the_letters_of_that_scope_only(pipeline: Pipeline) -> None:
    dead_letters(pipeline, 3)
    other = redrive(pipeline, RedriveRequest(scope="imports"))
    assert (other.moved, other.not_matching, other.left) == (0, 3, 3)
    same = redrive(pipeline, RedriveRequest(scope="exports"))
    assert (same.moved, same.not_matching, same.left) == (3, 0, 0)


def test_a_letter_of_another_policy_is_left_alone(pipeline: Pipeline) -> None:
    dead_letters(pipeline, 2)
    report = redrive(pipeline, RedriveRequest(policy="imports"))
    assert (report.policy, report.moved, report.not_matching, report.left) == ("imports", 0, 2, 2)


def test_with_exactly_the_minimum_time_left_the_run_still_moves(pipeline: Pipeline) -> None:
    dead_letters(pipeline, 2)
    report = redrive(pipeline, remaining_seconds=lambda: MIN_REMAINING_SECONDS)
    assert (report.moved, report.stop_reason, report.left) == (2, "drained", 0)


def test_letters_stay_hidden_longer_than_the_run_may_last(pipeline: Pipeline) -> None:
    dead_letters(pipeline, 2)
    dlq = Recording(pipeline)
    redrive(pipeline, RedriveRequest(dry_run=True), dlq=dlq, remaining_seconds=lambda: 100.2)
    assert dlq.visibilities
    assert set(dlq.visibilities) == {math.ceil(100.2) + VISIBILITY_MARGIN_SECONDS}


def test_a_run_that_reaches_max_messages_receives_no_more(pipeline: Pipeline) -> None:
    # Given as many letters as the cap, all received at once
    dead_letters(pipeline, 2)
    dlq = Recording(pipeline)
    report = redrive(pipeline, RedriveRequest(max_messages=2), dlq=dlq)
    # Then the run ends on the cap without asking the DLQ again
    assert (report.moved, report.stop_reason) == (2, "max_messages")
    assert len(dlq.visibilities) == 1


def test_each_moved_letter_keeps_its_tenant_as_message_group(pipeline: Pipeline) -> None:
    dead_letters(pipeline, 3)
    dlq = Recording(pipeline)
    redrive(pipeline, dlq=dlq)
    assert sorted(dlq.moves) == sorted((body(i), f"tenant-{i % 3}") for i in range(3))


def test_a_slow_move_does_not_let_the_next_ones_burst(pipeline: Pipeline) -> None:
    # Given a first move that takes a second while the pace is 4 a second
    dead_letters(pipeline, 4)
    clock = Clock()
    dlq = Recording(pipeline, clock)
    dlq.move_seconds = 1.0
    redrive(
        pipeline,
        RedriveRequest(rate_per_second=4),
        dlq=dlq,
        sleep=clock.sleep,
        monotonic=clock.monotonic,
    )
    # Then the pace holds after it: no two moves closer than a quarter second
    assert dlq.moved_at[:2] == [1000.0, 1001.0]
    assert all(b - a >= 0.25 - 1e-9 for a, b in itertools.pairwise(dlq.moved_at))
    assert len(dlq.moved_at) == 4


def test_with_less_than_the_minimum_time_left_nothing_is_received(pipeline: Pipeline) -> None:
    dead_letters(pipeline, 2)
    dlq = Recording(pipeline)
    report = redrive(pipeline, dlq=dlq, remaining_seconds=lambda: MIN_REMAINING_SECONDS - 0.1)
    assert (report.stop_reason, report.examined, report.left) == ("budget", 0, 2)
    assert dlq.visibilities == []

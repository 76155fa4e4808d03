"""The operator's console logic against the real ledger: pause, catch-up, retry, inspect
(prune: test_prune)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import psycopg
import pytest

from sweeper.config import Policy
from sweeper.errors import OperatorError
from sweeper.ledger.store import Ledger
from sweeper.models import JobStatus, NewJob, OutcomeClass
from sweeper.operations import (
    inspect_jobs,
    pause_policy,
    resume_policy,
    retry_jobs,
)
from sweeper.operations.missed import catch_up, missed_runs
from sweeper.producer.run import run_producer
from tests.fakes import FakePublisher

pytestmark = pytest.mark.integration

T0 = datetime(2026, 11, 29, 2, 0, tzinfo=UTC)
POLICY = Policy(name="exports", schedule="rate(5 minutes)")


def seed(ledger: Ledger, n: int, due: datetime = T0) -> list[str]:
    jobs = [NewJob(f"t{i % 2}", f"o{i:04d}", due) for i in range(n)]
    ledger.schedule(POLICY.name, POLICY.version, lambda j: POLICY.name, jobs, due)
    return [f"exports:t{i % 2}:o{i:04d}:v1" for i in range(n)]


def produce(ledger: Ledger, at: datetime, publisher: FakePublisher) -> str:
    report = run_producer(
        POLICY, at, ledger, publisher, clock=lambda: at, remaining_seconds=lambda: 60.0
    )
    return report.stop_reason


def fail(ledger: Ledger, keys: list[str], outcome: OutcomeClass, code: str) -> None:
    for key in keys:
        assert ledger.mark_failed(key, outcome, code, T0, count_attempt=True)


def test_a_paused_policy_skips_its_runs_and_records_them(ledger: Ledger) -> None:
    # Given due work and a paused policy
    seed(ledger, 3)
    publisher = FakePublisher()
    result = pause_policy("exports", ledger, None, actor="ops", reason="vendor incident", now=T0)
    # When the scheduler fires
    reason = produce(ledger, T0, publisher)
    # Then nothing is released, the run is recorded as skipped, and the pause is visible
    assert result.changed
    assert reason == "paused"
    assert publisher.sent == []
    assert [r.stop_reason for r in ledger.runs("exports")] == ["paused"]
    state = ledger.policy_state("exports")
    assert (state.paused, state.paused_by, state.reason) == (True, "ops", "vendor incident")


def test_pause_and_resume_are_idempotent_and_recorded(ledger: Ledger, db_url: str) -> None:
    first = pause_policy("exports", ledger, None, actor="ops", reason=None, now=T0)
    again = pause_policy("exports", ledger, None, actor="bob", reason=None, now=T0 + timedelta(1))
    back = resume_policy("exports", ledger, None, actor="ops", reason=None, now=T0 + timedelta(2))
    twice = resume_policy("exports", ledger, None, actor="ops", reason=None, now=T0)
    assert (first.changed, again.changed, back.changed, twice.changed) == (True, False, True, False)
    assert ledger.policy_state("exports").paused_by == "ops"  # the first pause is kept
    assert not ledger.is_paused("exports")
    with psycopg.connect(db_url) as conn:
        actions = conn.execute(
            "SELECT action, actor FROM sweeper_operator_actions ORDER BY id"
        ).fetchall()
    assert actions == [("pause", "ops"), ("pause", "bob"), ("resume", "ops"), ("resume", "ops")]


def skip_two_runs_while_paused(ledger: Ledger) -> FakePublisher:
    """A run at 02:00, then a pause over the runs of 02:05 and 02:10, resumed."""
    publisher = FakePublisher()
    produce(ledger, T0, publisher)
    pause_policy("exports", ledger, None, actor="ops", reason=None, now=T0)
    for minutes in (5, 10):
        produce(ledger, T0 + timedelta(minutes=minutes), publisher)
    resume_policy("exports", ledger, None, actor="ops", reason=None, now=T0)
    return publisher


def test_catch_up_releases_runs_skipped_while_paused_and_never_run_in_order(
    ledger: Ledger,
) -> None:
    # Given a run at 02:00, a pause over 02:05 and 02:10, and 02:15 never delivered at all
    seed(ledger, 4, due=T0 - timedelta(minutes=1))
    publisher = skip_two_runs_while_paused(ledger)
    seed(ledger, 6, due=T0 + timedelta(minutes=6))  # two more became due meanwhile
    # When catching up 02:00-02:16
    since, until = T0, T0 + timedelta(minutes=16)
    missed = missed_runs(POLICY, ledger, since, until)
    report = catch_up(
        POLICY,
        ledger,
        publisher,
        since,
        until,
        actor="ops",
        clock=lambda: T0 + timedelta(minutes=12),
    )
    # Then the three missed times are released in order, each under a new batch id
    assert [(at.minute, was) for at, was in missed] == [
        (5, "paused"),
        (10, "paused"),
        (15, "missing"),
    ]
    assert [r.scheduled_at for r in report.runs] == [at.isoformat() for at, _ in missed]
    assert all(r.released for r in report.runs)
    assert len({r.batch_id for r in report.runs} | {ledger.runs("exports")[-1].batch_id}) == 4
    assert sum(r.published for r in report.runs) == 2
    assert report.runs[0].published == 2  # the first released run found the new work
    # And a second catch-up finds nothing left to release
    assert missed_runs(POLICY, ledger, since, until) == []
    recorded = {r.scheduled_at: r for r in ledger.runs("exports")}
    assert recorded[T0 + timedelta(minutes=5)].batch_id == report.runs[0].batch_id


def test_catch_up_records_its_caller_before_the_first_release_and_each_run_as_it_goes(
    ledger: Ledger, db_url: str
) -> None:
    # Given two runs missed while paused
    publisher = skip_two_runs_while_paused(ledger)
    seen: list[list[tuple[str, str, int]]] = []

    def recorded() -> list[tuple[str, str, int]]:
        with psycopg.connect(db_url) as conn:
            rows = conn.execute(
                "SELECT a.action, a.actor, count(s.id) FROM sweeper_operator_actions a "
                "LEFT JOIN sweeper_operator_action_steps s ON s.action_id = a.id "
                "WHERE a.action = 'catch_up' GROUP BY a.id ORDER BY a.id"
            ).fetchall()
        return [(str(a), str(b), int(c)) for a, b, c in rows]

    # When alice catches up, the record read as each run is released
    catch_up(
        POLICY,
        ledger,
        publisher,
        T0,
        T0 + timedelta(minutes=11),
        actor="alice",
        clock=lambda: T0 + timedelta(minutes=12),
        progress=lambda run: seen.append(recorded()),
    )
    # Then her action was there from the first release, one step per run released so far,
    # and a last step says it finished
    assert seen == [[("catch_up", "alice", 1)], [("catch_up", "alice", 2)]]
    assert recorded() == [("catch_up", "alice", 3)]


def test_catch_up_refuses_while_paused(ledger: Ledger) -> None:
    pause_policy("exports", ledger, None, actor="ops", reason=None, now=T0)
    with pytest.raises(OperatorError, match="resume"):
        catch_up(POLICY, ledger, FakePublisher(), T0, T0, actor="ops", clock=lambda: T0)


def test_retry_gives_chosen_terminal_jobs_a_fresh_budget_and_records_it(
    ledger: Ledger, db_url: str
) -> None:
    # Given two permanent failures and one exhausted job
    keys = seed(ledger, 4)
    fail(ledger, keys[:2], OutcomeClass.PERMANENT, "http_400")
    fail(ledger, keys[2:3], OutcomeClass.TRANSIENT, "exhausted")
    # When retrying the permanent ones
    now = T0 + timedelta(hours=1)
    moved = retry_jobs("exports", ledger, actor="ops", now=now, outcomes=[OutcomeClass.PERMANENT])
    # Then exactly those are pending again, due now, with no attempts, and the ledger says so
    assert moved == keys[:2]
    job = ledger.get(keys[0])
    assert job is not None
    assert (job.status, job.attempt_count, job.next_attempt_at, job.completed_at) == (
        JobStatus.PENDING,
        0,
        now,
        None,
    )
    assert ledger.counts("exports")[JobStatus.FAILED] == 1
    with psycopg.connect(db_url) as conn:
        events = conn.execute(
            "SELECT e.from_status, e.to_status, e.previous_attempts, e.previous_outcome, "
            "e.previous_error_code, a.actor FROM sweeper_job_events e "
            "JOIN sweeper_operator_actions a ON a.id = e.action_id ORDER BY e.id"
        ).fetchall()
    assert events == [("failed", "pending", 1, "permanent", "http_400", "ops")] * 2


def test_retry_needs_a_choice_and_never_touches_unsettled_jobs(ledger: Ledger) -> None:
    keys = seed(ledger, 2)
    with pytest.raises(OperatorError, match="choose"):
        retry_jobs("exports", ledger, actor="ops", now=T0)
    assert retry_jobs("exports", ledger, actor="ops", now=T0, keys=keys) == []


def test_inspect_lists_terminal_and_stuck_jobs_without_customer_fields(ledger: Ledger) -> None:
    keys = seed(ledger, 3, due=T0 - timedelta(hours=3))
    fail(ledger, keys[:1], OutcomeClass.PERMANENT, "http_422")
    rows = inspect_jobs("exports", ledger, now=T0, stuck_after=timedelta(hours=1), limit=10)
    assert [(r["kind"], r["status"]) for r in rows] == [
        ("terminal", "failed"),
        ("stuck", "pending"),
        ("stuck", "pending"),
    ]
    assert rows[0]["outcome"] == "permanent"
    assert rows[0]["error_code"] == "http_422"
    assert rows[0]["attempts"] == 1
    assert "tenant_id" not in rows[0]
    assert rows[0]["trace_id"] is None  # written without a trace


def test_inspect_shows_the_trace_of_a_jobs_last_delivery(ledger: Ledger) -> None:
    # Given a job a traced delivery made terminal, and one a later wait (no outcome) returned
    failed, waiting = seed(ledger, 2, due=T0 - timedelta(hours=3))
    ledger.mark_failed(
        failed, OutcomeClass.PERMANENT, "http_422", T0, count_attempt=True, trace_id="1-aa-01"
    )
    ledger.record_unsettled(
        waiting,
        T0 - timedelta(hours=2),
        next_attempt_at=T0 - timedelta(hours=2),
        lease_until=T0 - timedelta(hours=2),
        outcome=OutcomeClass.TRANSIENT,
        code="http_503",
        count_attempt=True,
        trace_id="1-bb-02",
    )
    ledger.record_unsettled(
        waiting,
        T0 - timedelta(hours=2),
        next_attempt_at=T0 - timedelta(hours=2),
        lease_until=T0 - timedelta(hours=2),
    )
    # When an operator inspects the policy
    rows = inspect_jobs("exports", ledger, now=T0, stuck_after=timedelta(hours=1), limit=10)
    # Then each job shows the X-Ray trace of the delivery that last recorded its outcome
    assert {r["operation_key"]: r["trace_id"] for r in rows} == {
        failed: "1-aa-01",
        waiting: "1-bb-02",
    }

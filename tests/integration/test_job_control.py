"""Job control against the real ledger: cancel, hold, unhold and postpone, by key and by filter,
through the producer's claims, the consumer's deliveries, redrive and the schedule's upsert."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest
from click.testing import CliRunner

from sweeper.config import Policy
from sweeper.errors import OperatorError
from sweeper.ledger.store import Ledger
from sweeper.models import (
    ControlAction,
    JobMessage,
    JobSelection,
    JobStatus,
    NewJob,
    OutcomeClass,
)
from sweeper.operations import control_jobs, policy_status
from sweeper.operations.jobs import CONFIRM_ABOVE
from sweeper.producer.run import run_producer
from sweeper_cli import main
from tests.conftest import Pipeline
from tests.fakes import FakePublisher
from tests.integration.test_consumer import failed_ids, invoke, publish_all
from tests.integration.test_redrive import body, dead_letters, key, redrive, work_queue_bodies

pytestmark = pytest.mark.integration

T0 = datetime(2026, 11, 29, 2, 0, tzinfo=UTC)
POLICY = Policy(name="exports", schedule="rate(5 minutes)")
CANCEL, HOLD, UNHOLD, POSTPONE = (
    ControlAction.CANCEL,
    ControlAction.HOLD,
    ControlAction.UNHOLD,
    ControlAction.POSTPONE,
)


def seed(ledger: Ledger, n: int, due: datetime = T0) -> list[str]:
    jobs = [NewJob(f"t{i % 2}", f"o{i:04d}", due) for i in range(n)]
    ledger.schedule(POLICY.name, POLICY.version, lambda j: POLICY.name, jobs, T0)
    return [f"exports:t{i % 2}:o{i:04d}:v1" for i in range(n)]


def released(ledger: Ledger, at: datetime) -> set[str]:
    """The keys one producer run at `at` publishes."""
    publisher = FakePublisher()
    run_producer(POLICY, at, ledger, publisher, clock=lambda: at, remaining_seconds=lambda: 60.0)
    return {JobMessage.model_validate_json(b).key for b in (m.body for m in publisher.sent)}


def control(ledger: Ledger, action: ControlAction, **kw: Any) -> list[str]:
    selection = kw.pop("selection", None) or JobSelection(keys=tuple(kw.pop("keys")))
    kw.setdefault("actor", "ops")
    kw.setdefault("now", T0)
    if action in (CANCEL, HOLD, POSTPONE):
        kw.setdefault("reason", "legal hold LH-7")
    return control_jobs(action, POLICY.name, ledger, selection, **kw).keys


def actions(db_url: str) -> list[tuple[str, str, str | None]]:
    with psycopg.connect(db_url) as conn:
        rows = conn.execute(
            "SELECT action, actor, reason FROM sweeper_operator_actions ORDER BY id"
        ).fetchall()
    return [(str(a), str(b), c) for a, b, c in rows]


def events(db_url: str) -> list[tuple[str, str, str]]:
    with psycopg.connect(db_url) as conn:
        rows = conn.execute(
            "SELECT event, from_status, to_status FROM sweeper_job_events ORDER BY id"
        ).fetchall()
    return [(str(a), str(b), str(c)) for a, b, c in rows]


def status(ledger: Ledger, k: str) -> JobStatus:
    job = ledger.get(k)
    assert job is not None
    return job.status


# -- cancel ---------------------------------------------------------------------------------------


def test_a_cancelled_job_is_terminal_recorded_and_never_claimed(
    ledger: Ledger, db_url: str
) -> None:
    # Given two due jobs
    keys = seed(ledger, 2)
    # When one is cancelled by key
    moved = control(ledger, CANCEL, keys=[keys[0]], reason="customer withdrew request")
    # Then it is cancelled with its reason, audited with actor and reason, and no run claims it
    job = ledger.get(keys[0])
    assert job is not None
    assert moved == [keys[0]]
    assert (job.status, job.cancel_reason, job.cancelled_at) == (
        JobStatus.CANCELLED,
        "customer withdrew request",
        T0,
    )
    assert actions(db_url) == [("cancel", "ops", "customer withdrew request")]
    assert events(db_url) == [("cancelled", "pending", "cancelled")]
    assert released(ledger, T0 + timedelta(hours=1)) == {keys[1]}


def test_a_schedule_or_discovery_of_a_cancelled_key_does_not_bring_it_back(
    ledger: Ledger,
) -> None:
    # Given a cancelled job
    (k,) = seed(ledger, 1)
    control(ledger, CANCEL, keys=[k])
    # When a door schedules the same key again, due earlier
    result = ledger.schedule(
        POLICY.name,
        POLICY.version,
        lambda j: POLICY.name,
        [NewJob("t0", "o0000", T0 - timedelta(days=1))],
        T0,
    )
    # Then nothing changed: still cancelled, due as before, never released
    job = ledger.get(k)
    assert job is not None
    assert (result.inserted, result.moved_earlier) == (0, 0)
    assert (job.status, job.due_at) == (JobStatus.CANCELLED, T0)
    assert released(ledger, T0 + timedelta(hours=1)) == set()


def test_a_failed_job_once_cancelled_cannot_be_retried(ledger: Ledger) -> None:
    (k,) = seed(ledger, 1)
    assert ledger.mark_failed(k, OutcomeClass.PERMANENT, "http_422", T0, count_attempt=True)
    control(ledger, CANCEL, keys=[k])
    assert ledger.retry_failed(POLICY.name, "ops", T0, keys=[k]) == []
    assert status(ledger, k) is JobStatus.CANCELLED


# -- hold and unhold ------------------------------------------------------------------------------


def test_a_held_tenant_is_never_claimed_until_unheld_and_status_counts_it(
    ledger: Ledger, db_url: str
) -> None:
    # Given four due jobs of two tenants, and tenant t0 held
    keys = seed(ledger, 4)
    moved = control(ledger, HOLD, selection=JobSelection(tenant_id="t0"))
    # When the producer runs, long after they are due
    first = released(ledger, T0 + timedelta(days=30))
    # Then only t1's jobs are released, and status shows the held count
    assert sorted(moved) == [keys[0], keys[2]]
    assert first == {keys[1], keys[3]}
    shown = policy_status(POLICY, ledger, now=T0)
    assert shown.counts["held"] == 2
    # And once unheld, t0's jobs are released by the next run
    control(ledger, UNHOLD, selection=JobSelection(tenant_id="t0"))
    assert {keys[0], keys[2]} <= released(ledger, T0 + timedelta(days=31))
    assert [a for a, _actor, _r in actions(db_url)] == ["hold", "unhold"]
    assert ("unheld", "held", "pending") in events(db_url)


def test_holding_a_leased_job_ends_its_lease_and_no_run_reclaims_it(ledger: Ledger) -> None:
    # Given a job claimed and published (leased)
    (k,) = seed(ledger, 1)
    assert released(ledger, T0) == {k}
    # When it is held, and runs come long after its lease would have expired
    control(ledger, HOLD, keys=[k])
    job = ledger.get(k)
    # Then it is held without a lease, and never reclaimed or claimed again
    assert job is not None
    assert (job.status, job.lease_owner, job.hold_reason) == (
        JobStatus.HELD,
        None,
        "legal hold LH-7",
    )
    assert released(ledger, T0 + timedelta(days=1)) == set()
    assert released(ledger, T0 + timedelta(days=2)) == set()
    assert status(ledger, k) is JobStatus.HELD


def test_a_door_scheduling_a_held_key_earlier_does_not_lift_the_hold(ledger: Ledger) -> None:
    (k,) = seed(ledger, 1)
    control(ledger, HOLD, keys=[k])
    ledger.schedule(
        POLICY.name,
        POLICY.version,
        lambda j: POLICY.name,
        [NewJob("t0", "o0000", T0 - timedelta(days=1))],
        T0,
    )
    assert status(ledger, k) is JobStatus.HELD
    assert released(ledger, T0 + timedelta(days=1)) == set()


# -- postpone -------------------------------------------------------------------------------------


def test_postpone_moves_the_due_time_later_and_no_run_claims_it_before(ledger: Ledger) -> None:
    # Given a due job
    (k,) = seed(ledger, 1)
    later = T0 + timedelta(days=7)
    # When it is postponed a week, and a door schedules it again at its old due time
    moved = control(ledger, POSTPONE, keys=[k], until=later)
    ledger.schedule(
        POLICY.name, POLICY.version, lambda j: POLICY.name, [NewJob("t0", "o0000", T0)], T0
    )
    # Then it is due in a week, not released a second before, released at the time
    job = ledger.get(k)
    assert job is not None
    assert moved == [k]
    assert (job.due_at, job.next_attempt_at, job.postponed_until) == (later, later, later)
    assert released(ledger, later - timedelta(seconds=1)) == set()
    assert released(ledger, later) == {k}


def test_postpone_never_moves_a_job_earlier(ledger: Ledger) -> None:
    (k,) = seed(ledger, 1, due=T0 + timedelta(days=10))
    assert control(ledger, POSTPONE, keys=[k], until=T0 + timedelta(days=1)) == []
    job = ledger.get(k)
    assert job is not None
    assert job.due_at == T0 + timedelta(days=10)


# -- filters, dry run, max, refusals ----------------------------------------------------------


def test_a_dry_run_lists_the_jobs_and_changes_and_records_nothing(
    ledger: Ledger, db_url: str
) -> None:
    keys = seed(ledger, 4)
    report = control_jobs(
        CANCEL,
        POLICY.name,
        ledger,
        JobSelection(tenant_id="t1"),
        actor="ops",
        now=T0,
        reason="r",
        dry_run=True,
    )
    assert (report.moved, report.keys, report.from_states) == (
        2,
        [keys[1], keys[3]],
        {"pending": 2},
    )
    assert ledger.counts(POLICY.name)[JobStatus.PENDING] == 4
    assert actions(db_url) == []


def test_max_bounds_the_jobs_moved(ledger: Ledger) -> None:
    seed(ledger, 5)
    moved = control(ledger, HOLD, selection=JobSelection(statuses=(JobStatus.PENDING,)), limit=2)
    assert len(moved) == 2
    assert ledger.counts(POLICY.name)[JobStatus.HELD] == 2


def test_filters_by_outcome_and_due_range_reach_only_their_jobs(ledger: Ledger) -> None:
    early = seed(ledger, 2, due=T0)
    late = [k for k in seed(ledger, 4, due=T0 + timedelta(days=3)) if k not in early]
    ledger.mark_failed(early[0], OutcomeClass.PERMANENT, "http_422", T0, count_attempt=True)
    by_outcome = control(ledger, CANCEL, selection=JobSelection(outcomes=(OutcomeClass.PERMANENT,)))
    by_due = control(
        ledger,
        HOLD,
        selection=JobSelection(due_from=T0 + timedelta(days=1), due_before=T0 + timedelta(days=4)),
    )
    assert by_outcome == [early[0]]
    assert sorted(by_due) == sorted(late)


def test_refusals_name_the_fix(ledger: Ledger) -> None:
    seed(ledger, 1)
    with pytest.raises(OperatorError, match="choose the jobs"):
        control_jobs(CANCEL, POLICY.name, ledger, JobSelection(), actor="o", now=T0, reason="r")
    with pytest.raises(OperatorError, match="give a reason"):
        control_jobs(HOLD, POLICY.name, ledger, JobSelection(tenant_id="t0"), actor="o", now=T0)
    with pytest.raises(OperatorError, match="moves jobs from held only"):
        control_jobs(
            UNHOLD,
            POLICY.name,
            ledger,
            JobSelection(statuses=(JobStatus.PENDING,)),
            actor="o",
            now=T0,
        )
    with pytest.raises(OperatorError, match="in the future"):
        control_jobs(
            POSTPONE,
            POLICY.name,
            ledger,
            JobSelection(tenant_id="t0"),
            actor="o",
            now=T0,
            until=T0,
            reason="r",
        )


def test_postpone_needs_a_reason_and_records_it(ledger: Ledger, db_url: str) -> None:
    (k,) = seed(ledger, 1)
    later = T0 + timedelta(days=7)
    for reason in (None, " "):
        with pytest.raises(OperatorError, match=r"give a reason to postpone \(--reason\)"):
            control_jobs(
                POSTPONE,
                POLICY.name,
                ledger,
                JobSelection(keys=(k,)),
                actor="o",
                now=T0,
                until=later,
                reason=reason,
            )
    assert actions(db_url) == []
    control(ledger, POSTPONE, keys=[k], until=later, reason="vendor freeze CR-9")
    assert actions(db_url) == [("postpone", "ops", "vendor freeze CR-9")]


def test_postpone_refuses_a_time_past_the_bound_and_moves_nothing(ledger: Ledger) -> None:
    # Given a due job, and a bound of 365 days (the default) or 30 (a policy's own)
    (k,) = seed(ledger, 1)
    # When postponing it to the end of time, then just past a 30-day bound
    with pytest.raises(OperatorError, match=r"at most 365 days ahead.*max_postpone_days"):
        control(ledger, POSTPONE, keys=[k], until=datetime(9999, 12, 31, tzinfo=UTC))
    with pytest.raises(OperatorError, match="at most 30 days ahead"):
        control(
            ledger,
            POSTPONE,
            keys=[k],
            until=T0 + timedelta(days=30, seconds=1),
            max_postpone=timedelta(days=30),
        )
    # Then it is still due when it was; at the bound itself the postponement goes through
    job = ledger.get(k)
    assert job is not None
    assert (job.due_at, job.postponed_until) == (T0, None)
    moved = control(
        ledger, POSTPONE, keys=[k], until=T0 + timedelta(days=30), max_postpone=timedelta(days=30)
    )
    assert moved == [k]


# -- the consumer and redrive ----------------------------------------------------------------------


def test_a_cancelled_or_held_jobs_redelivered_messages_are_acknowledged_uncalled(
    pipeline: Pipeline,
) -> None:
    # Given two jobs published (leased), one then cancelled and the other held
    pipeline.seed(2)
    records = publish_all(pipeline)
    keys = [JobMessage.model_validate_json(r["body"]).key for r in records]
    now = datetime.now(UTC)
    for action, k in zip((CANCEL, HOLD), keys, strict=True):
        control_jobs(
            action,
            "exports",
            pipeline.ledger,
            JobSelection(keys=(k,)),
            actor="ops",
            now=now,
            reason="r",
        )
    # When their messages are delivered, and redelivered
    first = invoke(pipeline, records)
    again = invoke(pipeline, [{**r, "messageId": f"again-{i}"} for i, r in enumerate(records)])
    # Then both are acknowledged, the vendor is never called, the ledger is unchanged
    assert failed_ids(first) == failed_ids(again) == set()
    assert pipeline.vendor.audit().calls_total == 0
    assert [status(pipeline.ledger, k) for k in keys] == [JobStatus.CANCELLED, JobStatus.HELD]


def test_redrive_drops_a_cancelled_jobs_letter_and_keeps_a_held_ones(pipeline: Pipeline) -> None:
    # Given three dead letters, one job cancelled and one held
    dead_letters(pipeline, 3)
    now = datetime.now(UTC)
    for action, i in ((CANCEL, 0), (HOLD, 1)):
        control_jobs(
            action,
            "exports",
            pipeline.ledger,
            JobSelection(keys=(key(i),)),
            actor="o",
            now=now,
            reason="r",
        )
    # When redriving
    report = redrive(pipeline)
    # Then only the third goes back to work; the cancelled and held jobs stay as they are
    assert (report.moved, report.dropped_cancelled, report.kept_held) == (1, 1, 1)
    assert work_queue_bodies(pipeline) == [body(2)]
    assert status(pipeline.ledger, key(0)) is JobStatus.CANCELLED
    assert status(pipeline.ledger, key(1)) is JobStatus.HELD


# -- the CLI ------------------------------------------------------------------------------------

POLICY_FILE = """
[[policies]]
name = "exports"
"""


def cli(
    db_url: str, tmp_path: Path, *args: str, stdin: str | None = None, policy: str = POLICY_FILE
) -> Any:
    config = tmp_path / "sweeper.toml"
    config.write_text(policy)
    return CliRunner().invoke(
        main,
        [
            *args,
            "--config",
            str(config),
            "--database-url",
            db_url,
            "--local-file",
            str(tmp_path / "none.json"),
        ],
        input=stdin,
    )


def test_cli_cancel_by_key_records_actor_and_reason(
    ledger: Ledger, db_url: str, tmp_path: Path
) -> None:
    (k,) = seed(ledger, 1)
    result = cli(
        db_url,
        tmp_path,
        "cancel",
        "--key",
        k,
        "--reason",
        "ticket 42",
        "--actor",
        "alice",
        "--json",
    )
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["keys"] == [k]
    assert actions(db_url) == [("cancel", "alice", "ticket 42")]


def test_cli_hold_without_a_reason_is_refused_in_one_line(
    ledger: Ledger, db_url: str, tmp_path: Path
) -> None:
    seed(ledger, 1)
    result = cli(db_url, tmp_path, "hold", "--tenant", "t0")
    assert result.exit_code != 0
    assert "--reason" in result.output
    assert "Traceback" not in result.output


def test_cli_asks_for_confirmation_above_the_threshold(
    ledger: Ledger, db_url: str, tmp_path: Path
) -> None:
    # Given more jobs than the threshold
    seed(ledger, CONFIRM_ABOVE + 1)
    # When holding them all without --yes (not a terminal), then with it
    refused = cli(db_url, tmp_path, "hold", "--status", "pending", "--reason", "audit")
    dry = cli(db_url, tmp_path, "hold", "--status", "pending", "--reason", "audit", "--dry-run")
    done = cli(db_url, tmp_path, "hold", "--status", "pending", "--reason", "audit", "--yes")
    # Then the first changes nothing and says how to go on, in one line; the dry run needs no
    # confirmation; the confirmed one holds them all
    assert refused.exit_code != 0
    assert "pass --yes" in refused.output
    assert len(refused.output.strip().splitlines()) == 1
    assert dry.exit_code == 0
    assert "would move 101" in dry.output
    assert done.exit_code == 0, done.output
    assert ledger.counts(POLICY.name)[JobStatus.HELD] == CONFIRM_ABOVE + 1


def test_cli_postpone_and_unhold(ledger: Ledger, db_url: str, tmp_path: Path) -> None:
    (k,) = seed(ledger, 1)
    later = (datetime.now(UTC) + timedelta(days=60)).replace(microsecond=0)
    postponed = cli(
        db_url, tmp_path, "postpone", "--key", k, "--until", later.isoformat(), "--reason", "CR-9"
    )
    held = cli(db_url, tmp_path, "hold", "--key", k, "--reason", "r")
    unheld = cli(db_url, tmp_path, "unhold", "--key", k)
    bad = cli(db_url, tmp_path, "postpone", "--key", k, "--until", "next tuesday", "--reason", "r")
    assert (postponed.exit_code, held.exit_code, unheld.exit_code) == (0, 0, 0)
    job = ledger.get(k)
    assert job is not None
    assert (job.status, job.due_at) == (JobStatus.PENDING, later)
    assert bad.exit_code != 0
    assert "--until" in bad.output


def test_cli_postpone_without_a_reason_or_past_the_bound_is_refused_in_one_line(
    ledger: Ledger, db_url: str, tmp_path: Path
) -> None:
    (k,) = seed(ledger, 1)
    soon = (datetime.now(UTC) + timedelta(days=1)).isoformat()
    no_reason = cli(db_url, tmp_path, "postpone", "--key", k, "--until", soon)
    forever = cli(
        db_url, tmp_path, "postpone", "--key", k, "--until", "9999-12-31T00:00:00Z", "--reason", "r"
    )
    for refused, names in ((no_reason, "--reason"), (forever, "max_postpone_days")):
        assert refused.exit_code != 0
        assert names in refused.output
        assert "Traceback" not in refused.output
    assert len(forever.output.strip().splitlines()) == 1
    job = ledger.get(k)
    assert job is not None
    assert (job.due_at, job.postponed_until) == (T0, None)


def test_cli_postpone_keeps_to_the_policys_own_bound(
    ledger: Ledger, db_url: str, tmp_path: Path
) -> None:
    # Given a policy that allows postponing 30 days at most
    (k,) = seed(ledger, 1)
    later = (datetime.now(UTC) + timedelta(days=60)).isoformat()
    # When an operator postpones a job 60 days
    result = cli(
        db_url,
        tmp_path,
        *("postpone", "--key", k, "--until", later, "--reason", "r"),
        policy=POLICY_FILE + "max_postpone_days = 30\n",
    )
    # Then it is refused, naming the policy's bound, and the job is where it was
    assert result.exit_code != 0
    assert "at most 30 days ahead" in result.output
    job = ledger.get(k)
    assert job is not None
    assert job.postponed_until is None


def test_inspect_lists_held_jobs_from_when_their_hold_began(ledger: Ledger) -> None:
    from sweeper.operations import inspect_jobs

    # Given a held job and a pending one not yet overdue
    held, _pending = seed(ledger, 2, due=T0 + timedelta(days=1))
    control(ledger, HOLD, keys=[held], reason="legal")
    # When inspecting
    rows = inspect_jobs(POLICY.name, ledger, now=T0, stuck_after=timedelta(hours=1), limit=10)
    # Then the held job is listed as held, with the time its hold began
    assert [(r["kind"], r["status"], r["operation_key"]) for r in rows] == [("held", "held", held)]
    assert rows[0]["updated_at"] == T0.isoformat()

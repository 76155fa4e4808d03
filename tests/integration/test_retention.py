"""Scheduled retention against the real local PostgreSQL: the prune handler as Lambda runs it,
and the budget that stops a run on time."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest

from functions.prune import app as prune_app
from sweeper.config import RetentionConfig
from sweeper.errors import ConfigError
from sweeper.ledger.store import Ledger
from sweeper.models import JobStatus, NewJob, OutcomeClass
from sweeper.prune.retention import BUDGET, DONE, RETENTION_ACTOR, RETENTION_REASON, run_retention
from tests.conftest import Pipeline, load_event

pytestmark = pytest.mark.integration

POLICY = "exports"


def add(ledger: Ledger, prefix: str, n: int, due: datetime) -> list[str]:
    jobs = [NewJob("t", f"{prefix}{i:04d}", due) for i in range(n)]
    ledger.schedule(POLICY, 1, lambda j: POLICY, jobs, due)
    return [f"{POLICY}:t:{prefix}{i:04d}:v1" for i in range(n)]


def table(db_url: str, query: str) -> list[Any]:
    with psycopg.connect(db_url) as conn:
        return [row[0] for row in conn.execute(query)]


def test_the_prune_handler_deletes_old_settled_rows_and_keeps_fresh_and_unsettled_ones(
    pipeline: Pipeline, db_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given, under the default retention (jobs 30 days, runs 90, operator actions 365):
    now = datetime.now(UTC)
    old, fresh = now - timedelta(days=400), now - timedelta(days=1)
    ledger = pipeline.ledger
    # settled jobs completed long ago and yesterday, and old jobs still unsettled
    old_done = add(ledger, "old", 3, old)
    fresh_done = add(ledger, "new", 2, old)
    unsettled = add(ledger, "open", 2, old)
    for key in old_done:
        ledger.mark_succeeded(key, OutcomeClass.ACCEPTED, old)
    for key in fresh_done:
        ledger.mark_succeeded(key, OutcomeClass.ACCEPTED, fresh)
    # an old job an operator retried long ago (its event names the action), settled since
    (retried,) = add(ledger, "retried", 1, old)
    ledger.mark_failed(retried, OutcomeClass.PERMANENT, "http_400", old, count_attempt=True)
    ledger.retry_failed(POLICY, "ops", old, keys=[retried])
    ledger.mark_succeeded(retried, OutcomeClass.ACCEPTED, old)
    # an old retry of a job that is pending again: its event keeps its action
    (reopened,) = unsettled[:1]
    ledger.mark_failed(reopened, OutcomeClass.PERMANENT, "http_400", old, count_attempt=True)
    ledger.retry_failed(POLICY, "ops", old, keys=[reopened])
    # old and fresh run records and operator actions, and another policy's old ones
    ledger.start_run(POLICY, old, "old-run", old)
    ledger.start_run(POLICY, fresh, "fresh-run", fresh)
    ledger.start_run("listings", old, "other-run", old)
    ledger.record_action(POLICY, "pause", "ops", old)
    ledger.record_action(POLICY, "resume", "ops", fresh)
    ledger.record_action("listings", "pause", "ops", old)
    # When the schedule invokes the prune
    report = prune_app.handler(load_event("scheduler_event.json"), pipeline.lambda_context("prune"))
    # Then the old settled jobs (with their events), the old run and the old unreferenced
    # actions went, and everything fresh, unsettled or another policy's stayed
    assert report["stop_reason"] == DONE
    assert report["complete"] is True
    assert (report["jobs_deleted"], report["job_events_deleted"]) == (4, 1)
    assert (report["runs_deleted"], report["operator_actions_deleted"]) == (1, 2)
    for key in [*old_done, retried]:
        assert ledger.get(key) is None
    for key in fresh_done:
        job = ledger.get(key)
        assert job is not None
        assert job.status is JobStatus.SUCCEEDED
    assert {k for k in unsettled if ledger.get(k) is not None} == set(unsettled)
    assert sorted(table(db_url, "SELECT batch_id FROM sweeper_runs")) == ["fresh-run", "other-run"]
    actions = table(
        db_url, "SELECT policy || ':' || action FROM sweeper_operator_actions ORDER BY id"
    )
    assert actions == ["exports:retry", "exports:resume", "listings:pause", "exports:prune"]
    assert len(table(db_url, "SELECT id FROM sweeper_job_events")) == 1
    # and the run emitted its own metrics (EMF, as the other functions do)
    emitted = [json.loads(line) for line in capsys.readouterr().out.splitlines() if "_aws" in line]
    (metrics,) = [m for m in emitted if "PrunedJobs" in m]
    figures = {name: metrics[name] for name in ("PrunedJobs", "PrunedRuns")}
    assert figures == {"PrunedJobs": [4.0], "PrunedRuns": [1.0]}
    assert "PruneIncomplete" not in metrics  # a complete run: a zero, not sent
    assert metrics["policy"] == POLICY


def test_the_prune_handler_refuses_another_policy_s_schedule(pipeline: Pipeline) -> None:
    event = load_event("scheduler_event.json")
    event["detail"]["policy"] = "listings"
    with pytest.raises(ConfigError, match="listings"):
        prune_app.handler(event, pipeline.lambda_context("prune"))


def test_the_budget_stops_a_prune_between_batches_and_the_next_run_goes_on(
    ledger: Ledger, db_url: str
) -> None:
    # Given 23 old settled jobs and batches of 5 rows
    now = datetime(2026, 11, 29, 4, 0, tzinfo=UTC)
    old = now - timedelta(days=60)
    for key in add(ledger, "o", 23, old):
        ledger.mark_succeeded(key, OutcomeClass.ACCEPTED, old)
    retention = RetentionConfig(batch_rows=5)
    # When the budget leaves room for three batches only
    calls = [0]

    def three_batches() -> float:
        calls[0] += 1
        return 60.0 if calls[0] <= 3 else 0.5

    first = run_retention(POLICY, retention, ledger, now=now, remaining_seconds=three_batches)
    # Then it stopped after three batches, said so, and left the rest for the next run
    assert (first.stop_reason, first.batches, first.jobs_deleted) == (BUDGET, 3, 15)
    assert dict(first.metrics())["PruneIncomplete"] == 1
    assert ledger.counts(POLICY)[JobStatus.SUCCEEDED] == 8
    # and the next run, with time enough, finishes
    second = run_retention(POLICY, retention, ledger, now=now, remaining_seconds=lambda: 60.0)
    assert (second.stop_reason, second.jobs_deleted) == (DONE, 8)
    assert dict(second.metrics())["PruneIncomplete"] == 0
    assert ledger.counts(POLICY)[JobStatus.SUCCEEDED] == 0
    ends = table(
        db_url,
        "SELECT s.detail FROM sweeper_operator_action_steps s "
        "WHERE s.detail ->> 'done' = 'true' ORDER BY s.id",
    )
    assert [(d["jobs"], d["complete"]) for d in ends] == [(15, False), (8, True)]


def test_a_retention_run_is_recorded_as_the_function_before_its_first_batch_and_keeps_failed_jobs(
    ledger: Ledger, db_url: str
) -> None:
    # Given jobs failed 60 and 100 days ago and one succeeded 60 days ago; failed jobs are kept 90
    now = datetime(2026, 11, 29, 4, 0, tzinfo=UTC)
    recent, ancient, done = add(ledger, "o", 3, now - timedelta(days=200))
    for key, days in ((recent, 60), (ancient, 100)):
        at = now - timedelta(days=days)
        ledger.mark_failed(key, OutcomeClass.PERMANENT, "http_400", at, count_attempt=True)
    ledger.mark_succeeded(done, OutcomeClass.ACCEPTED, now - timedelta(days=60))
    first_batch: list[Any] = []
    original = ledger.prune_settled_batch

    def watched(*args: Any, **kw: Any) -> tuple[int, int]:
        first_batch.append(
            table(db_url, "SELECT actor || ' / ' || reason FROM sweeper_operator_actions")
        )
        return original(*args, **kw)

    ledger.prune_settled_batch = watched  # type: ignore[method-assign]
    # When the scheduled retention runs
    report = run_retention(
        POLICY, RetentionConfig(failed_job_days=90), ledger, now=now, remaining_seconds=lambda: 60.0
    )
    # Then its action, the function's with its fixed reason, was there before the first batch
    assert first_batch[0] == [f"{RETENTION_ACTOR} / {RETENTION_REASON}"]
    # and the unfulfilled obligation younger than its retention stayed
    assert report.jobs_deleted == 2
    assert ledger.get(recent) is not None
    assert (ledger.get(ancient), ledger.get(done)) == (None, None)
    steps = table(db_url, "SELECT detail FROM sweeper_operator_action_steps ORDER BY id")
    assert steps[0] == {"jobs": 2, "failed_jobs": 1, "job_events": 0}


def test_a_batch_is_not_started_without_twice_the_longest_batch_left(ledger: Ledger) -> None:
    # Given old settled jobs, and a clock on which each batch takes 10 s
    now = datetime(2026, 11, 29, 4, 0, tzinfo=UTC)
    old = now - timedelta(days=60)
    for key in add(ledger, "o", 20, old):
        ledger.mark_succeeded(key, OutcomeClass.ACCEPTED, old)
    clock = [0.0]

    def monotonic() -> float:
        clock[0] += 10.0  # each batch: 10 s between its start and its end
        return clock[0]

    # When 15 s remain at every check: enough for one batch, not for twice the longest batch
    report = run_retention(
        POLICY,
        RetentionConfig(batch_rows=5),
        ledger,
        now=now,
        remaining_seconds=lambda: 15.0,
        monotonic=monotonic,
    )
    # Then it ran the first batch, then stopped
    assert (report.stop_reason, report.batches, report.jobs_deleted) == (BUDGET, 1, 5)

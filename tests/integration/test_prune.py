"""The operator's prune against the real ledger: what it keeps (failed jobs until their policy's
retention), what it needs (a reason), and what it records (its intent first, each batch as it
goes, so an interrupted prune leaves the record of what it deleted)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest

from sweeper.config import Policy
from sweeper.errors import OperatorError
from sweeper.ledger.store import Ledger
from sweeper.models import JobStatus, NewJob, OutcomeClass
from sweeper.prune.run import PruneReport, failed_retention, prune

pytestmark = pytest.mark.integration

T0 = datetime(2026, 11, 29, 2, 0, tzinfo=UTC)
POLICY = Policy(name="exports", schedule="rate(5 minutes)")
KEEP_FAILED = timedelta(days=90)


def seed(ledger: Ledger, n: int, prefix: str = "o") -> list[str]:
    due = T0 - timedelta(days=400)
    jobs = [NewJob("t", f"{prefix}{i:04d}", due) for i in range(n)]
    ledger.schedule(POLICY.name, POLICY.version, lambda j: POLICY.name, jobs, due)
    return [f"exports:t:{prefix}{i:04d}:v1" for i in range(n)]


def run(ledger: Ledger, **kw: Any) -> PruneReport:
    kw.setdefault("older_than", timedelta(days=30))
    kw.setdefault("failed_older_than", KEEP_FAILED)
    kw.setdefault("now", T0)
    kw.setdefault("actor", "ops")
    kw.setdefault("reason", "ticket 7: quarterly cleanup")
    return prune(ledger, **kw)


def recorded(db_url: str) -> list[tuple[str, str, str | None, dict[str, Any], list[Any]]]:
    """Each prune action: (actor, action, reason, detail, its steps' details in order)."""
    with psycopg.connect(db_url) as conn:
        rows = conn.execute(
            "SELECT a.actor, a.action, a.reason, a.detail, "
            "coalesce(array_agg(s.detail ORDER BY s.id) FILTER (WHERE s.id IS NOT NULL), '{}') "
            "FROM sweeper_operator_actions a "
            "LEFT JOIN sweeper_operator_action_steps s ON s.action_id = a.id "
            "WHERE a.action = 'prune' GROUP BY a.id ORDER BY a.id"
        ).fetchall()
    return [(str(a), str(b), c, dict(d), list(e)) for a, b, c, d, e in rows]


def test_prune_deletes_old_settled_rows_in_batches_and_keeps_the_rest(ledger: Ledger) -> None:
    # Given 25 jobs settled 40 days ago, 5 settled yesterday and 3 still pending
    keys = seed(ledger, 33)
    old = T0 - timedelta(days=40)
    for key in keys[:25]:
        ledger.mark_succeeded(key, OutcomeClass.ACCEPTED, old)
    for key in keys[25:30]:
        ledger.mark_succeeded(key, OutcomeClass.ACCEPTED, T0 - timedelta(days=1))
    batches: list[int] = []
    # When pruning what is older than 30 days, ten rows per transaction
    report = run(ledger, batch_rows=10, progress=lambda r: batches.append(r.jobs_deleted))
    # Then the old settled rows are gone, in three job batches, and nothing else is
    assert report.jobs_deleted == 25
    assert batches[:3] == [10, 20, 25]
    counts = ledger.counts("exports")
    assert (counts[JobStatus.SUCCEEDED], counts[JobStatus.PENDING]) == (5, 3)


def test_prune_keeps_at_least_a_day(ledger: Ledger) -> None:
    with pytest.raises(OperatorError):
        run(ledger, older_than=timedelta(hours=1))


def test_prune_keeps_a_failed_job_until_its_policys_retention(ledger: Ledger) -> None:
    # Given a job that failed 40 days ago, one that failed 100 days ago, one succeeded 40 ago
    recent, ancient, done = seed(ledger, 3)
    for key, days in ((recent, 40), (ancient, 100)):
        at = T0 - timedelta(days=days)
        ledger.mark_failed(key, OutcomeClass.PERMANENT, "http_400", at, count_attempt=True)
    ledger.mark_succeeded(done, OutcomeClass.ACCEPTED, T0 - timedelta(days=40))
    # When pruning what is older than 30 days, failed jobs kept 90
    report = run(ledger)
    # Then the succeeded job and the failed job past its retention went; the unfulfilled
    # obligation younger than its retention stayed
    assert report.jobs_deleted == 2
    assert (ledger.get(done), ledger.get(ancient)) == (None, None)
    assert ledger.get(recent) is not None
    assert report.failed_cutoff == (T0 - KEEP_FAILED).isoformat()


def test_the_failed_retention_of_several_policies_is_the_longest() -> None:
    short = Policy(name="a", retention={"failed_job_days": 30})
    long = Policy(name="b", retention={"failed_job_days": 200})
    # a failed job is never kept less than a succeeded one
    settled = Policy(name="c", retention={"settled_job_days": 120, "run_days": 120})
    assert failed_retention([short, long]) == timedelta(days=200)
    assert failed_retention([settled]) == timedelta(days=120)
    assert failed_retention([]) == timedelta(days=90)


def test_prune_needs_a_reason_and_without_one_deletes_and_records_nothing(
    ledger: Ledger, db_url: str
) -> None:
    (key,) = seed(ledger, 1)
    ledger.mark_succeeded(key, OutcomeClass.ACCEPTED, T0 - timedelta(days=40))
    for reason in (None, "  "):
        with pytest.raises(OperatorError, match="give a reason to prune"):
            run(ledger, reason=reason)
    assert ledger.get(key) is not None
    assert recorded(db_url) == []


def test_an_interrupted_prune_leaves_its_intent_and_every_batch_it_deleted_recorded(
    ledger: Ledger, db_url: str
) -> None:
    # Given 25 jobs settled 40 days ago
    for key in seed(ledger, 25):
        ledger.mark_succeeded(key, OutcomeClass.ACCEPTED, T0 - timedelta(days=40))
    # When a prune in batches of 10 is cut short after its second batch (the process dies
    # between two batches: each batch committed on its own)
    seen_before_first: list[Any] = []

    def stop_after_two(report: PruneReport) -> None:
        if report.batches == 2:
            raise KeyboardInterrupt

    original = ledger.prune_settled_batch

    def watched(*args: Any, **kw: Any) -> tuple[int, int]:
        if not seen_before_first:
            seen_before_first.append(recorded(db_url))
        return original(*args, **kw)

    ledger.prune_settled_batch = watched  # type: ignore[method-assign]
    with pytest.raises(KeyboardInterrupt):
        run(ledger, actor="alice", batch_rows=10, progress=stop_after_two)
    # Then before the first deletion the action was recorded: who, why, the cutoffs
    ((before,),) = [seen_before_first[0]]
    assert before[:3] == ("alice", "prune", "ticket 7: quarterly cleanup")
    assert before[3]["cutoff"] == (T0 - timedelta(days=30)).isoformat()
    assert before[3]["failed_cutoff"] == (T0 - KEEP_FAILED).isoformat()
    assert before[4] == []
    # and after the interruption its steps say exactly what it deleted, batch by batch, and
    # none says it finished
    ((_, _, _, _, steps),) = recorded(db_url)
    assert [s["jobs"] for s in steps] == [10, 10]
    assert not any(s.get("done") for s in steps)
    assert ledger.counts("exports")[JobStatus.SUCCEEDED] == 25 - sum(s["jobs"] for s in steps)


def test_a_finished_prune_says_so_with_its_totals(ledger: Ledger, db_url: str) -> None:
    for key in seed(ledger, 12):
        ledger.mark_succeeded(key, OutcomeClass.ACCEPTED, T0 - timedelta(days=40))
    ledger.start_run("exports", T0 - timedelta(days=40), "old-run", T0 - timedelta(days=40))
    run(ledger, batch_rows=10)
    ((_, _, _, _, steps),) = recorded(db_url)
    assert steps == [
        {"jobs": 10, "failed_jobs": 0, "job_events": 0},
        {"jobs": 2, "failed_jobs": 0, "job_events": 0},
        {"runs": 1},
        {"jobs": 12, "runs": 1, "done": True},
    ]


def test_the_cli_refuses_a_prune_without_a_reason_and_records_one_with_it(
    ledger: Ledger, db_url: str, tmp_path: Path
) -> None:
    from click.testing import CliRunner

    from sweeper_cli import main

    (key,) = seed(ledger, 1)
    ledger.mark_succeeded(key, OutcomeClass.ACCEPTED, datetime.now(UTC) - timedelta(days=40))
    config = tmp_path / "sweeper.toml"
    config.write_text('[[policies]]\nname = "exports"\n')
    where = ["--config", str(config), "--database-url", db_url, "--local-file", str(tmp_path / "x")]
    args = ["prune", "--older-than-days", "30", "--actor", "alice", *where]
    refused = CliRunner().invoke(main, args)
    assert refused.exit_code != 0
    assert "--reason" in refused.output
    assert "Traceback" not in refused.output
    assert (ledger.get(key) is not None, recorded(db_url)) == (True, [])
    done = CliRunner().invoke(main, [*args, "--reason", "ticket 7"])
    assert done.exit_code == 0, done.output
    assert ledger.get(key) is None
    assert [r[:3] for r in recorded(db_url)] == [("alice", "prune", "ticket 7")]

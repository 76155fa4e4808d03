"""The console page's reads against the real ledger: activity per time bucket, the search, one
job's history with who acted and why."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from sweeper.config import Policy
from sweeper.ledger.store import Ledger
from sweeper.models import ControlAction, JobSelection, NewJob, OutcomeClass
from sweeper.operations import activity, control_jobs, job_history, search_jobs
from sweeper.producer.run import run_producer
from tests.fakes import FakePublisher

pytestmark = pytest.mark.integration

T0 = datetime(2026, 11, 29, 2, 0, tzinfo=UTC)
POLICY = Policy(name="exports", schedule="rate(5 minutes)")
OTHER = Policy(name="reports", schedule="rate(5 minutes)")


def seed(ledger: Ledger, policy: Policy, jobs: list[NewJob]) -> None:
    ledger.schedule(policy.name, policy.version, lambda j: policy.name, jobs, T0)


def test_activity_counts_claims_and_completions_in_their_buckets(ledger: Ledger) -> None:
    # Given three jobs released by a run at 02:01, two settled at 02:20, one failed at 02:50,
    # and another policy's job released and settled in the same window
    seed(ledger, POLICY, [NewJob("t1", f"o{i}", T0) for i in range(3)])
    seed(ledger, OTHER, [NewJob("t1", "x", T0)])
    at = T0 + timedelta(minutes=1)
    for policy in (POLICY, OTHER):
        run_producer(
            policy, at, ledger, FakePublisher(), clock=lambda: at, remaining_seconds=lambda: 60.0
        )
    settled = T0 + timedelta(minutes=20)
    for key in ("exports:t1:o0:v1", "exports:t1:o1:v1", "reports:t1:x:v1"):
        ledger.mark_succeeded(key, OutcomeClass.ACCEPTED, settled)
    ledger.mark_failed(
        "exports:t1:o2:v1",
        OutcomeClass.PERMANENT,
        "http_400",
        T0 + timedelta(minutes=50),
        count_attempt=True,
    )
    # When the page reads the last hour at 02:59 in 15-minute buckets
    found = activity(
        POLICY.name, ledger, now=T0 + timedelta(minutes=59), hours=1, bucket_minutes=15
    )
    # Then every bucket is there, each figure in the bucket it happened in, this policy's only
    assert [(b["at"], b["claimed"], b["succeeded"], b["failed"]) for b in found] == [
        ((T0 + timedelta(minutes=m)).isoformat(), c, s, f)
        for m, c, s, f in ((0, 3, 0, 0), (15, 0, 2, 0), (30, 0, 0, 0), (45, 0, 0, 1))
    ]
    # And an hour later those buckets have left the window
    later = activity(POLICY.name, ledger, now=T0 + timedelta(hours=2), hours=1, bucket_minutes=15)
    assert sum(b["claimed"] + b["succeeded"] + b["failed"] for b in later) == 0


def test_search_finds_a_key_or_a_tenants_jobs_of_the_policy_only(ledger: Ledger) -> None:
    # Given two tenants' jobs, and the same tenant under another policy
    seed(ledger, POLICY, [NewJob("t1", "a", T0), NewJob("t1", "b", T0), NewJob("t2", "c", T0)])
    seed(ledger, OTHER, [NewJob("t1", "z", T0)])
    # When searching a key, a tenant, nothing and a stranger
    by_key = search_jobs(POLICY.name, ledger, "exports:t2:c:v1")
    by_tenant = search_jobs(POLICY.name, ledger, " t1 ")
    # Then the key finds its job, the tenant its jobs newest first, and nothing finds nothing
    assert [h["operation_key"] for h in by_key] == ["exports:t2:c:v1"]
    assert [h["operation_key"] for h in by_tenant] == ["exports:t1:b:v1", "exports:t1:a:v1"]
    assert search_jobs(POLICY.name, ledger, "") == []
    assert search_jobs(POLICY.name, ledger, "t9") == []


def test_a_jobs_history_shows_its_row_and_each_operator_event_with_who_and_why(
    ledger: Ledger,
) -> None:
    # Given a job held, then postponed, by two operators
    seed(ledger, POLICY, [NewJob("t1", "a", T0)])
    key = "exports:t1:a:v1"
    selection = JobSelection(keys=(key,))
    control_jobs(
        ControlAction.HOLD, POLICY.name, ledger, selection, actor="ana", now=T0, reason="legal"
    )
    control_jobs(
        ControlAction.POSTPONE,
        POLICY.name,
        ledger,
        selection,
        actor="bo",
        now=T0 + timedelta(minutes=1),
        until=T0 + timedelta(days=2),
        reason="vendor freeze",
    )
    # When the page reads its history
    history = job_history(key, ledger)
    # Then it has the row as the ledger has it and both events, in order, with who and why
    assert history is not None
    assert (history["status"], history["hold_reason"]) == ("held", "legal")
    assert history["postponed_until"] == (T0 + timedelta(days=2)).isoformat()
    assert [(e["event"], e["actor"], e["reason"]) for e in history["events"]] == [
        ("held", "ana", "legal"),
        ("postponed", "bo", "vendor freeze"),
    ]
    assert history["events"][1]["previous_due_at"] == T0.isoformat()
    assert job_history("exports:t1:nope:v1", ledger) is None

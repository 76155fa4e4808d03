"""The console page's reads: activity per time bucket, search, one job's history."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from sweeper.ledger.store import Ledger
from sweeper.operations.text import iso

#: The console page's chart: this many hours, in buckets of this many minutes.
ACTIVITY_HOURS = 6
ACTIVITY_BUCKET_MINUTES = 15
#: Search hits and history events shown at most.
SEARCH_LIMIT = 100
HISTORY_EVENTS = 200


def activity(
    policy: str,
    ledger: Ledger,
    *,
    now: datetime,
    hours: int = ACTIVITY_HOURS,
    bucket_minutes: int = ACTIVITY_BUCKET_MINUTES,
) -> list[dict[str, Any]]:
    """Claims (jobs the runs published) and completions (jobs settled) per time bucket over the
    last `hours`, oldest first; buckets start on multiples of `bucket_minutes` past the hour,
    the last one holding `now`."""
    bucket = timedelta(minutes=bucket_minutes)
    start = now.replace(minute=now.minute - now.minute % bucket_minutes, second=0, microsecond=0)
    end = start + bucket
    since = end - timedelta(hours=hours)
    return [
        {
            "at": iso(b.at),
            "claimed": b.claimed,
            "succeeded": b.succeeded,
            "failed": b.failed,
        }
        for b in ledger.activity(policy, since, end, bucket)
    ]


def search_jobs(
    policy: str, ledger: Ledger, query: str, *, limit: int = SEARCH_LIMIT
) -> list[dict[str, Any]]:
    """The job with this operation key, or this tenant's jobs (ids, states, times)."""
    query = query.strip()
    if not query:
        return []
    return [
        {
            "operation_key": job.operation_key,
            "tenant_id": job.tenant_id,
            "status": job.status.value,
            "outcome": None if job.last_outcome is None else job.last_outcome.value,
            "error_code": job.last_error_code,
            "attempts": job.attempt_count,
            "due_at": iso(job.due_at),
            "updated_at": iso(job.updated_at),
        }
        for job in ledger.search(policy, query, limit)
    ]


def job_history(key: str, ledger: Ledger) -> dict[str, Any] | None:
    """One job as the ledger keeps it: its row (attempts, last outcome and error code, lease,
    hold, cancel, postponement, trace, the batch that carried it) and its operator events with
    who acted and why; None when no job has this key."""
    job = ledger.get(key)
    if job is None:
        return None
    return {
        "operation_key": job.operation_key,
        "policy": job.policy,
        "tenant_id": job.tenant_id,
        "object_id": job.object_id,
        "scope": job.scope,
        "status": job.status.value,
        "due_at": iso(job.due_at),
        "next_attempt_at": iso(job.next_attempt_at),
        "attempts": job.attempt_count,
        "retry_round": job.retry_round,
        "outcome": None if job.last_outcome is None else job.last_outcome.value,
        "error_code": job.last_error_code,
        "lease_expires_at": iso(job.lease_expires_at),
        "created_at": iso(job.created_at),
        "updated_at": iso(job.updated_at),
        "completed_at": iso(job.completed_at),
        "held_at": iso(job.held_at),
        "hold_reason": job.hold_reason,
        "cancelled_at": iso(job.cancelled_at),
        "cancel_reason": job.cancel_reason,
        "postponed_until": iso(job.postponed_until),
        "trace_id": job.last_trace_id,
        "batch_id": job.batch_id,
        "events": [
            {
                "at": iso(e.at),
                "event": e.event,
                "from_status": e.from_status,
                "to_status": e.to_status,
                "previous_attempts": e.previous_attempts,
                "previous_outcome": e.previous_outcome,
                "previous_error_code": e.previous_error_code,
                "previous_due_at": iso(e.previous_due_at),
                "actor": e.actor,
                "reason": e.reason,
            }
            for e in ledger.job_events(job.id, HISTORY_EVENTS)
        ],
    }

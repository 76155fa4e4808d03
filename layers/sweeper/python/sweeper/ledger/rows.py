"""The ledger's row types: what its reads return, frozen, ids and times only."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sweeper.models import JobStatus, OutcomeClass


@dataclass(frozen=True, slots=True)
class ScheduleResult:
    inserted: int
    moved_earlier: int
    unchanged: int
    #: Transactions run: 1, or more when a deadlock or serialization failure was retried.
    attempts: int = 1
    #: Jobs not yet claimed whose params the newer ones replaced (each a job event) ...
    params_replaced: int = 0
    #: ... and jobs already claimed whose params were kept, the newer ones set aside.
    params_kept: int = 0


@dataclass(frozen=True, slots=True)
class RunStart:
    batch_id: str
    duplicate: bool  # another invocation already holds this (policy, scheduled time)


@dataclass(frozen=True, slots=True)
class RunRecord:
    batch_id: str
    policy: str
    scheduled_at: datetime
    started_at: datetime
    finished_at: datetime | None
    invocations: int
    reclaimed: int
    discovered: int
    published: int
    publish_failures: int
    oldest_eligible_age_seconds: float | None
    stop_reason: str | None


@dataclass(frozen=True, slots=True)
class BatchAudit:
    """One batch's run record, its outcome counters and its jobs still unsettled."""

    batch_id: str
    scheduled_at: datetime
    started_at: datetime
    finished_at: datetime | None
    stop_reason: str | None
    invocations: int
    discovered: int
    published: int
    resent: int
    publish_failures: int
    oldest_released_age_seconds: float | None
    consumed: int
    succeeded: int
    retried: int
    terminal: int
    duplicates: int
    last_settled_at: datetime | None
    in_flight: int
    #: Deliveries of its jobs the vendor snoozed (no attempt spent; migration 0011).
    snoozed: int = 0
    #: Jobs of the batch an operator cancelled before they settled, and jobs held now.
    cancelled: int = 0
    held: int = 0
    #: Deliveries of its jobs acknowledged uncalled: their time had not come (migration 0013).
    not_yet_due: int = 0


@dataclass(frozen=True, slots=True)
class PolicyState:
    policy: str
    paused: bool
    paused_at: datetime | None
    paused_by: str | None
    reason: str | None
    resumed_at: datetime | None


@dataclass(frozen=True, slots=True)
class InspectRow:
    """A job that needs a human: ids, classes, codes and times, never customer data."""

    operation_key: str
    status: JobStatus
    last_outcome: OutcomeClass | None
    last_error_code: str | None
    attempt_count: int
    due_at: datetime
    next_attempt_at: datetime
    lease_expires_at: datetime | None
    updated_at: datetime
    completed_at: datetime | None
    #: the X-Ray trace of the delivery that last wrote the row (None: no trace header)
    last_trace_id: str | None = None


@dataclass(frozen=True, slots=True)
class RetryingGroup:
    """Unsettled jobs whose last attempt came to one retrying class and code (codes only)."""

    outcome: OutcomeClass
    code: str | None
    jobs: int
    scopes: int
    oldest_due_at: datetime
    most_attempts: int
    last_at: datetime


@dataclass(frozen=True, slots=True)
class Settled:
    """What the ledger shows the consumers settled in the window: how many, first and last."""

    count: int
    first: datetime | None
    last: datetime | None


@dataclass(frozen=True, slots=True)
class FoundJob:
    """A search hit on the console page: ids, state, class and times."""

    operation_key: str
    tenant_id: str
    status: JobStatus
    last_outcome: OutcomeClass | None
    last_error_code: str | None
    attempt_count: int
    due_at: datetime
    updated_at: datetime


@dataclass(frozen=True, slots=True)
class JobEvent:
    """One operator event in a job's history, with who acted and why."""

    at: datetime
    event: str
    from_status: str
    to_status: str
    previous_attempts: int
    previous_outcome: str | None
    previous_error_code: str | None
    previous_due_at: datetime | None
    action: str
    actor: str
    reason: str | None


@dataclass(frozen=True, slots=True)
class ActionRecord:
    """One recorded operator action on a policy."""

    at: datetime
    action: str
    actor: str
    reason: str | None
    #: Its progress (migration 0015): steps recorded, the sums of their counts, finished.
    steps: int = 0
    totals: dict[str, Any] | None = None
    done: bool | None = None


@dataclass(frozen=True, slots=True)
class ActivityBucket:
    """One time bucket of a policy's activity: jobs published by its runs, jobs settled."""

    at: datetime
    claimed: int
    succeeded: int
    failed: int


def typed_states(row: Sequence[Any], status_at: int, outcome_at: int) -> list[Any]:
    """A job row's values, its status and last outcome (None or a class) typed: what a row
    type built by column order (`Job(*values)`) takes."""
    values = list(row)
    values[status_at] = JobStatus(values[status_at])
    if values[outcome_at] is not None:
        values[outcome_at] = OutcomeClass(values[outcome_at])
    return values

"""The job store: the only code that reads or writes ledger rows.

Each method is one short transaction: a claim commits before anything is published, so no lock is
ever held across a network call. Time is passed in (`now`), never read here, so the boundaries of
due times and leases can be tested exactly.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, LiteralString

import psycopg
from psycopg.rows import TupleRow

from sweeper.errors import LedgerError
from sweeper.ledger import queries
from sweeper.models import (
    ClaimedJob,
    Job,
    JobStatus,
    NewJob,
    OutcomeClass,
    check_transition,
    operation_key,
)

#: How a job's limiter scope is derived when it is scheduled (see sweeper.scheduling).
ScopeFn = Callable[[NewJob], str]

#: Rows per upsert statement when scheduling: large enough to amortise the round trip.
SCHEDULE_CHUNK_ROWS = 5_000


@dataclass(frozen=True, slots=True)
class ScheduleResult:
    inserted: int
    moved_earlier: int
    unchanged: int


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


class Ledger:
    """PostgreSQL job store. One connection, opened on first use and reopened if it broke.

    Not thread-safe by design: a Lambda instance runs one invocation at a time; concurrent
    callers (threads, the local poller's workers) each build their own.
    """

    def __init__(self, conninfo: str, *, prepare_threshold: int | None = 5) -> None:
        # prepare_threshold=None disables server-side prepared statements (needed behind RDS Proxy
        # or PgBouncer in transaction mode).
        self._conninfo = conninfo
        self._prepare_threshold = prepare_threshold
        self._conn: psycopg.Connection[TupleRow] | None = None

    # -- connection -----------------------------------------------------------------------------

    def _connection(self) -> psycopg.Connection[TupleRow]:
        if self._conn is None or self._conn.closed or self._conn.broken:
            try:
                self._conn = psycopg.connect(
                    self._conninfo,
                    autocommit=True,
                    prepare_threshold=self._prepare_threshold,
                    application_name="sweeper",
                )
            except psycopg.OperationalError as exc:
                raise LedgerError(
                    f"cannot connect to the ledger: {exc.sqlstate or 'no sqlstate'}"
                ) from exc
        return self._conn

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def _execute(self, query: LiteralString, params: dict[str, Any]) -> list[TupleRow]:
        conn = self._connection()
        try:
            with conn.transaction():
                cur = conn.execute(query, params)
                return cur.fetchall() if cur.description is not None else []
        except psycopg.Error as exc:
            raise LedgerError(f"ledger statement failed ({exc.sqlstate})") from exc

    # -- scheduling -----------------------------------------------------------------------------

    def schedule(
        self,
        policy: str,
        policy_version: int,
        scope_of: ScopeFn,
        jobs: Iterable[NewJob],
        now: datetime,
    ) -> ScheduleResult:
        """Add obligations idempotently (upsert on the operation key); see queries.UPSERT_JOBS."""
        # One statement may not touch a row twice: keep the earliest due time per key first.
        earliest: dict[str, tuple[NewJob, str]] = {}
        for job in jobs:
            key = operation_key(policy, job.tenant_id, job.object_id, policy_version)
            seen = earliest.get(key)
            if seen is None or job.due_at < seen[0].due_at:
                earliest[key] = (job, scope_of(job))
        inserted = moved = 0
        items = list(earliest.items())
        for start in range(0, len(items), SCHEDULE_CHUNK_ROWS):
            chunk = items[start : start + SCHEDULE_CHUNK_ROWS]
            rows = self._execute(
                queries.UPSERT_JOBS,
                {
                    "policy": policy,
                    "policy_version": policy_version,
                    "now": now,
                    "tenant_ids": [job.tenant_id for _, (job, _s) in chunk],
                    "object_ids": [job.object_id for _, (job, _s) in chunk],
                    "scopes": [scope for _, (_j, scope) in chunk],
                    "keys": [key for key, _ in chunk],
                    "due": [job.due_at for _, (job, _s) in chunk],
                },
            )
            new = sum(1 for (was_insert,) in rows if was_insert)
            inserted += new
            moved += len(rows) - new
        return ScheduleResult(inserted, moved, len(items) - inserted - moved)

    # -- producer -------------------------------------------------------------------------------

    def start_run(
        self, policy: str, scheduled_at: datetime, batch_id: str, now: datetime
    ) -> RunStart:
        rows = self._execute(
            queries.START_RUN,
            {"batch_id": batch_id, "policy": policy, "scheduled_at": scheduled_at, "now": now},
        )
        holder, invocations = rows[0]
        return RunStart(batch_id=str(holder), duplicate=invocations > 1)

    def finish_run(
        self,
        batch_id: str,
        now: datetime,
        *,
        reclaimed: int,
        discovered: int,
        published: int,
        publish_failures: int,
        oldest_age_seconds: float | None,
        stop_reason: str,
    ) -> None:
        self._execute(
            queries.FINISH_RUN,
            {
                "batch_id": batch_id,
                "now": now,
                "reclaimed": reclaimed,
                "discovered": discovered,
                "published": published,
                "publish_failures": publish_failures,
                "oldest_age": oldest_age_seconds,
                "stop_reason": stop_reason,
            },
        )

    def reclaim_expired(self, policy: str, now: datetime, limit: int) -> int:
        """Return up to `limit` expired leases to pending; how many were reclaimed."""
        rows = self._execute(
            queries.RECLAIM_EXPIRED,
            {
                "policy": policy,
                "now": now,
                "limit": limit,
                "from": _moves(JobStatus.PENDING, JobStatus.LEASED),
            },
        )
        return len(rows)

    def claim(
        self, policy: str, owner: str, now: datetime, lease: timedelta, limit: int
    ) -> list[ClaimedJob]:
        """Lease up to `limit` due rows to `owner`, earliest due first, and commit."""
        if limit <= 0:
            return []
        rows = self._execute(
            queries.CLAIM_DUE,
            {
                "policy": policy,
                "owner": owner,
                "now": now,
                "expires": now + lease,
                "limit": limit,
                "from": _moves(JobStatus.LEASED, JobStatus.PENDING),
            },
        )
        rows.sort(key=lambda r: (r[7], r[0]))
        return [ClaimedJob(*row[:7]) for row in rows]

    def release(self, ids: Sequence[int], owner: str, now: datetime) -> int:
        """Put back to pending the rows of this batch whose messages were not published."""
        if not ids:
            return 0
        rows = self._execute(
            queries.RELEASE_LEASES,
            {
                "ids": list(ids),
                "owner": owner,
                "now": now,
                "from": _moves(JobStatus.PENDING, JobStatus.LEASED),
            },
        )
        return len(rows)

    def count_in_flight(self, policy: str, now: datetime) -> int:
        rows = self._execute(queries.COUNT_IN_FLIGHT, {"policy": policy, "now": now})
        return int(rows[0][0])

    def oldest_eligible_age(self, policy: str, now: datetime) -> float | None:
        """Seconds since the oldest eligible pending row became due; None when none is due."""
        rows = self._execute(queries.OLDEST_ELIGIBLE, {"policy": policy, "now": now})
        oldest = rows[0][0]
        return None if oldest is None else max(0.0, (now - oldest).total_seconds())

    # -- consumer -------------------------------------------------------------------------------

    def statuses(self, keys: Sequence[str]) -> dict[str, JobStatus]:
        """The status of each named job (one query per consumer batch); unknown keys are absent."""
        if not keys:
            return {}
        rows = self._execute(queries.STATUS_BY_KEYS, {"keys": list(keys)})
        return {str(key): JobStatus(status) for key, status in rows}

    def mark_succeeded(self, key: str, outcome: OutcomeClass, now: datetime) -> bool:
        """Settle a job as succeeded; False when it was already settled."""
        rows = self._execute(
            queries.MARK_SUCCEEDED,
            {
                "key": key,
                "outcome": outcome.value,
                "now": now,
                "from": _moves(JobStatus.SUCCEEDED, JobStatus.LEASED, JobStatus.PENDING),
            },
        )
        return bool(rows)

    def mark_failed(
        self, key: str, outcome: OutcomeClass, code: str, now: datetime, *, count_attempt: bool
    ) -> bool:
        """Make a job terminal; False when it was already settled."""
        rows = self._execute(
            queries.MARK_FAILED,
            {
                "key": key,
                "outcome": outcome.value,
                "code": code,
                "now": now,
                "attempts": 1 if count_attempt else 0,
                "from": _moves(JobStatus.FAILED, JobStatus.LEASED, JobStatus.PENDING),
            },
        )
        return bool(rows)

    def record_unsettled(
        self,
        key: str,
        now: datetime,
        *,
        next_attempt_at: datetime,
        lease_until: datetime,
        outcome: OutcomeClass | None = None,
        code: str | None = None,
        count_attempt: bool = False,
    ) -> int | None:
        """Record a delivery that settled nothing (see queries.RECORD_UNSETTLED).

        Returns the attempt count, or None when the job is already settled.
        """
        rows = self._execute(
            queries.RECORD_UNSETTLED,
            {
                "key": key,
                "now": now,
                "next_attempt_at": next_attempt_at,
                "lease_until": lease_until,
                "outcome": None if outcome is None else outcome.value,
                "code": code,
                "attempts": 1 if count_attempt else 0,
            },
        )
        return int(rows[0][0]) if rows else None

    # -- reading --------------------------------------------------------------------------------

    def get(self, key: str) -> Job | None:
        rows = self._execute(queries.SELECT_JOB, {"key": key})
        if not rows:
            return None
        row = list(rows[0])
        row[7] = JobStatus(row[7])
        row[13] = None if row[13] is None else OutcomeClass(row[13])
        return Job(*row)

    def counts(self, policy: str) -> dict[JobStatus, int]:
        rows = self._execute(queries.COUNT_BY_STATUS, {"policy": policy})
        found = {JobStatus(status): int(count) for status, count in rows}
        return {status: found.get(status, 0) for status in JobStatus}

    def runs(self, policy: str, limit: int = 10) -> list[RunRecord]:
        rows = self._execute(queries.SELECT_RUNS, {"policy": policy, "limit": limit})
        return [RunRecord(*row) for row in rows]


def _moves(target: JobStatus, *sources: JobStatus) -> list[str]:
    """The source states of a guarded UPDATE, each checked against the state machine."""
    for source in sources:
        check_transition(source, target)
    return [s.value for s in sources]

"""The job store: the only code that reads or writes ledger rows.

Each method is one short transaction: a claim commits before anything is published, so no lock is
ever held across a network call. Time is passed in (`now`), never read here, so the boundaries of
due times and leases can be tested exactly.
"""

from __future__ import annotations

import functools
import random
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Concatenate, LiteralString

import psycopg
from psycopg.rows import TupleRow
from psycopg.types.json import Jsonb

from sweeper.backpressure import Settled
from sweeper.errors import LedgerError
from sweeper.ledger import queries
from sweeper.models import (
    ClaimedJob,
    Job,
    JobStatus,
    LedgerTarget,
    NewJob,
    OutcomeClass,
    check_transition,
    operation_key,
)
from sweeper.redaction import describe_target, redact

#: Builds the connection string; called with refresh=True after a failed login.
ConninfoProvider = Callable[[bool], str]
#: How a job's limiter scope is derived when it is scheduled (see sweeper.scheduling).
ScopeFn = Callable[[NewJob], str]
#: More work in a schedule's own transaction, given (connection, inserted, moved earlier): it
#: commits with the upsert or not at all (discovery advances its cursor this way).
WithinSchedule = Callable[["psycopg.Connection[TupleRow]", int, int], None]

#: The staging table's column types, as COPY writes them in binary.
SCHEDULE_STAGE_TYPES = ("text", "text", "text", "text", "timestamptz")
#: A schedule transaction that loses a deadlock or a serialization conflict is run again, whole,
#: at most this many times in all; then the error is raised (nothing of the file was written).
SCHEDULE_ATTEMPTS = 5
#: The first backoff before a retry; doubled per attempt, jittered by +-50 %.
SCHEDULE_BACKOFF_SECONDS = 0.05
#: An attempt count no job reaches: every counted attempt is a retry when no limit is given.
NO_ATTEMPT_LIMIT = 2**31 - 1
#: A claim also reads this many pages of the policy's earliest due rows besides each tenant's
#: share, so a page fills when few tenants hold work and when concurrent claimers hold some of
#: the candidates locked (those are skipped, never waited for).
CLAIM_WINDOW_PAGES = 2
#: When concurrent claimers hold every candidate, a claim goes on through at most this many pages
#: of further due rows in due order (the pages those claimers are taking).
CLAIM_FALLBACK_PAGES = 8
#: serialization_failure and deadlock_detected: the transaction may succeed when run again.
RETRYABLE_SQLSTATES = frozenset({"40001", "40P01"})


def _serialised[**P, R](
    method: Callable[Concatenate[Ledger, P], R],
) -> Callable[Concatenate[Ledger, P], R]:
    """Run a method that uses the connection while holding the ledger's lock.

    A psycopg connection runs one transaction at a time: two threads inside
    `conn.transaction()` at once would nest one in the other and commit out of order. Every
    method that opens a transaction carries this decorator (or goes through `_execute`).
    """

    @functools.wraps(method)
    def run(self: Ledger, /, *args: P.args, **kwargs: P.kwargs) -> R:
        with self._lock:
            return method(self, *args, **kwargs)

    return run


@dataclass(frozen=True, slots=True)
class ScheduleResult:
    inserted: int
    moved_earlier: int
    unchanged: int
    #: Transactions run: 1, or more when a deadlock or serialization failure was retried.
    attempts: int = 1


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

    Shared by the threads of one consumer batch (`consumer.parallel_calls`), which take turns on
    the connection: each statement is one short transaction, held under a lock, so ledger writes
    are serialised, never interleaved (a write takes milliseconds, a vendor call far longer).
    Separate processes and the local poller's workers each build their own.
    """

    def __init__(
        self,
        conninfo: str | ConninfoProvider,
        *,
        prepare_threshold: int | None = 5,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        # prepare_threshold=None disables server-side prepared statements (needed behind RDS Proxy
        # or PgBouncer in transaction mode).
        self._conninfo = conninfo
        self._prepare_threshold = prepare_threshold
        self._sleep = sleep  # the backoff between schedule attempts
        self._conn: psycopg.Connection[TupleRow] | None = None
        self._lock = threading.RLock()

    # -- connection -----------------------------------------------------------------------------

    def _connection(self) -> psycopg.Connection[TupleRow]:
        if self._conn is None or self._conn.closed or self._conn.broken:
            try:
                try:
                    self._conn = self._connect(refresh=False)
                except psycopg.OperationalError:
                    if isinstance(self._conninfo, str):
                        raise
                    # A rotated password: fetch the credentials again, past any cache, once.
                    self._conn = self._connect(refresh=True)
            except psycopg.Error as exc:
                raise LedgerError(connect_failure(exc, self._target())) from exc
        return self._conn

    def _target(self) -> str:
        """Where the ledger is, for an error message: host, port and database, no credentials."""
        if not isinstance(self._conninfo, str):
            return "the configured ledger"
        return describe_target(self._conninfo)

    def _connect(self, *, refresh: bool) -> psycopg.Connection[TupleRow]:
        conninfo = self._conninfo if isinstance(self._conninfo, str) else self._conninfo(refresh)
        return psycopg.connect(
            conninfo,
            autocommit=True,
            prepare_threshold=self._prepare_threshold,
            application_name="sweeper",
        )

    @_serialised
    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    @contextmanager
    def transaction(self) -> Iterator[psycopg.Connection[TupleRow]]:
        """One transaction on the ledger's connection, for a store kept beside this one (the
        discovery store); a database error leaves as a LedgerError with its SQLSTATE only."""
        conn = self._connection()
        try:
            with conn.transaction():
                yield conn
        except psycopg.Error as exc:
            raise LedgerError(f"ledger statement failed ({exc.sqlstate})") from exc

    @_serialised
    def _execute(self, query: LiteralString, params: dict[str, Any]) -> list[TupleRow]:
        conn = self._connection()
        try:
            with conn.transaction():
                cur = conn.execute(query, params)
                return cur.fetchall() if cur.description is not None else []
        except psycopg.Error as exc:
            raise LedgerError(f"ledger statement failed ({exc.sqlstate})") from exc

    @_serialised
    def _claim_rows(self, params: dict[str, Any]) -> list[TupleRow]:
        conn = self._connection()
        try:
            with conn.transaction():
                conn.execute(queries.CLAIM_WITHOUT_JIT)
                return conn.execute(queries.CLAIM_DUE, params).fetchall()
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
        *,
        within: WithinSchedule | None = None,
    ) -> ScheduleResult:
        """Add obligations idempotently (upsert on the operation key): UPSERT_STAGED_JOBS.

        All or nothing: `jobs` is read whole before anything is written (a bad one raises with
        nothing written), then every row is upserted in one transaction, in operation-key order,
        so two concurrent schedules over the same rows take their locks in the same order and
        cannot deadlock each other. A transaction that still loses a deadlock or a serialization
        conflict (with some other writer) is run again, whole, up to SCHEDULE_ATTEMPTS times.
        `within`, when given, runs in the same transaction after the upsert (and again on a retry).
        """
        # One statement may not touch a row twice: keep the earliest due time per key first.
        earliest: dict[str, tuple[NewJob, str]] = {}
        for job in jobs:
            key = operation_key(policy, job.tenant_id, job.object_id, policy_version)
            seen = earliest.get(key)
            if seen is None or job.due_at < seen[0].due_at:
                earliest[key] = (job, scope_of(job))
        items = sorted(earliest.items())
        attempt = 1
        while True:
            try:
                inserted, moved = self._upsert_all(policy, policy_version, items, now, within)
            except psycopg.Error as exc:
                if exc.sqlstate not in RETRYABLE_SQLSTATES or attempt >= SCHEDULE_ATTEMPTS:
                    raise LedgerError(
                        f"scheduling failed after {attempt} attempt(s) ({exc.sqlstate}); "
                        "nothing of this input was written"
                    ) from exc
                self._sleep(_backoff(attempt))
                attempt += 1
                continue
            return ScheduleResult(inserted, moved, len(items) - inserted - moved, attempt)

    @_serialised
    def _upsert_all(
        self,
        policy: str,
        policy_version: int,
        items: Sequence[tuple[str, tuple[NewJob, str]]],
        now: datetime,
        within: WithinSchedule | None = None,
    ) -> tuple[int, int]:
        """Upsert every row in one transaction: copy them into the session's staging table,
        then one statement (see queries.UPSERT_STAGED_JOBS): (inserted, moved)."""
        conn = self._connection()
        outer = conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE
        with conn.transaction():
            conn.execute(queries.CREATE_SCHEDULE_STAGE)
            if outer:  # inside a caller's transaction: an earlier schedule's rows are still staged
                conn.execute(queries.EMPTY_SCHEDULE_STAGE)
            with conn.cursor() as cur:
                with cur.copy(queries.COPY_SCHEDULE_STAGE) as copy:
                    copy.set_types(SCHEDULE_STAGE_TYPES)
                    for key, (job, scope) in items:
                        copy.write_row((job.tenant_id, job.object_id, scope, key, job.due_at))
                row = cur.execute(
                    queries.UPSERT_STAGED_JOBS,
                    {"policy": policy, "policy_version": policy_version, "now": now},
                ).fetchone()
            assert row is not None  # an aggregate always answers one row
            inserted, moved = int(row[0]), int(row[1])
            if within is not None:
                within(conn, inserted, moved)
        return inserted, moved

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
        resent: int = 0,
        oldest_released_age_seconds: float | None = None,
    ) -> None:
        self._execute(
            queries.FINISH_RUN,
            {
                "resent": resent,
                "oldest_released_age": oldest_released_age_seconds,
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

    def reclaim_expired(
        self, policy: str, now: datetime, limit: int, *, expired_before: datetime | None = None
    ) -> int:
        """Return up to `limit` leases expired by `expired_before` (default: now) to pending."""
        rows = self._execute(
            queries.RECLAIM_EXPIRED,
            {
                "policy": policy,
                "now": now,
                "expired_before": now if expired_before is None else expired_before,
                "limit": limit,
                "from": _moves(JobStatus.PENDING, JobStatus.LEASED),
            },
        )
        return len(rows)

    def claim(
        self,
        policy: str,
        owner: str,
        now: datetime,
        lease: timedelta,
        limit: int,
        closed_scopes: Sequence[str] = (),
        scope_cap: int | None = None,
        expired_before: datetime | None = None,
    ) -> list[ClaimedJob]:
        """Lease up to `limit` due rows to `owner`, tenants taking turns, and commit.

        Each tenant with due work has its earliest row in the page before any tenant has a
        second one; within a turn, earliest due first. The rows come back in that order (see
        `taking_turns`), which is the order they are published in. A scope never holds more than
        `scope_cap` rows on the consumers (None: no cap), counted as `count_on_consumers`
        counts them: leases not reclaimable by `expired_before` (default: now) and not deferred
        past `now`. Rows of `closed_scopes` (whose gate is closed) are left as they are, due
        time included: leased and published now, they would only come back from the consumer.
        """
        if limit <= 0 or (scope_cap is not None and scope_cap <= 0):
            return []
        rows = self._claim_rows(
            {
                "policy": policy,
                "owner": owner,
                "now": now,
                "expires": now + lease,
                "limit": limit,
                "window": limit * CLAIM_WINDOW_PAGES,
                "fallback": limit * CLAIM_FALLBACK_PAGES,
                "scope_cap": scope_cap,
                "expired_before": now if expired_before is None else expired_before,
                "from": _moves(JobStatus.LEASED, JobStatus.PENDING),
                "closed": list(closed_scopes),
            },
        )
        return taking_turns(
            ClaimedJob(
                id=row[0],
                policy_version=row[1],
                tenant_id=row[2],
                object_id=row[3],
                scope=row[4],
                operation_key=row[5],
                attempt_count=row[6],
                eligible_since=row[7],
                resent=bool(row[8]),
            )
            for row in rows
        )

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

    def count_on_consumers(self, policy: str, now: datetime, expired_before: datetime) -> int:
        """Leased rows not reclaimable by `expired_before` and not deferred past `now`."""
        rows = self._execute(
            queries.COUNT_ON_CONSUMERS,
            {"policy": policy, "now": now, "expired_before": expired_before},
        )
        return int(rows[0][0])

    def settled_between(self, policy: str, since: datetime, now: datetime) -> Settled:
        """How many of the policy's jobs settled in (since, now], and the first and last time."""
        rows = self._execute(
            queries.SETTLED_BETWEEN, {"policy": policy, "since": since, "now": now}
        )
        count, first, last = rows[0]
        return Settled(int(count), first, last)

    def oldest_eligible_age(self, policy: str, now: datetime) -> float | None:
        """Seconds since the oldest eligible pending row became due; None when none is due."""
        rows = self._execute(queries.OLDEST_ELIGIBLE, {"policy": policy, "now": now})
        oldest = rows[0][0]
        return None if oldest is None else max(0.0, (now - oldest).total_seconds())

    # -- consumer -------------------------------------------------------------------------------

    def targets(self, keys: Sequence[str]) -> dict[str, LedgerTarget]:
        """Each named job's ledger row (one query per consumer batch); unknown keys are absent."""
        if not keys:
            return {}
        rows = self._execute(queries.TARGETS_BY_KEYS, {"keys": list(keys)})
        return {
            str(key): LedgerTarget(
                operation_key=str(key),
                status=JobStatus(status),
                policy=str(policy),
                policy_version=int(version),
                tenant_id=str(tenant),
                object_id=str(obj),
                scope=str(scope),
                retry_round=int(retry_round),
            )
            for key, status, policy, version, tenant, obj, scope, retry_round in rows
        }

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
        max_attempts: int | None = None,
    ) -> int | None:
        """Record a delivery that settled nothing (see queries.RECORD_UNSETTLED).

        A counted attempt that leaves the job below `max_attempts` is counted as a retry of its
        carrying batch. Returns the attempt count, or None when the job is already settled.
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
                "retry_below": NO_ATTEMPT_LIMIT if max_attempts is None else max_attempts,
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

    def batch_audit(self, policy: str, since: datetime, limit: int) -> list[BatchAudit]:
        """The policy's batches scheduled at or after `since`, newest first, with their outcome
        counters and unsettled jobs (queries.BATCH_AUDIT)."""
        rows = self._execute(
            queries.BATCH_AUDIT, {"policy": policy, "since": since, "limit": limit}
        )
        return [BatchAudit(*row) for row in rows]

    def runs(self, policy: str, limit: int = 10) -> list[RunRecord]:
        rows = self._execute(queries.SELECT_RUNS, {"policy": policy, "limit": limit})
        return [RunRecord(*row) for row in rows]

    # -- the operator's console -----------------------------------------------------------------

    def is_paused(self, policy: str) -> bool:
        rows = self._execute(queries.SELECT_PAUSED, {"policy": policy})
        return bool(rows and rows[0][0])

    def policy_state(self, policy: str) -> PolicyState:
        rows = self._execute(queries.SELECT_POLICY_STATE, {"policy": policy})
        if not rows:
            return PolicyState(policy, False, None, None, None, None)
        return PolicyState(*rows[0])

    @_serialised
    def pause(self, policy: str, actor: str, reason: str | None, now: datetime) -> bool:
        """Pause a policy (idempotent); True when this call paused it. Recorded as an action."""
        params = {"policy": policy, "actor": actor, "reason": reason, "now": now}
        conn = self._connection()
        try:
            with conn.transaction():
                paused_at = conn.execute(queries.SET_PAUSED, params).fetchall()[0][0]
                changed = bool(paused_at == now)
                conn.execute(
                    queries.INSERT_ACTION,
                    {**params, "action": "pause", "detail": Jsonb({"changed": changed})},
                )
        except psycopg.Error as exc:
            raise LedgerError(f"ledger statement failed ({exc.sqlstate})") from exc
        return changed

    @_serialised
    def resume(self, policy: str, actor: str, reason: str | None, now: datetime) -> bool:
        """Resume a policy; True when it was paused. Recorded as an action."""
        params = {"policy": policy, "actor": actor, "reason": reason, "now": now}
        conn = self._connection()
        try:
            with conn.transaction():
                changed = bool(conn.execute(queries.SET_RESUMED, params).fetchall())
                conn.execute(
                    queries.INSERT_ACTION,
                    {**params, "action": "resume", "detail": Jsonb({"changed": changed})},
                )
        except psycopg.Error as exc:
            raise LedgerError(f"ledger statement failed ({exc.sqlstate})") from exc
        return changed

    def record_action(
        self,
        policy: str | None,
        action: str,
        actor: str,
        now: datetime,
        *,
        reason: str | None = None,
        detail: dict[str, Any] | None = None,
    ) -> int:
        """Record an operator action (catch-up, prune, redrive); its id."""
        rows = self._execute(
            queries.INSERT_ACTION,
            {
                "policy": policy,
                "action": action,
                "actor": actor,
                "reason": reason,
                "detail": Jsonb(detail or {}),
                "now": now,
            },
        )
        return int(rows[0][0])

    def retry_failed(
        self,
        policy: str,
        actor: str,
        now: datetime,
        *,
        keys: Sequence[str] | None = None,
        outcomes: Sequence[OutcomeClass] | None = None,
        tenant_id: str | None = None,
        limit: int = 1000,
        reason: str | None = None,
    ) -> list[str]:
        """Terminal jobs back to pending, fresh budget, due now; recorded (queries.RETRY_FAILED).

        Returns the operation keys moved.
        """
        detail: dict[str, Any] = {
            "keys": None if keys is None else len(keys),
            "outcomes": None if outcomes is None else [o.value for o in outcomes],
            "tenant_filter": tenant_id is not None,
            "limit": limit,
        }
        rows = self._execute(
            queries.RETRY_FAILED,
            {
                "policy": policy,
                "actor": actor,
                "reason": reason,
                "detail": Jsonb(detail),
                "now": now,
                "keys": None if keys is None else list(keys),
                "outcomes": None if outcomes is None else [o.value for o in outcomes],
                "tenant_id": tenant_id,
                "limit": limit,
                "from": _moves(JobStatus.PENDING, JobStatus.FAILED),
            },
        )
        return [str(key) for (key,) in rows]

    def prune_batch(self, before: datetime, limit: int, policy: str | None = None) -> int:
        """Delete one batch of settled rows completed before `before`; how many."""
        return self.prune_settled_batch(before, limit, policy)[0]

    def prune_settled_batch(
        self, before: datetime, limit: int, policy: str | None = None
    ) -> tuple[int, int]:
        """Delete one batch of settled jobs completed before `before`, with their job events;
        (jobs, job events) deleted."""
        rows = self._execute(
            queries.PRUNE_SETTLED, {"before": before, "limit": limit, "policy": policy}
        )
        jobs, events = rows[0]
        return int(jobs), int(events)

    def prune_actions_batch(self, before: datetime, limit: int, policy: str | None = None) -> int:
        """Delete one batch of operator actions taken before `before` that no job event names;
        how many."""
        rows = self._execute(
            queries.PRUNE_ACTIONS, {"before": before, "limit": limit, "policy": policy}
        )
        return len(rows)

    def prune_runs_batch(self, before: datetime, limit: int, policy: str | None = None) -> int:
        """Delete one batch of run records scheduled before `before`; how many."""
        rows = self._execute(
            queries.PRUNE_RUNS, {"before": before, "limit": limit, "policy": policy}
        )
        return len(rows)

    def delete_canary(self, key: str, *, policy: str, tenant_id: str, prefix: str) -> bool:
        """Delete a smoke canary (and its job events) in any status; whether it was there."""
        rows = self._execute(
            queries.DELETE_CANARY,
            {"key": key, "policy": policy, "tenant_id": tenant_id, "prefix": prefix},
        )
        return bool(rows)

    def runs_between(
        self, policy: str, since: datetime, until: datetime
    ) -> dict[datetime, str | None]:
        """Scheduled time -> stop reason of every run recorded in [since, until]."""
        rows = self._execute(
            queries.RUNS_BETWEEN, {"policy": policy, "since": since, "until": until}
        )
        return {at: reason for at, reason in rows}

    def last_run_at_or_before(self, policy: str, at: datetime) -> datetime | None:
        rows = self._execute(queries.LAST_RUN_AT_OR_BEFORE, {"policy": policy, "at": at})
        found: datetime | None = rows[0][0]
        return found

    def reopen_skipped_run(
        self, policy: str, scheduled_at: datetime, batch_id: str, now: datetime
    ) -> bool:
        """Re-arm a run skipped while paused under a new batch id (queries.REOPEN_SKIPPED_RUN)."""
        rows = self._execute(
            queries.REOPEN_SKIPPED_RUN,
            {"policy": policy, "scheduled_at": scheduled_at, "batch_id": batch_id, "now": now},
        )
        return bool(rows)

    def jobs_for_redrive(self, keys: Sequence[str]) -> dict[str, RedriveView]:
        """What redrive decides on, per operation key; unknown keys are absent."""
        if not keys:
            return {}
        rows = self._execute(queries.JOBS_FOR_REDRIVE, {"keys": list(keys)})
        return {
            str(key): RedriveView(
                str(key),
                str(policy),
                int(version),
                str(tenant),
                str(obj),
                str(scope),
                JobStatus(status),
                None if outcome is None else OutcomeClass(outcome),
            )
            for key, policy, version, tenant, obj, scope, status, outcome in rows
        }

    def inspect(
        self, policy: str, now: datetime, stuck_before: datetime, limit: int
    ) -> list[InspectRow]:
        """Terminal jobs, expired leases and long-overdue pending rows (queries.INSPECT_JOBS)."""
        rows = self._execute(
            queries.INSPECT_JOBS,
            {"policy": policy, "now": now, "stuck_before": stuck_before, "limit": limit},
        )
        found = []
        for row in rows:
            values = list(row)
            values[1] = JobStatus(values[1])
            values[2] = None if values[2] is None else OutcomeClass(values[2])
            found.append(InspectRow(*values))
        return found

    def active_scopes(self, policy: str, limit: int) -> dict[str, int]:
        """Scopes holding pending or leased work, busiest first, with their counts."""
        rows = self._execute(queries.ACTIVE_SCOPES, {"policy": policy, "limit": limit})
        return {str(scope): int(count) for scope, count in rows}


def connect_failure(exc: psycopg.Error, target: str) -> str:
    """One line on a failed connection: where (no credentials), why, and what to check."""
    if isinstance(exc, psycopg.ProgrammingError):
        why = "the database URL is not a valid PostgreSQL URL or connection string"
    else:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        # libpq: 'connection failed: connection to server at "h", port 5432 failed: <why>'
        why = redact(first.rsplit("failed: ", 1)[-1])
    return (
        f"cannot connect to the ledger at {target} ({why}); check the database URL and that "
        "PostgreSQL is running there"
    )


def _backoff(attempt: int) -> float:
    """Seconds to wait before attempt `attempt + 1`: doubling, jittered so that two losers of
    the same conflict do not meet again at the same instant."""
    jitter: float = random.uniform(0.5, 1.5)
    return float(SCHEDULE_BACKOFF_SECONDS * 2 ** (attempt - 1) * jitter)


def taking_turns(jobs: Iterable[ClaimedJob]) -> list[ClaimedJob]:
    """Claimed jobs in the order they are published: tenants take turns, and scopes do.

    The claim chose its rows fairly; the queue then hands them to the consumers about in the
    order they were sent. In due order one tenant's old backlog would fill whole batches, and a
    batch of one scope waits on that scope's rate alone while its threads could be calling
    others (measured: ten scopes at 10/s, 4 environments: 0.33 of the quota in due order, 0.93
    taking turns). So:

    - within a tenant, each of its scopes' n-th job before any of its scopes' (n+1)-th;
    - then each tenant's n-th job (in that order) before any tenant's (n+1)-th;
    - within a turn, each scope's n-th job overall first (scopes shared by tenants), then
      earliest due, then id.
    """
    earliest = datetime.min.replace(tzinfo=UTC)
    by_due = sorted(jobs, key=lambda j: (j.eligible_since or earliest, j.id))
    own_turn: Counter[tuple[str, str]] = Counter()  # per (tenant, scope)
    ranked: list[tuple[int, int, ClaimedJob]] = []
    for due_rank, job in enumerate(by_due):
        own_turn[job.tenant_id, job.scope] += 1
        ranked.append((own_turn[job.tenant_id, job.scope], due_rank, job))
    ranked.sort(key=lambda r: (r[0], r[1]))  # a tenant's scopes take turns, earliest due first
    tenant_turn: Counter[str] = Counter()
    scope_turn: Counter[str] = Counter()
    keyed: list[tuple[tuple[int, int, int], ClaimedJob]] = []
    for _, due_rank, job in ranked:
        tenant_turn[job.tenant_id] += 1
        scope_turn[job.scope] += 1
        keyed.append(((tenant_turn[job.tenant_id], scope_turn[job.scope], due_rank), job))
    keyed.sort(key=lambda k: k[0])
    return [job for _, job in keyed]


def _moves(target: JobStatus, *sources: JobStatus) -> list[str]:
    """The source states of a guarded UPDATE, each checked against the state machine."""
    for source in sources:
        check_transition(source, target)
    return [s.value for s in sources]


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


@dataclass(frozen=True, slots=True)
class PolicyState:
    policy: str
    paused: bool
    paused_at: datetime | None
    paused_by: str | None
    reason: str | None
    resumed_at: datetime | None


@dataclass(frozen=True, slots=True)
class RedriveView:
    """The ledger's side of one dead letter."""

    operation_key: str
    policy: str
    policy_version: int
    tenant_id: str
    object_id: str
    scope: str
    status: JobStatus
    last_outcome: OutcomeClass | None


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

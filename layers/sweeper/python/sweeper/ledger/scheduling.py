"""Scheduling's part of the ledger: adding obligations (`sweeper.scheduling`, discovery, intake).

One upsert per input, all or nothing, retried whole when it loses a deadlock or a serialization
conflict.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime

import psycopg
from psycopg.rows import TupleRow
from psycopg.types.json import Jsonb

from sweeper.errors import InputError, LedgerError, LedgerUnavailableError
from sweeper.ledger import schedule_sql
from sweeper.ledger.executor import Executor, _serialised
from sweeper.ledger.rows import ScheduleResult
from sweeper.models import NewJob, identity_values, operation_key

#: How a job's limiter scope is derived when it is scheduled (see sweeper.scheduling).
ScopeFn = Callable[[NewJob], str]
#: More work in a schedule's own transaction, given (connection, inserted, moved earlier): it
#: commits with the upsert or not at all (discovery advances its cursor this way).
WithinSchedule = Callable[["psycopg.Connection[TupleRow]", int, int], None]

#: The staging table's column types, as COPY writes them in binary.
SCHEDULE_STAGE_TYPES = ("text", "text", "text", "text", "timestamptz", "jsonb")
#: A schedule transaction that loses a deadlock or a serialization conflict is run again, whole,
#: at most this many times in all; then the error is raised (nothing of the file was written).
SCHEDULE_ATTEMPTS = 5
#: The first backoff before a retry; doubled per attempt, jittered by +-50 %.
SCHEDULE_BACKOFF_SECONDS = 0.05
#: serialization_failure and deadlock_detected: the transaction may succeed when run again.
RETRYABLE_SQLSTATES = frozenset({"40001", "40P01"})


class SchedulerLedger(Executor):
    """The scheduling side of `sweeper.ledger.store.Ledger`."""

    def schedule(
        self,
        policy: str,
        policy_version: int,
        scope_of: ScopeFn,
        jobs: Iterable[NewJob],
        now: datetime,
        *,
        within: WithinSchedule | None = None,
        identity_params: Sequence[str] = (),
    ) -> ScheduleResult:
        """Add obligations idempotently (upsert on the operation key): UPSERT_STAGED_JOBS.

        All or nothing: `jobs` is read whole before anything is written (a bad one raises with
        nothing written), then every row is upserted in one transaction, in operation-key order,
        so two concurrent schedules over the same rows take their locks in the same order and
        cannot deadlock each other. A transaction that still loses a deadlock or a serialization
        conflict (with some other writer) is run again, whole, up to SCHEDULE_ATTEMPTS times.
        `within`, when given, runs in the same transaction after the upsert (and again on a retry).
        `identity_params` name the params whose values join each operation key (their doors
        checked that every job carries them).

        Params: see schedule_sql.UPSERT_STAGED_JOBS (the newest win before the first claim, and are
        kept after it). Within one input, the last obligation of a key gives its params.
        """
        # One statement may not touch a row twice: keep the earliest due time per key first,
        # and the last params given for it (the newest).
        earliest: dict[str, tuple[NewJob, str]] = {}
        for job in jobs:
            try:
                identity = identity_values(job.params, identity_params) if identity_params else ()
            except (KeyError, ValueError) as exc:  # a caller that skipped the doors' check
                raise InputError(
                    None, f"an obligation lacks a valid identity param {exc.args[0]!r}"
                ) from exc
            key = operation_key(policy, job.tenant_id, job.object_id, policy_version, identity)
            seen = earliest.get(key)
            if seen is None:
                earliest[key] = (job, scope_of(job))
            else:
                due = min(job.due_at, seen[0].due_at)
                earliest[key] = (NewJob(job.tenant_id, job.object_id, due, job.params), seen[1])
        items = sorted(earliest.items())
        attempt = 1
        while True:
            try:
                counts = self._upsert_all(policy, policy_version, items, now, within)
            except psycopg.Error as exc:
                if exc.sqlstate not in RETRYABLE_SQLSTATES or attempt >= SCHEDULE_ATTEMPTS:
                    unreached = isinstance(exc, psycopg.OperationalError)
                    raise (LedgerUnavailableError if unreached else LedgerError)(
                        f"scheduling failed after {attempt} attempt(s) ({exc.sqlstate}); "
                        "nothing of this input was written"
                    ) from exc
                self._sleep(_backoff(attempt))
                attempt += 1
                continue
            inserted, moved, replaced, kept, updated = counts
            return ScheduleResult(
                inserted,
                moved,
                len(items) - inserted - updated,
                attempt,
                params_replaced=replaced,
                params_kept=kept,
            )

    @_serialised
    def _upsert_all(
        self,
        policy: str,
        policy_version: int,
        items: Sequence[tuple[str, tuple[NewJob, str]]],
        now: datetime,
        within: WithinSchedule | None = None,
    ) -> tuple[int, int, int, int, int]:
        """Upsert every row in one transaction: copy them into the session's staging table,
        then one statement (see schedule_sql.UPSERT_STAGED_JOBS): (inserted, moved, params
        replaced, params kept, updated)."""
        conn = self._connection()
        outer = conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE
        with conn.transaction():
            if items:  # every row is due at its due time or later: lower the wake item first
                self._lower_wake(conn, policy, min(job.due_at for _key, (job, _s) in items))
            conn.execute(schedule_sql.CREATE_SCHEDULE_STAGE)
            if outer:  # inside a caller's transaction: an earlier schedule's rows are still staged
                conn.execute(schedule_sql.EMPTY_SCHEDULE_STAGE)
            with conn.cursor() as cur:
                with cur.copy(schedule_sql.COPY_SCHEDULE_STAGE) as copy:
                    copy.set_types(SCHEDULE_STAGE_TYPES)
                    for key, (job, scope) in items:
                        staged = (job.tenant_id, job.object_id, scope, key, job.due_at)
                        copy.write_row((*staged, Jsonb(job.params)))
                counts = cur.execute(
                    schedule_sql.UPSERT_STAGED_JOBS,
                    {"policy": policy, "policy_version": policy_version, "now": now},
                ).fetchone()
            assert counts is not None  # an aggregate always answers one row
            inserted, moved, replaced, kept, updated = (int(n) for n in counts)
            if within is not None:
                within(conn, inserted, moved)
        return inserted, moved, replaced, kept, updated


def _backoff(attempt: int) -> float:
    """Seconds to wait before attempt `attempt + 1`: doubling, jittered so that two losers of
    the same conflict do not meet again at the same instant."""
    jitter: float = random.uniform(0.5, 1.5)
    return float(SCHEDULE_BACKOFF_SECONDS * 2 ** (attempt - 1) * jitter)

"""The consumer's part of the ledger: the rows its messages name, and settling them.

Called by `sweeper.consumer` (and `sweeper.redrive.run`, which reads the same rows for its dead
letters). What is called, under which scope, comes from these rows, never from a message body.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any, LiteralString

from psycopg.rows import TupleRow

from sweeper.ledger import settle_sql
from sweeper.ledger.executor import Executor, _moves
from sweeper.ledger.rows import typed_states
from sweeper.models import JobStatus, LedgerTarget, OutcomeClass

#: An attempt count no job reaches: every counted attempt is a retry when no limit is given.
NO_ATTEMPT_LIMIT = 2**31 - 1


class ConsumerLedger(Executor):
    """The consumer's (and redrive's) side of `sweeper.ledger.store.Ledger`."""

    def targets(self, keys: Sequence[str]) -> dict[str, LedgerTarget]:
        """Each named job's ledger row (one query per consumer batch); unknown keys are absent."""
        if not keys:
            return {}
        rows = self._execute(settle_sql.TARGETS_BY_KEYS, {"keys": list(keys)})
        return {target.operation_key: target for target in map(_target, rows)}

    def count_not_yet_due(self, keys: Sequence[str]) -> None:
        """Count deliveries acknowledged uncalled because their job's time had not come, each
        for the batch the ledger says carries its job (settle_sql.COUNT_NOT_YET_DUE)."""
        if keys:
            self._execute(settle_sql.COUNT_NOT_YET_DUE, {"keys": list(keys)})

    def mark_succeeded(
        self, key: str, outcome: OutcomeClass, now: datetime, *, trace_id: str | None = None
    ) -> bool:
        """Settle a job as succeeded; False when it was already settled.

        `trace_id`, here and below: the X-Ray trace of the delivery, kept for `sweeper inspect`.
        """
        rows = self._execute(
            settle_sql.MARK_SUCCEEDED,
            {
                "key": key,
                "outcome": outcome.value,
                "now": now,
                "from": _moves(JobStatus.SUCCEEDED, JobStatus.LEASED, JobStatus.PENDING),
                "trace_id": trace_id,
            },
        )
        return bool(rows)

    def mark_failed(
        self,
        key: str,
        outcome: OutcomeClass,
        code: str,
        now: datetime,
        *,
        count_attempt: bool,
        trace_id: str | None = None,
    ) -> bool:
        """Make a job terminal; False when it was already settled."""
        rows = self._execute(
            settle_sql.MARK_FAILED,
            {
                "key": key,
                "outcome": outcome.value,
                "code": code,
                "now": now,
                "attempts": 1 if count_attempt else 0,
                "from": _moves(JobStatus.FAILED, JobStatus.LEASED, JobStatus.PENDING),
                "trace_id": trace_id,
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
        trace_id: str | None = None,
    ) -> int | None:
        """Record a delivery that settled nothing (see settle_sql.RECORD_UNSETTLED).

        A counted attempt that leaves the job below `max_attempts` is counted as a retry of its
        carrying batch. Returns the attempt count, or None when the job is already settled.
        """
        rows = self._execute_no_earlier(
            settle_sql.RECORD_UNSETTLED,
            {
                "key": key,
                "now": now,
                "next_attempt_at": next_attempt_at,
                "lease_until": lease_until,
                "outcome": None if outcome is None else outcome.value,
                "code": code,
                "attempts": 1 if count_attempt else 0,
                "retry_below": NO_ATTEMPT_LIMIT if max_attempts is None else max_attempts,
                "trace_id": trace_id,
            },
        )
        return int(rows[0][0]) if rows else None

    def record_snooze(
        self,
        key: str,
        now: datetime,
        *,
        seconds: float,
        lease_until: datetime,
        code: str,
        max_snooze_seconds: float,
        trace_id: str | None = None,
    ) -> float | None:
        """Defer a job by `seconds` without an attempt (see settle_sql.RECORD_SNOOZE).

        Returns the job's snoozed seconds in all, or None when the job is already settled or
        this snooze would take it past `max_snooze_seconds` (nothing is then written).
        """
        rows = self._execute_no_earlier(
            settle_sql.RECORD_SNOOZE,
            {
                "key": key,
                "now": now,
                "seconds": seconds,
                "next_attempt_at": now + timedelta(seconds=seconds),
                "lease_until": lease_until,
                "code": code,
                "max_snooze": max_snooze_seconds,
                "trace_id": trace_id,
            },
        )
        return float(rows[0][0]) if rows else None

    def _execute_no_earlier(self, query: LiteralString, params: dict[str, Any]) -> list[TupleRow]:
        """A retry's or snooze's write (`params["next_attempt_at"]`), on the consumer's hot path
        without the wake item: first written only where it cannot make the job claimable earlier
        than the item already allows (a leased row: its lease only stretches, and the item is no
        later than the lease's expiry; a pending row whose next attempt moves no earlier). Only
        a pending row moved earlier (its lease reclaimed meanwhile) lowers the item first, then
        is written (sweeper.ledger.wake)."""
        if self.wake is None:  # no item to keep: one unrestricted write
            return self._execute(query, {**params, "lowered": True})
        rows = self._execute(query, {**params, "lowered": False})
        if rows:
            return rows
        # Moved earlier, or settled meanwhile (then nothing is written, and the lowering is early)
        return self._execute(query, {**params, "lowered": True}, waking=params["next_attempt_at"])

    def jobs_for_redrive(self, keys: Sequence[str]) -> dict[str, LedgerTarget]:
        """What redrive decides on, per operation key; unknown keys are absent."""
        if not keys:
            return {}
        rows = self._execute(settle_sql.JOBS_FOR_REDRIVE, {"keys": list(keys)})
        targets = (replace(_target(row[:-1]), last_error_code=row[-1]) for row in rows)
        return {target.operation_key: target for target in targets}


def _target(row: TupleRow) -> LedgerTarget:
    """One row of settle_sql.TARGET_COLUMNS (LedgerTarget's fields in order), as the consumer
    and redrive read it."""
    return LedgerTarget(*typed_states(row, 1, 8))

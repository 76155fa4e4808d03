"""The operator's part of the ledger: reading jobs and runs, pausing, retrying, recording actions.

Called by `sweeper.operations` (the console and its CLI), `sweeper.audit` (batch audit), and the
pause switch that the producer and the release check read (`is_paused`).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any, LiteralString

import psycopg
from psycopg.types.json import Jsonb

from sweeper.ledger import control_sql, status_sql, view_sql
from sweeper.ledger.executor import Executor, _moves, _serialised, statement_failure
from sweeper.ledger.rows import (
    ActionRecord,
    ActivityBucket,
    BatchAudit,
    FoundJob,
    InspectRow,
    JobEvent,
    PolicyState,
    RetryingGroup,
    RunRecord,
    typed_states,
)
from sweeper.models import (
    POSTPONABLE_STATUSES,
    ControlAction,
    Job,
    JobSelection,
    JobStatus,
    OutcomeClass,
    sources_of,
)

#: Per job control: its statement, the job event it records, and the states it moves from (the
#: state machine's sources of its target; a postponement stays in the state it finds).
_CONTROLS: dict[ControlAction, tuple[str, str, tuple[JobStatus, ...]]] = {
    ControlAction.CANCEL: (
        control_sql.CANCEL_JOBS,
        "cancelled",
        sources_of(JobStatus.CANCELLED),
    ),
    ControlAction.HOLD: (control_sql.HOLD_JOBS, "held", sources_of(JobStatus.HELD)),
    ControlAction.UNHOLD: (control_sql.UNHOLD_JOBS, "unheld", (JobStatus.HELD,)),
    ControlAction.POSTPONE: (control_sql.POSTPONE_JOBS, "postponed", POSTPONABLE_STATUSES),
}


def control_sources(action: ControlAction) -> tuple[JobStatus, ...]:
    """The states a job control moves jobs from."""
    return _CONTROLS[action][2]


class OperatorLedger(Executor):
    """The operator's side of `sweeper.ledger.store.Ledger`."""

    # -- reading --------------------------------------------------------------------------------

    def get(self, key: str) -> Job | None:
        rows = self._execute(status_sql.SELECT_JOB, {"key": key})
        return Job(*typed_states(rows[0], 7, 13)) if rows else None

    def preview_control(
        self,
        action: ControlAction,
        policy: str,
        selection: JobSelection,
        *,
        limit: int,
        until: datetime | None = None,
    ) -> list[tuple[str, JobStatus]]:
        """The (key, state) of each job `control` would move now (control_sql.PREVIEW_CONTROL)."""
        rows = self._execute(
            control_sql.PREVIEW_CONTROL,
            _control_params(action, policy, selection, limit, until),
        )
        return [(str(key), JobStatus(status)) for key, status in rows]

    def control(
        self,
        action: ControlAction,
        policy: str,
        selection: JobSelection,
        *,
        actor: str,
        now: datetime,
        limit: int,
        reason: str | None = None,
        until: datetime | None = None,
        detail: dict[str, Any] | None = None,
    ) -> list[tuple[str, JobStatus]]:
        """Cancel, hold, unhold or postpone the selected jobs in one statement, recorded as an
        operator action with a job event per job; the (key, state it left) of each job moved."""
        statement, event, _sources = _CONTROLS[action]
        params = {
            **_control_params(action, policy, selection, limit, until),
            "action": action.value,
            "event": event,
            "actor": actor,
            "reason": reason,
            "detail": Jsonb(detail or {}),
            "now": now,
        }
        # An unhold makes its jobs eligible at their next attempt (maybe past): it lowers the
        # policy's wake item to now before it writes (sweeper.ledger.wake). A postpone only moves
        # a next attempt later (greatest), a cancel or hold takes a job out: none lowers.
        waking = now if action is ControlAction.UNHOLD else None
        rows = self._execute(statement, params, waking=waking, policy=policy)
        return [(str(key), JobStatus(status)) for key, status in rows]

    def counts(self, policy: str) -> dict[JobStatus, int]:
        rows = self._execute(status_sql.COUNT_BY_STATUS, {"policy": policy})
        found = {JobStatus(status): int(count) for status, count in rows}
        return {status: found.get(status, 0) for status in JobStatus}

    def batch_audit(self, policy: str, since: datetime, limit: int) -> list[BatchAudit]:
        """The policy's batches scheduled at or after `since`, newest first, with their outcome
        counters and unsettled jobs (status_sql.BATCH_AUDIT)."""
        rows = self._execute(
            status_sql.BATCH_AUDIT, {"policy": policy, "since": since, "limit": limit}
        )
        return [BatchAudit(*row) for row in rows]

    def runs(self, policy: str, limit: int = 10) -> list[RunRecord]:
        rows = self._execute(status_sql.SELECT_RUNS, {"policy": policy, "limit": limit})
        return [RunRecord(*row) for row in rows]

    # -- the operator's console -----------------------------------------------------------------

    def is_paused(self, policy: str) -> bool:
        rows = self._execute(status_sql.SELECT_PAUSED, {"policy": policy})
        return bool(rows and rows[0][0])

    def policy_state(self, policy: str) -> PolicyState:
        rows = self._execute(status_sql.SELECT_POLICY_STATE, {"policy": policy})
        if not rows:
            return PolicyState(policy, False, None, None, None, None)
        return PolicyState(*rows[0])

    def pause(self, policy: str, actor: str, reason: str | None, now: datetime) -> bool:
        """Pause a policy (idempotent); True when this call paused it. Recorded as an action."""
        params = {"policy": policy, "actor": actor, "reason": reason, "now": now}
        return self._switch(control_sql.SET_PAUSED, "pause", params)

    def resume(self, policy: str, actor: str, reason: str | None, now: datetime) -> bool:
        """Resume a policy; True when it was paused. Recorded as an action."""
        params = {"policy": policy, "actor": actor, "reason": reason, "now": now}
        return self._switch(control_sql.SET_RESUMED, "resume", params)

    @_serialised
    def _switch(self, statement: LiteralString, action: str, params: dict[str, Any]) -> bool:
        """Pause or resume, recorded as an action in the same transaction; True when the
        statement changed the flag (it returns `now` then: the pause it set, or the resume)."""
        conn = self._connection()
        try:
            with conn.transaction():
                rows = conn.execute(statement, params).fetchall()
                changed = bool(rows) and rows[0][0] == params["now"]
                conn.execute(
                    control_sql.INSERT_ACTION,
                    {**params, "action": action, "detail": Jsonb({"changed": changed})},
                )
        except psycopg.Error as exc:
            raise statement_failure(exc) from exc
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
            control_sql.INSERT_ACTION,
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

    def record_step(self, action_id: int, at: datetime, detail: dict[str, Any]) -> None:
        """Record one step of a recorded action (migration 0015): a page moved, a run released."""
        self._execute(
            control_sql.INSERT_ACTION_STEP,
            {"action_id": action_id, "at": at, "detail": Jsonb(detail)},
        )

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
        """Terminal jobs back to pending, fresh budget, due now, recorded: control_sql.RETRY_FAILED.

        Returns the operation keys moved.
        """
        classes = None if outcomes is None else [o.value for o in outcomes]
        detail: dict[str, Any] = {
            "keys": None if keys is None else len(keys),
            "outcomes": classes,
            "tenant_filter": tenant_id is not None,
            "limit": limit,
        }
        rows = self._execute(
            control_sql.RETRY_FAILED,
            {
                "policy": policy,
                "actor": actor,
                "reason": reason,
                "detail": Jsonb(detail),
                "now": now,
                "keys": None if keys is None else list(keys),
                "outcomes": classes,
                "tenant_id": tenant_id,
                "limit": limit,
                "from": _moves(JobStatus.PENDING, JobStatus.FAILED),
            },
            waking=now,  # due now: lowers the wake item (sweeper.ledger.wake)
            policy=policy,
        )
        return [str(key) for (key,) in rows]

    def runs_between(
        self, policy: str, since: datetime, until: datetime
    ) -> dict[datetime, str | None]:
        """Scheduled time -> stop reason of every run recorded in [since, until]."""
        rows = self._execute(
            status_sql.RUNS_BETWEEN, {"policy": policy, "since": since, "until": until}
        )
        return {at: reason for at, reason in rows}

    def last_run_at_or_before(self, policy: str, at: datetime) -> datetime | None:
        rows = self._execute(status_sql.LAST_RUN_AT_OR_BEFORE, {"policy": policy, "at": at})
        found: datetime | None = rows[0][0]
        return found

    def reopen_skipped_run(
        self, policy: str, scheduled_at: datetime, batch_id: str, now: datetime
    ) -> bool:
        """Re-arm a run skipped while paused under a new batch (control_sql.REOPEN_SKIPPED_RUN)."""
        rows = self._execute(
            control_sql.REOPEN_SKIPPED_RUN,
            {"policy": policy, "scheduled_at": scheduled_at, "batch_id": batch_id, "now": now},
        )
        return bool(rows)

    def inspect(
        self, policy: str, now: datetime, stuck_before: datetime, limit: int
    ) -> list[InspectRow]:
        """Terminal jobs, expired leases and long-overdue pending rows (status_sql.INSPECT_JOBS)."""
        rows = self._execute(
            status_sql.INSPECT_JOBS,
            {"policy": policy, "now": now, "stuck_before": stuck_before, "limit": limit},
        )
        return [InspectRow(*typed_states(row, 1, 2)) for row in rows]

    def active_scopes(self, policy: str, limit: int) -> dict[str, int]:
        """Scopes holding pending or leased work, busiest first, with their counts."""
        rows = self._execute(status_sql.ACTIVE_SCOPES, {"policy": policy, "limit": limit})
        return {str(scope): int(count) for scope, count in rows}

    # -- the console page's reads (view_sql) ----------------------------------------------------

    def retrying(self, policy: str, limit: int) -> list[RetryingGroup]:
        """Unsettled jobs by their last retrying class and code, largest first."""
        rows = self._execute(view_sql.RETRYING_BY_CODE, {"policy": policy, "limit": limit})
        return [
            RetryingGroup(OutcomeClass(outcome), code, int(n), int(scopes), oldest, most, last)
            for outcome, code, n, scopes, oldest, most, last in rows
        ]

    def activity(
        self, policy: str, since: datetime, until: datetime, bucket: timedelta
    ) -> list[ActivityBucket]:
        """Per time bucket in [since, until), oldest first, every bucket present: the jobs the
        policy's runs published (claims) and the jobs settled (succeeded, failed)."""
        params = {
            "policy": policy,
            "since": since,
            "until": until,
            "bucket": bucket,
            "origin": since,
        }
        claims = {at: int(n) for at, n in self._execute(view_sql.CLAIMS_BY_BUCKET, params)}
        settled = {
            at: (int(ok), int(failed))
            for at, ok, failed in self._execute(view_sql.COMPLETIONS_BY_BUCKET, params)
        }
        found = []
        at = since
        while at < until:
            ok, failed = settled.get(at, (0, 0))
            found.append(ActivityBucket(at, claims.get(at, 0), ok, failed))
            at += bucket
        return found

    def search(self, policy: str, query: str, limit: int) -> list[FoundJob]:
        """The job with this operation key, or this tenant's jobs, newest first."""
        rows = self._execute(
            view_sql.SEARCH_JOBS, {"policy": policy, "query": query, "limit": limit}
        )
        return [FoundJob(*typed_states(row, 2, 3)) for row in rows]

    def job_events(self, job_id: int, limit: int) -> list[JobEvent]:
        """A job's operator events, oldest first, with who acted and why."""
        rows = self._execute(view_sql.JOB_EVENTS, {"job_id": job_id, "limit": limit})
        return [JobEvent(*row) for row in rows]

    def recent_actions(self, policy: str, limit: int) -> list[ActionRecord]:
        """The policy's last operator actions, newest first."""
        rows = self._execute(view_sql.RECENT_ACTIONS, {"policy": policy, "limit": limit})
        return [ActionRecord(*row) for row in rows]


def _control_params(
    action: ControlAction,
    policy: str,
    selection: JobSelection,
    limit: int,
    until: datetime | None,
) -> dict[str, Any]:
    """The parameters of control_sql._CONTROL_FILTER."""

    def values(items: Sequence[Any] | None) -> list[str] | None:
        return None if items is None else [str(item) for item in items]

    sources = control_sources(action)
    target = _TARGETS.get(action)
    return {
        "policy": policy,
        # Checked against the state machine; a postponement moves no job to another state.
        "from": [s.value for s in sources] if target is None else _moves(target, *sources),
        "keys": values(selection.keys),
        "tenant_id": selection.tenant_id,
        "statuses": values(selection.statuses),
        "outcomes": values(selection.outcomes),
        "due_from": selection.due_from,
        "due_before": selection.due_before,
        "until": until if action is ControlAction.POSTPONE else None,
        "limit": limit,
    }


#: The state each control moves to (a postponement stays where it is).
_TARGETS: dict[ControlAction, JobStatus] = {
    ControlAction.CANCEL: JobStatus.CANCELLED,
    ControlAction.HOLD: JobStatus.HELD,
    ControlAction.UNHOLD: JobStatus.PENDING,
}

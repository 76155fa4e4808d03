"""Chosen jobs: inspect the terminal, stuck and held ones, retry terminal ones, and job control
(cancel, hold, unhold, postpone); each change recorded in the ledger with who did it. Prune is
`sweeper.prune.run`."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from datetime import datetime, timedelta
from typing import Any

from sweeper.action_log import require_reason
from sweeper.config.policy import DEFAULT_MAX_POSTPONE_DAYS
from sweeper.errors import OperatorError
from sweeper.ledger.console import control_sources
from sweeper.ledger.store import InspectRow, Ledger
from sweeper.models import ControlAction, JobSelection, JobStatus, OutcomeClass
from sweeper.operations.text import iso
from sweeper.postpone import check_postpone


def inspect_jobs(
    policy: str, ledger: Ledger, *, now: datetime, stuck_after: timedelta, limit: int
) -> list[dict[str, Any]]:
    """Terminal jobs, expired leases, pending rows overdue by `stuck_after` and held jobs (their
    `updated_at` is when the hold began): ids, classes, codes, attempts and times, never
    customer data."""

    def row(job: InspectRow) -> dict[str, Any]:
        kind = {JobStatus.FAILED: "terminal", JobStatus.HELD: "held"}.get(job.status, "stuck")
        return {
            "kind": kind,
            "operation_key": job.operation_key,
            "status": job.status.value,
            "outcome": None if job.last_outcome is None else job.last_outcome.value,
            "error_code": job.last_error_code,
            "attempts": job.attempt_count,
            "due_at": iso(job.due_at),
            "next_attempt_at": iso(job.next_attempt_at),
            "lease_expires_at": iso(job.lease_expires_at),
            "updated_at": iso(job.updated_at),
            "completed_at": iso(job.completed_at),
            "trace_id": job.last_trace_id,  # the X-Ray trace of its last delivery
        }

    return [row(job) for job in ledger.inspect(policy, now, now - stuck_after, limit)]


def retry_jobs(
    policy: str,
    ledger: Ledger,
    *,
    actor: str,
    now: datetime,
    keys: Sequence[str] | None = None,
    outcomes: Sequence[OutcomeClass] | None = None,
    tenant_id: str | None = None,
    limit: int = 1000,
    reason: str | None = None,
) -> list[str]:
    """Terminal jobs back to pending with a fresh attempt budget; recorded in the ledger."""
    if keys is None and outcomes is None and tenant_id is None:
        raise OperatorError("choose the jobs to retry: operation keys, an outcome or a tenant")
    return ledger.retry_failed(
        policy,
        actor,
        now,
        keys=keys,
        outcomes=outcomes,
        tenant_id=tenant_id,
        limit=limit,
        reason=reason,
    )


# -- job control: cancel, hold, unhold, postpone --------------------------------------------------

#: Above this many jobs a job control asks for a confirmation (`--yes` on the CLI).
CONFIRM_ABOVE = 100
#: Jobs moved by one job control unless told otherwise (`--max`).
CONTROL_DEFAULT_MAX = 1000


@dataclass
class ControlReport:
    policy: str
    action: str
    dry_run: bool
    #: Jobs moved (in a dry run: that would be moved), by the state they left.
    moved: int
    from_states: dict[str, int]
    keys: list[str]
    until: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def control_jobs(
    action: ControlAction,
    policy: str,
    ledger: Ledger,
    selection: JobSelection,
    *,
    actor: str,
    now: datetime,
    reason: str | None = None,
    until: datetime | None = None,
    limit: int = CONTROL_DEFAULT_MAX,
    dry_run: bool = False,
    max_postpone: timedelta = timedelta(days=DEFAULT_MAX_POSTPONE_DAYS),
) -> ControlReport:
    """Cancel, hold, unhold or postpone the selected jobs (at most `limit`), recorded in the
    ledger with who did it and why; a dry run only says which jobs it would move. A
    postponement goes at most `max_postpone` ahead (the policy's `max_postpone_days`)."""
    if selection.empty:
        raise OperatorError(
            f"choose the jobs to {action.value}: operation keys, a tenant, a status, an outcome "
            "or a due range"
        )
    if action in (ControlAction.CANCEL, ControlAction.HOLD, ControlAction.POSTPONE):
        reason = require_reason(action.value, reason)
    if (action is ControlAction.POSTPONE) != (until is not None):
        raise OperatorError("postpone needs a time to postpone to (--until), and only postpone")
    if until is not None:
        check_postpone(until, now=now, bound=max_postpone)
    sources = control_sources(action)
    if selection.statuses is not None and not set(selection.statuses) <= set(sources):
        allowed = ", ".join(s.value for s in sources)
        raise OperatorError(f"{action.value} moves jobs from {allowed} only (--status)")
    if dry_run:
        moved = ledger.preview_control(action, policy, selection, limit=limit, until=until)
    else:
        moved = ledger.control(
            action,
            policy,
            selection,
            actor=actor,
            now=now,
            limit=limit,
            reason=reason,
            until=until,
            detail={
                "keys": None if selection.keys is None else len(selection.keys),
                "tenant_filter": selection.tenant_id is not None,
                "statuses": None
                if selection.statuses is None
                else [s.value for s in selection.statuses],
                "outcomes": None
                if selection.outcomes is None
                else [o.value for o in selection.outcomes],
                "due_from": iso(selection.due_from),
                "due_before": iso(selection.due_before),
                "until": iso(until),
                "limit": limit,
            },
        )
    from_states: dict[str, int] = {}
    for _key, status in moved:
        from_states[status.value] = from_states.get(status.value, 0) + 1
    return ControlReport(
        policy, action.value, dry_run, len(moved), from_states, [k for k, _ in moved], iso(until)
    )

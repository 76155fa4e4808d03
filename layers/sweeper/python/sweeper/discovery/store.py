"""The ledger's side of discovery: the policy's cursor and the run records (migration 0006).

Obligations go in through `Ledger.schedule`, the one idempotent upsert; the cursor and the run's
figures advance inside that same transaction, so a page is committed whole or not at all.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import psycopg
from psycopg.rows import TupleRow
from psycopg.types.json import Jsonb

from sweeper.config import Policy
from sweeper.discovery import queries
from sweeper.discovery.rows import Cursor, Rejected
from sweeper.errors import CursorMovedError
from sweeper.ledger.store import Ledger
from sweeper.models import NewJob
from sweeper.scheduling import schedule_jobs

#: A run record keeps at most this many rejected positions (the count is always exact).
REJECTED_SAMPLE_MAX = 50


@dataclass(frozen=True, slots=True)
class CursorState:
    cursor: Cursor | None
    pass_number: int
    pass_scanned: int
    pass_started_at: datetime | None
    last_complete_at: datetime | None


@dataclass(frozen=True, slots=True)
class RunStart:
    run_id: str
    duplicate: bool


@dataclass(frozen=True, slots=True)
class PageCommit:
    """One page's effect on the ledger."""

    inserted: int
    moved_earlier: int
    unchanged: int
    state: CursorState


@dataclass(frozen=True, slots=True)
class DiscoveryRun:
    """A discovery run as recorded: ids, counts, cursors and times."""

    run_id: str
    policy: str
    source: str
    scheduled_at: datetime
    started_at: datetime
    finished_at: datetime | None
    invocations: int
    pass_number: int | None
    scanned: int
    inserted: int
    moved_earlier: int
    unchanged: int
    not_due: int
    rejected: int
    rejected_sample: list[dict[str, Any]]
    cursor_before: Cursor | None
    cursor_after: Cursor | None
    elapsed_seconds: float | None
    stop_reason: str | None


def _jsonb(value: Any) -> Jsonb | None:
    return None if value is None else Jsonb(value)


class DiscoveryStore:
    """Discovery's statements on the ledger's connection."""

    def __init__(self, ledger: Ledger) -> None:
        self._ledger = ledger

    @property
    def ledger(self) -> Ledger:
        return self._ledger

    def _rows(self, query: Any, params: dict[str, Any]) -> list[TupleRow]:
        with self._ledger.transaction() as conn:
            cur = conn.execute(query, params)
            return cur.fetchall() if cur.description is not None else []

    def cursor(self, policy: str, source: str, now: datetime) -> CursorState:
        """The cursor of the policy's source (created on first use)."""
        with self._ledger.transaction() as conn:
            conn.execute(queries.ENSURE_CURSOR, {"policy": policy, "source": source, "now": now})
            row = conn.execute(
                queries.SELECT_CURSOR, {"policy": policy, "source": source}
            ).fetchone()
        assert row is not None  # ENSURE_CURSOR made it
        return CursorState(row[0], int(row[1]), int(row[2]), row[3], row[4])

    def start_run(
        self,
        run_id: str,
        policy: str,
        source: str,
        scheduled_at: datetime,
        state: CursorState,
        now: datetime,
    ) -> RunStart:
        rows = self._rows(
            queries.START_RUN,
            {
                "run_id": run_id,
                "policy": policy,
                "source": source,
                "scheduled_at": scheduled_at,
                "now": now,
                "pass_number": state.pass_number,
                "cursor": _jsonb(state.cursor),
            },
        )
        holder, invocations = rows[0]
        return RunStart(str(holder), duplicate=int(invocations) > 1)

    def commit_page(
        self,
        policy: Policy,
        run_id: str,
        jobs: Sequence[NewJob],
        *,
        source: str,
        state: CursorState,
        cursor_after: Cursor | None,
        complete: bool,
        scanned: int,
        unordered: int = 0,
        not_due: int,
        rejected: Sequence[Rejected],
        sample_room: int,
        now: datetime,
    ) -> PageCommit:
        """Upsert a page's obligations and advance the cursor, in one transaction.

        `scanned` rows of the page advance the pass's position; `unordered` rows (read outside
        the order, such as NULL keys) count in the run's figures only.
        Raises CursorMovedError (with nothing written) when another run moved the cursor.
        """
        accepted = len(jobs)

        def advance(conn: psycopg.Connection[TupleRow], inserted: int, moved: int) -> None:
            moved_cursor = conn.execute(
                queries.ADVANCE_CURSOR,
                {
                    "policy": policy.name,
                    "source": source,
                    "complete": complete,
                    "cursor_after": _jsonb(cursor_after),
                    "cursor_before": _jsonb(state.cursor),
                    "pass_number": state.pass_number,
                    "pass_scanned": state.pass_scanned,
                    "scanned": scanned,
                    "now": now,
                },
            ).fetchall()
            if not moved_cursor:
                raise CursorMovedError(
                    f"discovery cursor of policy {policy.name} moved under run {run_id}"
                )
            conn.execute(
                queries.ADD_PAGE,
                {
                    "run_id": run_id,
                    "scanned": scanned + unordered,
                    "inserted": inserted,
                    "moved": moved,
                    "unchanged": accepted - inserted - moved,
                    "not_due": not_due,
                    "rejected": len(rejected),
                    "sample": Jsonb([r.as_dict() for r in rejected[: max(0, sample_room)]]),
                    "sample_max": REJECTED_SAMPLE_MAX,
                    "cursor_after": _jsonb(None if complete else cursor_after),
                },
            )

        result = schedule_jobs(self._ledger, policy, jobs, now, advance)
        if complete:
            next_state = CursorState(None, state.pass_number + 1, 0, None, now)
        else:
            next_state = CursorState(
                cursor_after,
                state.pass_number,
                state.pass_scanned + scanned,
                state.pass_started_at or now,
                state.last_complete_at,
            )
        return PageCommit(
            result.inserted,
            result.moved_earlier,
            accepted - result.inserted - result.moved_earlier,
            next_state,
        )

    def finish_run(self, run_id: str, now: datetime, elapsed: float, stop_reason: str) -> None:
        self._rows(
            queries.FINISH_RUN,
            {"run_id": run_id, "now": now, "elapsed": elapsed, "stop_reason": stop_reason},
        )

    def run(self, run_id: str) -> DiscoveryRun | None:
        rows = self._rows(queries.SELECT_RUN, {"run_id": run_id})
        return DiscoveryRun(*rows[0]) if rows else None

    def runs(self, policy: str, limit: int = 10) -> list[DiscoveryRun]:
        rows = self._rows(queries.SELECT_RUNS, {"policy": policy, "limit": limit})
        return [DiscoveryRun(*row) for row in rows]

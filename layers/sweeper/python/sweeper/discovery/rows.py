"""What a discovery source yields, and the check every source row passes before the ledger.

A row is trusted for nothing: ids must pass the id rule every door applies (`id_problem`: present,
short enough for an operation key, untrimmed, never `.` or `..`, no control character), the due
time must name its zone. A bad row is reported by its position in the pass and a reason,
never by its values (they may be customer data), and never stops the run.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol

from sweeper.models import ID_PROBLEMS, NewJob, id_problem
from sweeper.params import ParamsError, ParamsRules

#: A source's resume point, as JSON (stored in the ledger between runs). None: a pass's start.
Cursor = dict[str, Any]


@dataclass(frozen=True, slots=True)
class SourceRow:
    """One row as the source gave it: raw, unchecked."""

    #: 1-based place in its page (the pass position is the page's start plus this).
    offset: int
    tenant_id: object
    object_id: object
    due_at: object
    #: The row's params as the source gave them (None: none).
    params: object = None


@dataclass(frozen=True, slots=True)
class Rejected:
    """A row that did not pass the check: where it was and why, no values."""

    #: 1-based ordinal in the pass (the source's own order); None for rows outside that order.
    position: int | None
    reason: str

    def as_dict(self) -> dict[str, Any]:
        return {"position": self.position, "reason": self.reason}


@dataclass(frozen=True, slots=True)
class Page:
    """One page read from a source, in the source's total order."""

    rows: list[SourceRow]
    #: Where the next page starts: the last row's sort key (None only when `rows` is empty).
    next_cursor: Cursor | None
    #: No row follows this page: the pass is complete once it is committed.
    exhausted: bool
    #: Rows read, whatever became of them (rows, not due and rejected together).
    scanned: int
    #: Rows the source read but which are not due under the policy's rule yet (a later pass).
    not_due: int = 0
    #: Rows the source itself found bad, with their positions within this page (1-based).
    rejected_in_page: tuple[tuple[int, str], ...] = ()


class Source(Protocol):
    """A system of record read page by page in a total order that a cursor resumes."""

    kind: str

    def pass_rejects(self, now: datetime) -> list[Rejected]:
        """Rows the pass cannot reach through the cursor (a NULL sort key): counted once a pass."""
        ...

    def read_page(self, cursor: Cursor | None, limit: int, now: datetime) -> Page:
        """The `limit` rows after `cursor` (from the start when None)."""
        ...


def check_row(row: SourceRow, rules: ParamsRules | None = None) -> NewJob | str:
    """The obligation a row stands for, or the reason it is rejected (naming no value).

    Params are checked against `rules` (the policy's; None: size and shape only)."""
    tenant = _id(row.tenant_id)
    if isinstance(tenant, Problem):
        return f"tenant_id {tenant.reason}"
    obj = _id(row.object_id)
    if isinstance(obj, Problem):
        return f"object_id {obj.reason}"
    due = _due(row.due_at)
    if isinstance(due, Problem):
        return f"due_at {due.reason}"
    try:
        params = (rules or ParamsRules()).check(row.params)
    except ParamsError as exc:
        return exc.reason
    return NewJob(tenant, obj, due, params)


@dataclass(frozen=True, slots=True)
class Problem:
    reason: str


def _id(value: object) -> str | Problem:
    if value is None:
        return Problem("missing")
    text = str(value)
    code = id_problem(text)
    return text if code is None else Problem(ID_PROBLEMS[code])


def _due(value: object) -> datetime | Problem:
    if value is None:
        return Problem("missing")
    if isinstance(value, datetime):
        parsed = value
    elif isinstance(value, str):
        try:
            parsed = datetime.fromisoformat(value.strip())
        except ValueError:
            return Problem("is not an ISO 8601 time")
    else:
        return Problem("is not a time")
    if parsed.tzinfo is None or parsed.utcoffset() is None:
        return Problem("has no time zone")
    try:
        return parsed.astimezone(UTC)
    except OverflowError:
        return Problem("is outside years 1-9999 in UTC")

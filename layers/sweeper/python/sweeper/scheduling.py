"""Adding obligations: parse CSV or JSON lines, derive each job's limiter scope, upsert."""

from __future__ import annotations

import csv
import json
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime
from typing import Literal
from urllib.parse import urlsplit

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, ValidationError

from sweeper.config import Policy
from sweeper.errors import InputError
from sweeper.ledger.store import Ledger, ScheduleResult
from sweeper.models import MAX_ID_LENGTH, NewJob

InputFormat = Literal["csv", "jsonl"]


class JobInput(BaseModel):
    """One obligation as a user writes it; due_at defaults to now and must carry a time zone."""

    model_config = ConfigDict(extra="forbid", str_strip_whitespace=True)

    tenant_id: str = Field(min_length=1, max_length=MAX_ID_LENGTH)
    object_id: str = Field(min_length=1, max_length=MAX_ID_LENGTH)
    due_at: AwareDatetime | None = None


def scope_for(policy: Policy, job: NewJob) -> str:
    """The limiter scope of a job, from the policy's scope template."""
    return policy.scope.key_template.format(
        policy=policy.name,
        tenant_id=job.tenant_id,
        object_id=job.object_id,
        host=urlsplit(policy.action.api_url).hostname or "",
    )


def parse_jobs(lines: Iterable[str], fmt: InputFormat, now: datetime) -> Iterator[NewJob]:
    """Parse obligations; a bad line raises InputError with its number (values are not echoed)."""
    if fmt == "csv":
        reader = csv.DictReader(lines)
        # An empty cell means "not given" (due_at then defaults to now).
        rows: Iterator[tuple[int, object]] = (
            (reader.line_num, {k: (v or None) for k, v in row.items()}) for row in reader
        )
    else:
        rows = _json_lines(lines)
    for line, raw in rows:
        try:
            item = JobInput.model_validate(raw)
        except ValidationError as exc:
            fields = sorted({".".join(str(p) for p in e["loc"]) for e in exc.errors()})
            raise InputError(line, f"invalid field(s) {fields}") from exc
        yield NewJob(item.tenant_id, item.object_id, (item.due_at or now).astimezone(UTC))


def _json_lines(lines: Iterable[str]) -> Iterator[tuple[int, object]]:
    for number, text in enumerate(lines, start=1):
        if not text.strip():
            continue
        try:
            yield number, json.loads(text)
        except json.JSONDecodeError as exc:
            raise InputError(number, "not a JSON object") from exc


def schedule_jobs(
    ledger: Ledger, policy: Policy, jobs: Iterable[NewJob], now: datetime
) -> ScheduleResult:
    """Idempotent upsert on the operation key: a repeat never duplicates, only moves due earlier."""
    return ledger.schedule(
        policy.name, policy.version, lambda job: scope_for(policy, job), jobs, now
    )

"""Reading an obligations file for `sweeper obligations add`: CSV or JSON lines, every line
validated (its params against the policy's rules) before anything is written."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import ValidationError

from sweeper.errors import InputError
from sweeper.models import ID_PROBLEMS, NewJob
from sweeper.params import ParamsError, ParamsRules
from sweeper.scheduling import JobInput

InputFormat = Literal["csv", "jsonl"]


#: The CSV header: these columns in this order; due_at and params may be left out.
CSV_HEADER = ("tenant_id", "object_id", "due_at", "params")
CSV_HEADERS = frozenset(
    {CSV_HEADER[:2], CSV_HEADER[:3], CSV_HEADER, ("tenant_id", "object_id", "params")}
)
CSV_HEADER_TEXT = "tenant_id,object_id[,due_at][,params]"


def decode_input(data: bytes) -> str:
    """The input as text: UTF-8 only (a byte-order mark is allowed), else InputError."""
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise InputError(line, "not UTF-8 text (save the file as UTF-8)") from exc


def parse_jobs(
    text: str, fmt: InputFormat, now: datetime, rules: ParamsRules | None = None
) -> list[NewJob]:
    """Parse and validate every obligation of the input before anything is written.

    A bad line raises InputError with its number and what is wrong with it; values are never
    echoed (they may be customer ids or params). Params are checked against `rules` (the
    policy's: `ParamsRules.of(policy)`; None: size and shape only). An input with no obligation
    is an error too.
    """
    rules = rules if rules is not None else ParamsRules()
    rows = _csv_rows(text) if fmt == "csv" else _json_lines(text)
    jobs = [_job(line, raw, now, rules) for line, raw in rows]
    if not jobs:
        expected = (
            f"a header {CSV_HEADER_TEXT} and one obligation a line"
            if fmt == "csv"
            else "one JSON object a line"
        )
        raise InputError(None, f"the input holds no obligation (expected {expected})")
    return jobs


def _job(line: int, raw: dict[str, object], now: datetime, rules: ParamsRules) -> NewJob:
    try:
        item = JobInput.model_validate(raw)
    except ValidationError as exc:
        problems = sorted(
            "an unknown field"
            if e["type"] == "extra_forbidden"
            else (".".join(str(p) for p in e["loc"]) or "the line")
            + (f" ({ID_PROBLEMS[e['type']]})" if e["type"] in ID_PROBLEMS else "")
            for e in exc.errors()
        )
        raise InputError(line, f"invalid {', '.join(problems)}") from exc
    try:
        due = (item.due_at or now).astimezone(UTC)
    except OverflowError as exc:
        raise InputError(line, "invalid due_at: outside years 1-9999 in UTC") from exc
    try:
        params = rules.check(item.params)
    except ParamsError as exc:
        raise InputError(line, f"invalid params: {exc.reason}") from exc
    return NewJob(item.tenant_id, item.object_id, due, params)


def _csv_rows(text: str) -> Iterator[tuple[int, dict[str, object]]]:
    reader = csv.reader(io.StringIO(text, newline=""))
    header = _next_row(reader)
    if header is None:
        return
    names = [name.strip() for name in header]
    if tuple(names) not in CSV_HEADERS:
        raise InputError(
            1, f"the first line must be the header {CSV_HEADER_TEXT} (got {len(names)} column(s))"
        )
    while (row := _next_row(reader)) is not None:
        if not row or row == [""]:
            continue  # a blank line
        if len(row) != len(names):
            raise InputError(
                reader.line_num, f"{len(row)} field(s) where the header names {len(names)}"
            )
        # An empty cell means "not given" (due_at then defaults to now).
        values: dict[str, object] = {k: (v or None) for k, v in zip(names, row, strict=True)}
        cell = values.get("params")
        if isinstance(cell, str):  # the params column holds a JSON object
            try:
                values["params"] = json.loads(cell)
            except (ValueError, RecursionError) as exc:
                raise InputError(
                    reader.line_num, f"invalid params: {ParamsError('params_not_object').reason}"
                ) from exc
        yield reader.line_num, values


def _next_row(reader: Any) -> list[str] | None:
    try:
        row: list[str] = next(reader)
    except StopIteration:
        return None
    except csv.Error as exc:
        line = reader.line_num or 1
        if "field limit" in str(exc):
            raise InputError(
                line, f"a field is longer than {csv.field_size_limit()} characters"
            ) from exc
        raise InputError(line, f"not valid CSV ({exc})") from exc
    return row


def _json_lines(text: str) -> Iterator[tuple[int, dict[str, object]]]:
    for number, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        try:
            value = json.loads(line)
        except (ValueError, RecursionError) as exc:  # ValueError: also an int of >4300 digits
            raise InputError(number, "not a JSON object") from exc
        if not isinstance(value, dict):
            raise InputError(number, "not a JSON object")
        yield number, value

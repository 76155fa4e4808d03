"""Every door fuzzed: whatever arrives is taken or refused as input, never a crash.

Webhook body, intake message, CSV, JSON lines, S3 key and SQL row: an arbitrary input beside a
valid one either parses or is refused with the door's own error; a valid neighbour is never
harmed (kept in a batch, or, for an all-or-nothing file, refused with the whole file); and
every id that gets through obeys the id rule.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sweeper.config import S3Discovery
from sweeper.discovery.rows import SourceRow, check_row
from sweeper.discovery.s3 import S3Source
from sweeper.errors import HintRejectedError, InputError
from sweeper.intake.hints import hint_messages, parse_queue_body, parse_webhook_body
from sweeper.models import NewJob, id_problem
from sweeper_tools.obligation_file import parse_jobs

NOW = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)
LONG_AGO = datetime(2026, 1, 1, tzinfo=UTC)
FUZZ = settings(max_examples=75, deadline=None)
#: More digits than Python converts from text to int (sys.int_info.default_max_str_digits).
HUGE_NUMBER = "9" * 5000

#: Anything JSON can say, with the values that hurt: huge numbers, deep ids, odd text.
JSON_LEAF = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=False),
    st.text(max_size=20),
    st.sampled_from([".", "..", " x", "x ", "t\x00", "\u202e", "2026-12-01T00:00:00Z"]),
    st.sampled_from(["0001-01-01T00:00:00+01:00", "9999-12-31T23:59:59-12:00"]),
)
JSON_VALUE = st.recursive(
    JSON_LEAF,
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(
            st.sampled_from(["tenant_id", "object_id", "due_at", "hints", "kind", "x"]) | st.text(),
            children,
            max_size=4,
        )
    ),
    max_leaves=12,
)
HINT_FIELDS = st.fixed_dictionaries(
    {"tenant_id": JSON_LEAF, "object_id": JSON_LEAF},
    optional={"due_at": JSON_LEAF},
)


def _assert_ids_obey_the_rule(jobs: list[NewJob]) -> None:
    for job in jobs:
        assert id_problem(job.tenant_id) is None
        assert id_problem(job.object_id) is None


def test_a_number_of_more_digits_than_python_converts_is_an_invalid_body() -> None:
    body = f'{{"tenant_id":"t1","object_id":"o1","n":{HUGE_NUMBER}}}'.encode()
    with pytest.raises(HintRejectedError) as caught:
        parse_webhook_body(body, NOW, 10)
    assert caught.value.reason == "invalid_body"


def test_a_number_of_more_digits_than_python_converts_is_not_a_queue_body() -> None:
    with pytest.raises(HintRejectedError) as caught:
        parse_queue_body(f'{{"kind":"sweeper.hints","v":{HUGE_NUMBER}}}', "exports")
    assert caught.value.reason == "not_json"


def test_a_queued_due_time_beyond_utcs_calendar_is_an_invalid_message() -> None:
    (good,) = hint_messages("exports", "file", "r1", [NewJob("t1", "o1", NOW)])
    body = json.loads(good)
    body["hints"][0]["due_at"] = "0001-01-01T00:00:00+01:00"
    with pytest.raises(HintRejectedError) as caught:
        parse_queue_body(json.dumps(body), "exports")
    assert caught.value.reason == "invalid_message"


@FUZZ
@given(
    st.one_of(
        st.binary(max_size=200),
        JSON_VALUE.map(lambda v: json.dumps(v).encode()),
        st.lists(HINT_FIELDS, min_size=1, max_size=4).map(lambda v: json.dumps(v).encode()),
        st.just(f"[{HUGE_NUMBER}]".encode()),
    )
)
def test_a_webhook_body_is_hints_or_refused(body: bytes) -> None:
    try:
        jobs = parse_webhook_body(body, NOW, 10)
    except HintRejectedError as exc:
        reason = exc.reason
    else:
        assert jobs
        _assert_ids_obey_the_rule(jobs)
        return
    assert reason in ("invalid_body", "invalid_hints", "too_many_hints")


@FUZZ
@given(
    st.one_of(
        st.text(max_size=200),
        JSON_VALUE.map(json.dumps),
        st.lists(HINT_FIELDS, min_size=1, max_size=3).map(
            lambda hints: json.dumps(
                {
                    "kind": "sweeper.hints",
                    "v": 1,
                    "policy": "exports",
                    "source": "file",
                    "request_id": "r1",
                    "hints": hints,
                }
            )
        ),
        HINT_FIELDS.map(
            lambda detail: json.dumps(
                {
                    "version": "0",
                    "id": "e1",
                    "detail-type": "hint",
                    "source": "app",
                    "account": "123456789012",
                    "time": "2026-12-02T12:00:00Z",
                    "region": "eu-west-1",
                    "resources": [],
                    "detail": detail,
                }
            )
        ),
    )
)
def test_an_intake_message_is_hints_or_refused(body: str) -> None:
    try:
        _source, jobs = parse_queue_body(body, "exports")
    except HintRejectedError:
        return
    _assert_ids_obey_the_rule(jobs)


CSV_CELL = st.one_of(
    st.text(max_size=12),
    st.sampled_from([".", "..", " t", "t ", '"', '"a,b"', "\r", "\n", "\x00"]),
)


@FUZZ
@given(st.lists(st.lists(CSV_CELL, min_size=1, max_size=4), min_size=1, max_size=3))
def test_a_csv_file_is_parsed_whole_or_refused_whole(rows: list[list[str]]) -> None:
    # A valid line first: the file is all or nothing, so it is kept only if every line is.
    lines = ["tenant_id,object_id,due_at", "t1,o1,", *(",".join(row) for row in rows)]
    try:
        jobs = parse_jobs("\n".join(lines) + "\n", "csv", NOW)
    except InputError:
        return  # the whole file: nothing of it reaches the ledger
    assert jobs[0] == NewJob("t1", "o1", NOW)
    _assert_ids_obey_the_rule(jobs)


@FUZZ
@given(
    st.lists(
        st.one_of(
            st.text(max_size=30),
            JSON_VALUE.map(json.dumps),
            HINT_FIELDS.map(json.dumps),
            st.just(f'{{"tenant_id":"t","object_id":"o","x":{HUGE_NUMBER}}}'),
        ),
        min_size=1,
        max_size=3,
    )
)
def test_a_json_lines_file_is_parsed_whole_or_refused_whole(lines: list[str]) -> None:
    text = "\n".join([json.dumps({"tenant_id": "t1", "object_id": "o1"}), *lines]) + "\n"
    try:
        jobs = parse_jobs(text, "jsonl", NOW)
    except InputError:
        return
    assert jobs[0] == NewJob("t1", "o1", NOW)
    _assert_ids_obey_the_rule(jobs)


class _Listing:
    """One ListObjectsV2 page: what S3 would list for these keys (any key S3 can hold)."""

    def __init__(self, keys: list[str]) -> None:
        self._keys = sorted(set(keys))  # a key names one object

    def list_objects_v2(self, **kwargs: Any) -> Any:
        return {
            "IsTruncated": False,
            "Contents": [{"Key": key, "LastModified": LONG_AGO} for key in self._keys],
        }


S3_KEY_PART = st.one_of(
    st.text(st.characters(codec="utf-8"), min_size=1, max_size=12),
    st.sampled_from([".", "..", " t", "t ", "a\x07"]),
)


@FUZZ
@given(st.lists(st.lists(S3_KEY_PART, min_size=1, max_size=4), min_size=1, max_size=5))
def test_any_s3_key_is_a_row_or_rejected_and_a_good_key_is_kept(parts: list[list[str]]) -> None:
    keys = ["exports/" + "/".join(p) for p in parts]
    config = S3Discovery(
        bucket="exports-bucket", prefix="exports/", key_template="exports/{tenant_id}/{object_id}"
    )
    source = S3Source(config, _Listing([*keys, "exports/t1/good"]))
    page = source.read_page(None, 1000, NOW)
    checked = [check_row(row) for row in page.rows]
    jobs = [c for c in checked if isinstance(c, NewJob)]
    assert ("t1", "good") in {(job.tenant_id, job.object_id) for job in jobs}
    assert page.scanned == len(set(keys) | {"exports/t1/good"})
    _assert_ids_obey_the_rule(jobs)


SQL_VALUE = st.one_of(
    st.none(),
    st.integers(),
    st.text(max_size=20),
    st.sampled_from([".", "..", " t", "t\n", "\x00", "2026-12-01T00:00:00+00:00", "infinity"]),
    st.datetimes(timezones=st.none() | st.timezones()),
)


@FUZZ
@given(SQL_VALUE, SQL_VALUE, SQL_VALUE)
def test_any_sql_row_is_an_obligation_or_a_reason_naming_no_value(
    tenant: object, obj: object, due: object
) -> None:
    checked = check_row(SourceRow(1, tenant, obj, due))
    if isinstance(checked, NewJob):
        _assert_ids_obey_the_rule([checked])
        return
    assert checked.split(" ", 1)[0] in ("tenant_id", "object_id", "due_at")
    for value in (tenant, obj):
        if isinstance(value, str) and len(value) > 3:
            assert value not in checked

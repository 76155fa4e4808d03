"""Discovery's configuration and its row check: pure logic."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest
from pydantic import ValidationError

from sweeper.config import Policy, S3Discovery, SqlDiscovery
from sweeper.discovery.rows import SourceRow, check_row
from sweeper.discovery.s3 import key_pattern
from sweeper.models import MAX_ID_LENGTH, NewJob

QUERY = "SELECT a AS tenant_id, b AS object_id, c AS due_at FROM t"


def test_a_policy_names_its_source_by_kind() -> None:
    policy = Policy.model_validate(
        {
            "name": "exports",
            "discovery": {
                "kind": "s3",
                "bucket": "my-bucket",
                "prefix": "exports/",
                "key_template": "exports/{tenant_id}/{object_id}",
            },
        }
    )
    assert isinstance(policy.discovery, S3Discovery)
    sql = Policy.model_validate({"name": "exports", "discovery": {"kind": "sql", "query": QUERY}})
    assert isinstance(sql.discovery, SqlDiscovery)
    assert Policy(name="exports").discovery is None


@pytest.mark.parametrize(
    ("query", "problem"),
    [
        (QUERY + "; DELETE FROM t", "one statement"),
        ("DELETE FROM t RETURNING a", "must be a SELECT"),
        ("UPDATE t SET a = 1", "must be a SELECT"),
    ],
)
def test_the_query_must_be_one_select(query: str, problem: str) -> None:
    with pytest.raises(ValidationError, match=problem):
        SqlDiscovery(query=query)


def test_a_trailing_semicolon_is_dropped() -> None:
    assert SqlDiscovery(query=QUERY + " ;\n").query == QUERY


def test_now_is_the_runs_time_not_a_parameter() -> None:
    with pytest.raises(ValidationError, match="'now'"):
        SqlDiscovery(query=QUERY, params={"now": "2020-01-01"})


@pytest.mark.parametrize(
    "template",
    ["exports/{tenant_id}", "exports/{object_id}/{object_id}", "exports/{tenant_id}/{key}"],
)
def test_the_key_template_names_both_ids_once(template: str) -> None:
    with pytest.raises(ValidationError, match="key_template"):
        S3Discovery(bucket="my-bucket", key_template=template)


def test_only_the_key_templates_last_field_may_span_segments() -> None:
    assert S3Discovery(bucket="my-bucket", key_template="exports/{tenant_id}/{object_id+}")
    with pytest.raises(ValidationError, match="last field"):
        S3Discovery(bucket="my-bucket", key_template="exports/{tenant_id+}/{object_id}")


def test_a_spanning_field_matches_several_segments_and_never_a_dot_segment() -> None:
    pattern = key_pattern("exports/{tenant_id}/{object_id+}")
    match = pattern.match("exports/t1/2026/11/a.csv")
    assert match is not None
    assert (match["tenant_id"], match["object_id"]) == ("t1", "2026/11/a.csv")
    for key in (
        "exports/t1/2026/../a.csv",
        "exports/t1/./a.csv",
        "exports/t1/2026//a.csv",
        "exports/t1/a/..",
        "exports/t1/",
    ):
        assert pattern.match(key) is None, key
    # A plain field still matches one segment only
    assert key_pattern("exports/{tenant_id}/{object_id}").match("exports/t1/2026/a.csv") is None


def test_the_key_template_lies_under_the_prefix() -> None:
    with pytest.raises(ValidationError, match="start with prefix"):
        S3Discovery(bucket="my-bucket", prefix="exports/", key_template="{tenant_id}/{object_id}")


NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def test_a_good_row_is_an_obligation_in_utc() -> None:
    berlin = timezone(timedelta(hours=1))
    checked = check_row(SourceRow(1, "t1", 42, datetime(2026, 3, 1, 13, 0, tzinfo=berlin)))
    assert checked == NewJob("t1", "42", NOW)
    assert check_row(SourceRow(1, "t1", "o", "2026-03-01 12:00:00+00")) == NewJob("t1", "o", NOW)


@pytest.mark.parametrize(
    ("row", "reason"),
    [
        (SourceRow(1, None, "o", NOW), "tenant_id missing"),
        (SourceRow(1, "  ", "o", NOW), "tenant_id leading or trailing whitespace"),
        # An id is taken as it is, never trimmed: " t1 " would be another object than "t1".
        (SourceRow(1, " t1 ", "o", NOW), "tenant_id leading or trailing whitespace"),
        (SourceRow(1, "t", "o1\n", NOW), "object_id leading or trailing whitespace"),
        (SourceRow(1, "..", "o", NOW), "tenant_id a dot segment, . or .."),
        (SourceRow(1, "t", ".", NOW), "object_id a dot segment, . or .."),
        (
            SourceRow(1, "t", "o\x07o", NOW),
            "object_id a control, invisible or line-separator character",
        ),
        (
            SourceRow(1, "t\u202eo", "o", NOW),
            "tenant_id a control, invisible or line-separator character",
        ),
        (
            SourceRow(1, "t\u2028o", "o", NOW),
            "tenant_id a control, invisible or line-separator character",
        ),
        (SourceRow(1, "t", "", NOW), "object_id missing"),
        (SourceRow(1, "t", "x" * (MAX_ID_LENGTH + 1), NOW), "object_id longer than 256 characters"),
        (SourceRow(1, "t", "o", None), "due_at missing"),
        (SourceRow(1, "t", "o", datetime(2026, 3, 1)), "due_at has no time zone"),
        (SourceRow(1, "t", "o", "2026-03-01 12:00:00"), "due_at has no time zone"),
        (SourceRow(1, "t", "o", "2026-03-01"), "due_at has no time zone"),
        (SourceRow(1, "t", "o", "infinity"), "due_at is not an ISO 8601 time"),
        (SourceRow(1, "t", "o", 1700000000), "due_at is not a time"),
    ],
)
def test_a_bad_row_is_rejected_with_a_reason_naming_no_value(row: SourceRow, reason: str) -> None:
    assert check_row(row) == reason


@pytest.mark.parametrize(
    "value", ["plain-id_1.x~", "with:colon", "space here", "ünïcode", "a/b", "%41", "", "A-Z"]
)
def test_the_operation_keys_fast_path_encodes_exactly_as_quote(value: str) -> None:
    from urllib.parse import quote

    from sweeper.models import operation_key

    assert (
        operation_key("p", value, value, 1)
        == f"p:{quote(value, safe='')}:{quote(value, safe='')}:v1"
    )

"""Hints as they cross a wire: webhook bodies, intake messages, EventBridge events."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from sweeper.errors import HintRejectedError
from sweeper.intake.hints import (
    MAX_HINTS_PER_MESSAGE,
    SQS_MAX_MESSAGE_BYTES,
    hint_messages,
    parse_queue_body,
    parse_webhook_body,
)
from sweeper.intake.send import _batches
from sweeper.models import MAX_ID_LENGTH, NewJob

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)


def _rejected(body: bytes, max_hints: int = 10) -> HintRejectedError:
    with pytest.raises(HintRejectedError) as caught:
        parse_webhook_body(body, NOW, max_hints)
    return caught.value


def test_one_hint_without_a_due_time_is_due_on_receipt() -> None:
    jobs = parse_webhook_body(b'{"tenant_id":"t1","object_id":"o1"}', NOW, 10)
    assert jobs == [NewJob("t1", "o1", NOW)]


def test_a_list_of_hints_keeps_each_due_time_in_utc() -> None:
    body = json.dumps(
        [
            {"tenant_id": "t1", "object_id": "o1", "due_at": "2026-12-01T10:00:00+02:00"},
            {"tenant_id": "t2", "object_id": "o2"},
        ]
    ).encode()

    jobs = parse_webhook_body(body, NOW, 10)

    assert jobs == [
        NewJob("t1", "o1", datetime(2026, 12, 1, 8, 0, tzinfo=UTC)),
        NewJob("t2", "o2", NOW),
    ]


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (b"not json", "invalid_body"),
        (b"\xff\xfe", "invalid_body"),
        (b"[]", "invalid_body"),
        (b'"a string"', "invalid_hints"),
        (b'{"tenant_id":"t1"}', "invalid_hints"),
        (b'{"tenant_id":"t1","object_id":"o1","extra":1}', "invalid_hints"),
        (b'{"tenant_id":"t1","object_id":"o1","due_at":"2026-12-01T10:00:00"}', "invalid_hints"),
    ],
)
def test_bad_bodies_are_rejected_by_reason(body: bytes, reason: str) -> None:
    assert _rejected(body).reason == reason


def test_problems_name_positions_and_fields_never_values() -> None:
    secret_id = "customer-4711-private"
    body = json.dumps(
        [
            {"tenant_id": "t1", "object_id": "o1"},
            {"tenant_id": secret_id, "object_id": "", "due_at": "2026-12-01T10:00:00"},
        ]
    ).encode()

    error = _rejected(body)

    assert error.problems == ("[1].due_at: timezone_aware", "[1].object_id: string_too_short")
    assert secret_id not in str(error)
    assert secret_id not in repr(error.problems)


def test_more_hints_than_allowed_is_too_many() -> None:
    body = json.dumps([{"tenant_id": "t", "object_id": str(i)} for i in range(11)]).encode()
    assert _rejected(body, max_hints=10).reason == "too_many_hints"


def test_intake_messages_round_trip_through_the_queue_body() -> None:
    jobs = [NewJob("t1", "o1", NOW), NewJob("t:2", "o/2", NOW + timedelta(hours=1))]

    (body,) = hint_messages("exports", "file", "req-1", jobs)

    assert parse_queue_body(body, "exports") == ("file", jobs)


def test_a_message_for_another_policy_is_rejected() -> None:
    (body,) = hint_messages("exports", "file", "req-1", [NewJob("t1", "o1", NOW)])
    with pytest.raises(HintRejectedError) as caught:
        parse_queue_body(body, "uploads")
    assert caught.value.reason == "wrong_policy"


def _event(detail: object) -> str:
    return json.dumps(
        {
            "version": "0",
            "id": "6a7e8feb-b491-4cf7-a9f1-bf3703467718",
            "detail-type": "ExportExpired",
            "source": "com.example.exports",
            "account": "111122223333",
            "time": "2026-11-29T11:00:00Z",
            "region": "eu-central-1",
            "resources": [],
            "detail": detail,
        }
    )


def test_an_eventbridge_event_is_one_hint_due_at_the_event_time() -> None:
    source, jobs = parse_queue_body(_event({"tenant_id": "t1", "object_id": "o1"}), "exports")
    assert source == "event"
    assert jobs == [NewJob("t1", "o1", datetime(2026, 11, 29, 11, 0, tzinfo=UTC))]


def test_an_eventbridge_event_may_carry_a_list_of_hints() -> None:
    detail = {
        "hints": [{"tenant_id": "t1", "object_id": "o1"}, {"tenant_id": "t2", "object_id": "o2"}]
    }
    _, jobs = parse_queue_body(_event(detail), "exports")
    assert [j.object_id for j in jobs] == ["o1", "o2"]


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        ("{", "not_json"),
        ("[1]", "not_an_object"),
        ('{"hello": 1}', "unknown_kind"),
        ('{"kind": "sweeper.hints", "v": 2}', "invalid_message"),
        (_event({"tenant_id": "t1"}), "invalid_event"),
    ],
)
def test_unreadable_queue_bodies_are_rejected_by_reason(body: str, reason: str) -> None:
    with pytest.raises(HintRejectedError) as caught:
        parse_queue_body(body, "exports")
    assert caught.value.reason == reason


def test_messages_stay_within_sqs_limits_with_the_longest_widest_ids() -> None:
    # Four-byte characters and characters JSON escapes at the longest length (the six-byte
    # escapes, control characters, are refused in ids; a quote or backslash takes two).
    wide = "\U0001f600" * MAX_ID_LENGTH
    escaped = '"\\' * (MAX_ID_LENGTH // 2)
    jobs = [NewJob(wide, f"{escaped}{i}"[-MAX_ID_LENGTH:], NOW) for i in range(600)]

    bodies = hint_messages("exports", "file", "req-1", jobs)

    assert all(len(b.encode()) <= SQS_MAX_MESSAGE_BYTES for b in bodies)
    assert sum(len(parse_queue_body(b, "exports")[1]) for b in bodies) == 600
    for batch in _batches(bodies):
        assert len(batch) <= 10
        assert sum(len(m.body.encode()) for m in batch) <= SQS_MAX_MESSAGE_BYTES


def test_small_hints_are_cut_at_the_count_limit() -> None:
    jobs = [NewJob("t", str(i), NOW) for i in range(MAX_HINTS_PER_MESSAGE + 1)]
    bodies = hint_messages("exports", "file", "req-1", jobs)
    assert [len(json.loads(b)["hints"]) for b in bodies] == [MAX_HINTS_PER_MESSAGE, 1]


def test_a_nul_character_in_an_id_is_refused_with_the_input() -> None:
    error = _rejected(b'{"tenant_id":"t\\u0000","object_id":"o1"}')
    assert error.problems == ("tenant_id: id_control_character",)

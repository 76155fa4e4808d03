"""An EventBridge-shaped intake body is taken only when the policy's own patterns match it."""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime
from typing import Any, cast

import pytest

from sweeper.config import IntakeConfig, Policy
from sweeper.errors import HintRejectedError
from sweeper.intake.event_origin import EVENT_NOT_IN_POLICY, check_event_origin, pattern_matches
from sweeper.intake.process import IntakeDeps, process_intake_batch
from sweeper.ledger.store import Ledger
from sweeper.sqs_queue import Visibility

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
PATTERNS: list[dict[str, Any]] = [
    {"source": ["com.example.exports"], "detail-type": ["ExportExpired"]},
    {"source": ["com.example.retention"]},
]


def _event(source: str, detail_type: str) -> str:
    return json.dumps(
        {
            "version": "0",
            "id": "6a7e8feb-b491-4cf7-a9f1-bf3703467718",
            "detail-type": detail_type,
            "source": source,
            "account": "111122223333",
            "time": "2026-11-29T11:00:00Z",
            "region": "eu-central-1",
            "resources": [],
            "detail": {"tenant_id": "t1", "object_id": "o1"},
        }
    )


@pytest.mark.parametrize(
    ("source", "detail_type"),
    [
        ("com.example.exports", "ExportExpired"),
        ("com.example.retention", "anything at all"),
    ],
)
def test_an_event_one_of_the_policys_patterns_matches_is_taken(
    source: str, detail_type: str
) -> None:
    check_event_origin(_event(source, detail_type), PATTERNS)


@pytest.mark.parametrize(
    ("source", "detail_type"),
    [
        ("com.attacker", "ExportExpired"),  # a source no pattern names
        ("com.example.exports", "ExportCreated"),  # the right source, another detail-type
        ("com.example.exports.x", "ExportExpired"),  # exact values, not prefixes
    ],
)
def test_an_event_no_pattern_matches_is_refused(source: str, detail_type: str) -> None:
    with pytest.raises(HintRejectedError) as caught:
        check_event_origin(_event(source, detail_type), PATTERNS)
    assert caught.value.reason == EVENT_NOT_IN_POLICY


def test_a_policy_without_patterns_refuses_every_event() -> None:
    with pytest.raises(HintRejectedError):
        check_event_origin(_event("com.example.exports", "ExportExpired"), [])


@pytest.mark.parametrize(
    ("matcher", "value", "expected"),
    [
        ({"prefix": "com.example."}, "com.example.exports", True),
        ({"prefix": "com.example."}, "com.other", False),
        ({"suffix": ".exports"}, "com.example.exports", True),
        ({"suffix": ".exports"}, "com.example.imports", False),
        ({"equals-ignore-case": "COM.Example.Exports"}, "com.example.exports", True),
        ({"prefix": {"equals-ignore-case": "COM.EXAMPLE."}}, "com.example.exports", True),
        ({"wildcard": "com.*.exports"}, "com.example.exports", True),
        ({"wildcard": "com.*.exports"}, "com.example.imports", False),
        ({"anything-but": "com.attacker"}, "com.example.exports", True),
        ({"anything-but": ["com.attacker", "com.example.exports"]}, "com.example.exports", False),
        ({"anything-but": {"prefix": "com.att"}}, "com.attacker", False),
        ({"exists": True}, "com.example.exports", True),
        ({"exists": False}, "com.example.exports", False),
        ({"numeric": [">", 0]}, "com.example.exports", False),  # not for strings
        ({"no-such-matcher": "x"}, "com.example.exports", False),  # unknown: refused
    ],
)
def test_eventbridge_string_matchers_on_the_source(
    matcher: dict[str, Any], value: str, expected: bool
) -> None:
    event = json.loads(_event(value, "ExportExpired"))
    assert pattern_matches({"source": [matcher]}, event) is expected


class _Metrics:
    def __init__(self) -> None:
        self.values: dict[str, float] = {}

    def add_metric(self, name: str, unit: str, value: float) -> None:
        self.values[name] = self.values.get(name, 0) + value


def test_the_intake_batch_refuses_a_forged_event_by_message_id_and_counts_it(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # Given a policy whose rules deliver com.example.exports/ExportExpired events only
    policy = Policy(name="exports", intake=IntakeConfig(event_patterns=PATTERNS))
    metrics = _Metrics()
    # The ledger is never reached: a refused message writes nothing.
    deps = IntakeDeps(policy, cast(Ledger, None), lambda: NOW, metrics, cast(Visibility, None))
    forged = {"messageId": "m-forged", "body": _event("com.attacker", "ExportExpired")}
    # When a body shaped like an event of another source arrives
    with caplog.at_level(logging.ERROR):
        response, report = process_intake_batch({"Records": [forged]}, deps)
    # Then it is acknowledged unread, counted as rejected and logged by its message id
    assert response == {"batchItemFailures": []}
    assert (report.rejected, report.hints, report.inserted) == (1, 0, 0)
    assert metrics.values["IntakeRejected"] == 1
    (line,) = [r for r in caplog.records if r.getMessage() == "intake message rejected"]
    assert line.__dict__["message_id"] == "m-forged"
    assert line.__dict__["reason"] == EVENT_NOT_IN_POLICY

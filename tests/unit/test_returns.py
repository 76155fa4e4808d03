"""Work that met an unreachable ledger: shortened visibility, bounded, and nothing lost."""

from __future__ import annotations

import logging
import random
from collections.abc import Sequence
from typing import Any

import pytest
from botocore.exceptions import ClientError

from sweeper.observability import Metric
from sweeper.returns import (
    FULL_TIMEOUT_RECEIVES,
    LEDGER_RETURN_CAP_SECONDS,
    Unsettled,
    receive_count,
    return_soon,
)
from sweeper.sqs_queue import Hide, SqsVisibility
from sweeper_local.metric_totals import CountingSink


class Recording:
    """A Visibility that records each hide_each call; `refuse` ids are reported not changed."""

    def __init__(self, refuse: frozenset[str] = frozenset()) -> None:
        self.calls: list[list[Hide]] = []
        self.refuse = refuse

    def hide_for(self, receipt_handle: str, seconds: float) -> None:
        raise AssertionError("one batch call, not one call per message")

    def hide_each(self, hides: Sequence[Hide]) -> list[str]:
        self.calls.append(list(hides))
        return [h.message_id for h in hides if h.message_id in self.refuse]


def unsettled(n: int, receives: int = 1) -> list[Unsettled]:
    return [Unsettled(f"m-{i}", f"r-{i}", receives) for i in range(n)]


def test_records_that_met_an_unreachable_ledger_come_back_within_the_cap() -> None:
    visibility = Recording()
    sink = CountingSink()
    shortened = return_soon(
        unsettled(3, receives=2),
        visibility,
        max_receive_count=5,
        rng=random.Random(1),
        metrics=sink,
    )
    assert shortened == ["m-0", "m-1", "m-2"]
    (call,) = visibility.calls
    assert all(0 < hide.seconds <= LEDGER_RETURN_CAP_SECONDS for hide in call)
    assert sink.totals[Metric.LEDGER_UNREACHED] == 3


def test_later_receives_come_back_later_up_to_the_cap() -> None:
    def delay(receives: int) -> float:
        visibility = Recording()
        items = [Unsettled("m", "r", receives)]
        return_soon(items, visibility, max_receive_count=100, rng=_Top(), metrics=CountingSink())
        return visibility.calls[0][0].seconds

    assert [delay(r) for r in (1, 2, 3, 4, 5)] == [2.0, 4.0, 8.0, 10.0, 10.0]


class _Top(random.Random):
    def uniform(self, a: float, b: float) -> float:
        return b


def test_the_last_receives_before_the_dlq_keep_the_queues_own_timeout() -> None:
    visibility = Recording()
    limit = 5
    items = [Unsettled(f"m-{r}", f"r-{r}", r) for r in range(1, limit + 1)]
    shortened = return_soon(
        items, visibility, max_receive_count=limit, rng=random.Random(1), metrics=CountingSink()
    )
    kept = limit - FULL_TIMEOUT_RECEIVES
    assert shortened == [f"m-{r}" for r in range(1, kept + 1)]


def test_a_failed_visibility_change_is_logged_by_message_id_and_loses_nothing(
    caplog: pytest.LogCaptureFixture,
) -> None:
    visibility = Recording(refuse=frozenset({"m-1"}))
    with caplog.at_level(logging.WARNING, logger="sweeper.returns"):
        shortened = return_soon(
            unsettled(2),
            visibility,
            max_receive_count=5,
            rng=random.Random(1),
            metrics=CountingSink(),
        )
    assert shortened == ["m-0"]
    (missed,) = [r for r in caplog.records if "not shortened" in r.getMessage()]
    assert missed.message_ids == ["m-1"]  # type: ignore[attr-defined]


def test_the_receive_count_is_read_from_the_record_attributes() -> None:
    assert receive_count({"ApproximateReceiveCount": "3"}) == 3
    assert receive_count({}) == 1
    assert receive_count(None) == 1


class FakeSqs:
    """An SQS client's change_message_visibility_batch: records calls, fails as told."""

    def __init__(self, fail_call: int | None = None, fail_entry: str | None = None) -> None:
        self.calls: list[list[dict[str, Any]]] = []
        self.fail_call = fail_call
        self.fail_entry = fail_entry

    def change_message_visibility_batch(self, **kwargs: Any) -> dict[str, Any]:
        self.calls.append(kwargs["Entries"])
        if len(self.calls) - 1 == self.fail_call:
            raise ClientError({"Error": {"Code": "AccessDenied", "Message": "no"}}, "Change")
        failed = [{"Id": e["Id"]} for e in kwargs["Entries"] if e["Id"] == self.fail_entry]
        return {"Successful": [], "Failed": failed}


def hides(n: int) -> list[Hide]:
    return [Hide(f"m-{i}", f"r-{i}", 2.7) for i in range(n)]


def test_hide_each_sends_at_most_ten_entries_per_call_in_whole_seconds() -> None:
    sqs = FakeSqs()
    assert SqsVisibility(sqs, "url").hide_each(hides(23)) == []  # type: ignore[arg-type]
    assert [len(call) for call in sqs.calls] == [10, 10, 3]
    assert {e["VisibilityTimeout"] for call in sqs.calls for e in call} == {2}


def test_hide_each_reports_the_messages_of_a_failed_call_and_a_failed_entry() -> None:
    sqs = FakeSqs(fail_call=1, fail_entry="2")
    missed = SqsVisibility(sqs, "url").hide_each(hides(12))  # type: ignore[arg-type]
    assert missed == ["m-2", "m-10", "m-11"]

"""What a reading left aside is counted per answer and logged once a minute per diagnostic by an
environment (sweeper.vendor_limits.unread), so a misconfiguration at 100 calls a second costs a
log line a minute, not a hundred a second."""

from __future__ import annotations

import logging

import pytest

from sweeper.observability import Metric
from sweeper.vendor_limits import unread
from sweeper.vendor_limits.unread import SAID_EVERY_SECONDS, Said, report_unread
from sweeper.vendor_reading import VendorReading

EPOCH_RESET = "x-ratelimit-reset: the reset is not a wait within bounds; ignored"
BAD_COUNT = "x-ratelimit-remaining: not a whole number within bounds; ignored"
IDS = {"key": "key-0", "policy": "vendor"}


class _Metrics:
    def __init__(self) -> None:
        self.counts: dict[str, float] = {}

    def add_metric(self, name: str, unit: str, value: float) -> None:
        self.counts[name] = self.counts.get(name, 0.0) + value


@pytest.fixture(autouse=True)
def _fresh_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(unread, "SAID", Said())


def _said(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.getMessage() == "vendor values ignored"]


def test_the_same_diagnostic_in_every_answer_is_counted_each_time_and_logged_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # Given a thousand answers within ten seconds, each with the same unread reset
    metrics = _Metrics()
    reading = VendorReading(diagnostics=(EPOCH_RESET,))
    # When each is reported
    with caplog.at_level(logging.WARNING):
        for n in range(1000):
            report_unread(reading, IDS, metrics, now=100.0 + n / 100)
    # Then each is counted, and one line says it, with the call's ids and the code
    assert metrics.counts[Metric.VENDOR_VALUES_IGNORED] == 1000
    (line,) = _said(caplog)
    assert (line.__dict__["key"], line.__dict__["code"]) == ("key-0", "vendor_values_ignored")
    assert line.__dict__["ignored"] == [EPOCH_RESET]


def test_a_diagnostic_still_sent_is_logged_again_a_minute_after(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # Given a diagnostic logged at t = 100 s
    metrics = _Metrics()
    reading = VendorReading(diagnostics=(EPOCH_RESET,))
    with caplog.at_level(logging.WARNING):
        report_unread(reading, IDS, metrics, now=100.0)
        # When it comes again just within the minute, then at the minute
        report_unread(reading, IDS, metrics, now=100.0 + SAID_EVERY_SECONDS - 0.01)
        report_unread(reading, IDS, metrics, now=100.0 + SAID_EVERY_SECONDS)
    # Then it is logged the first time and at the minute only
    assert len(_said(caplog)) == 2
    assert metrics.counts[Metric.VENDOR_VALUES_IGNORED] == 3


def test_a_new_diagnostic_is_logged_at_once_beside_one_said_lately(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # Given an unread reset logged a second ago
    metrics = _Metrics()
    with caplog.at_level(logging.WARNING):
        report_unread(VendorReading(diagnostics=(EPOCH_RESET,)), IDS, metrics, now=100.0)
        # When an answer carries it and an unread count as well
        both = VendorReading(diagnostics=(BAD_COUNT, EPOCH_RESET))
        report_unread(both, IDS, metrics, now=101.0)
    # Then the new one is logged, without the one said a second ago
    assert [line.__dict__["ignored"] for line in _said(caplog)] == [[EPOCH_RESET], [BAD_COUNT]]


def test_an_answer_with_nothing_left_aside_is_neither_counted_nor_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    metrics = _Metrics()
    with caplog.at_level(logging.WARNING):
        report_unread(VendorReading(), IDS, metrics, now=100.0)
    assert metrics.counts == {}
    assert _said(caplog) == []

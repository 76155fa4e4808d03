"""A local invocation reports the CPU its environment used: the bench's consumer CPU per job."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sweeper_local.lambda_runtime import Invocation, invoke
from sweeper_local.poller import PollerStats
from tests.event_source_handlers import JOURNAL_ENV

HANDLER = "tests.event_source_handlers:handler"


def _event(todo: dict[str, float]) -> dict[str, object]:
    record = {"messageId": "m-1", "body": json.dumps(todo)}
    return {"Records": [{**record, "attributes": {"ApproximateReceiveCount": "1"}}]}


def test_cpu_time_is_counted_and_waiting_is_not(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(JOURNAL_ENV, str(tmp_path / "journal.jsonl"))
    spun = invoke(HANDLER, _event({"spin": 0.3}), function_name="f", timeout_seconds=10)
    slept = invoke(HANDLER, _event({"sleep": 0.3}), function_name="f", timeout_seconds=10)
    assert spun.error is None
    assert slept.error is None
    assert spun.cpu_seconds >= 0.3
    assert slept.duration_seconds >= 0.3
    assert slept.cpu_seconds < 0.1


def test_the_event_sources_stats_sum_the_invocations_cpu() -> None:
    stats = PollerStats()
    stats.add(Invocation({}, None, 1.0, cpu_seconds=0.25), delivered=10, failed=0)
    stats.add(Invocation({}, None, 2.0, cpu_seconds=0.5), delivered=10, failed=0)
    assert stats.cpu_seconds == pytest.approx(0.75)
    assert stats.busy_seconds == pytest.approx(3.0)


def test_an_invocation_reports_its_processs_peak_memory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Lambda's "Max Memory Used": the environment's peak resident memory, reported per call
    monkeypatch.setenv(JOURNAL_ENV, str(tmp_path / "journal.jsonl"))
    ballast = bytearray(64 * 1024 * 1024)  # 64 MiB resident in this process
    ballast[::4096] = b"x" * len(ballast[::4096])
    done = invoke(HANDLER, _event({"sleep": 0.0}), function_name="f", timeout_seconds=10)
    assert done.max_rss_mb >= 64


def test_the_event_sources_stats_keep_the_largest_peak_memory() -> None:
    stats = PollerStats()
    stats.add(Invocation({}, None, 1.0, max_rss_mb=120.0), delivered=10, failed=0)
    stats.add(Invocation({}, None, 1.0, max_rss_mb=90.0), delivered=10, failed=0)
    assert stats.max_rss_mb == 120.0

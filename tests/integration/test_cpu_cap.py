"""A local execution environment held to its memory's CPU share, on this machine's cgroups."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sweeper_local.cpu_cap import CpuCaps, vcpu_for
from sweeper_local.lambda_runtime import ExecutionEnvironment
from tests.event_source_handlers import JOURNAL_ENV

pytestmark = pytest.mark.integration

HANDLER = "tests.event_source_handlers:handler"
#: A fifth of a core.
MEMORY_MB = 354


def _spin(seconds: float) -> dict[str, object]:
    record = {"messageId": "m-1", "body": json.dumps({"spin": seconds})}
    return {"Records": [{**record, "attributes": {"ApproximateReceiveCount": "1"}}]}


def test_a_capped_environment_gets_its_memorys_share_of_a_core(tmp_path: Path) -> None:
    caps = CpuCaps()
    env = {JOURNAL_ENV: str(tmp_path / "journal.jsonl")}
    capped = ExecutionEnvironment(HANDLER, env, memory_mb=MEMORY_MB, cpu_caps=caps)
    try:
        invocation = capped.invoke(_spin(0.3), function_name="f", timeout_seconds=30)
        periods, seconds = capped.throttling()
        assert (capped.cpu_cap is not None) is caps.available
    finally:
        capped.discard()
    assert invocation.error is None
    assert invocation.cpu_seconds >= 0.3
    if caps.available:
        # 0.3 s of CPU at 0.2 of a core takes 1.5 s; paused for most of it, period by period
        assert vcpu_for(MEMORY_MB) == pytest.approx(0.2, abs=0.001)
        assert invocation.duration_seconds >= 1.0
        assert periods >= 10
        assert seconds >= 0.5
        assert capped.cpu_cap is None  # discarded with its process, and its cgroup removed
    else:  # no cgroup here: uncapped, and nothing says it was paused
        assert (periods, seconds) == (0, 0.0)

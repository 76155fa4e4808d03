"""Whether a local file still belongs to a running stack (`local up` and the demo ask)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from sweeper.endpoints import LocalFile
from sweeper_local.background import live_local_file
from sweeper_tools.endpoints import write_local_file


def write(path: Path, pid: int) -> None:
    write_local_file(
        LocalFile(
            pid=pid,
            database_url="postgresql://localhost/x",
            aws_endpoint_url="http://127.0.0.1:1",
            region="us-east-1",
            vendor_url=None,
            limiter_table="l",
            idempotency_table="i",
            log_file=None,
            config="sweeper.toml",
            policies={},
        ),
        path,
    )


def test_a_file_whose_stack_runs_is_live_and_one_whose_stack_ended_is_not(tmp_path: Path) -> None:
    path = tmp_path / "local.json"
    assert live_local_file(path) is None  # no file
    write(path, os.getpid())
    live = live_local_file(path)
    assert live is not None
    assert live.pid == os.getpid()
    ended = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        check=True,
        capture_output=True,
        text=True,
    )
    write(path, int(ended.stdout))
    assert live_local_file(path) is None

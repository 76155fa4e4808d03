"""Execution environments started from a process of their own, so that it starts the forkserver.

`python -m tests.integration.environments_process SCENARIO` runs one scenario of
tests/integration/test_lambda_runtime_start.py and prints its findings as one JSON line: a
forkserver starts once per process, with that process's environment then, which is what these
scenarios change afterwards.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

from sweeper_local.lambda_runtime import ExecutionEnvironment

HANDLER = "tests.environment_handlers:handler"


def _run(env: dict[str, str], event: dict[str, Any] | None = None) -> dict[str, Any]:
    environment = ExecutionEnvironment(HANDLER, env)
    expected = {**os.environ, **env}  # what spawn's child would have
    try:
        result = environment.invoke(event or {}, function_name="test", timeout_seconds=30)
    finally:
        environment.close()
    assert result.error is None, result.error
    found: dict[str, Any] = result.response
    return {
        **found,
        "expected_environ": expected,
        "start_method": environment.start_method,
        "stale_preload": environment.stale_preload,
    }


def environ() -> list[dict[str, Any]]:
    os.environ["SWEEPER_TEST_GONE"] = "set when the forkserver started"
    first = _run({"SWEEPER_TEST_FN": "one"})
    del os.environ["SWEEPER_TEST_GONE"]
    os.environ["SWEEPER_TEST_LATE"] = "set after the first environment started"
    return [first, _run({"SWEEPER_TEST_FN": "two"})]


def imports() -> list[dict[str, Any]]:
    return [_run({"SWEEPER_TEST_MARK": mark}) for mark in ("a", "b")]


def stale() -> list[dict[str, Any]]:
    _run({})  # the forkserver starts without it
    return [_run({"AWS_XRAY_CONTEXT_MISSING": "IGNORE_ERROR"})]


def layer() -> list[dict[str, Any]]:
    _run({})
    code = Path(tempfile.mkdtemp())
    (code / "jmespath").mkdir()  # a preloaded dependency of boto3's, the team's copy here
    (code / "jmespath" / "__init__.py").write_text("", encoding="utf-8")
    return [_run({"SWEEPER_LOCAL_LAYER_PATH": str(code)}, {"modules": ["jmespath"]})]


def stderr() -> list[dict[str, Any]]:
    _run({})
    with tempfile.NamedTemporaryFile("r", suffix=".err") as captured:
        saved = os.dup(2)
        os.dup2(os.open(captured.name, os.O_WRONLY), 2)  # as pytest captures a test's output
        try:
            found = _run({}, {"stderr": "written by the environment"})
        finally:
            os.dup2(saved, 2)
        found["captured"] = Path(captured.name).read_text(encoding="utf-8")
    return [found]


if __name__ == "__main__":
    print(json.dumps(globals()[sys.argv[1]]()), flush=True)

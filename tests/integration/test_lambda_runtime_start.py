"""How a local execution environment starts: forked from a preloaded forkserver, yet the cold
start Lambda (and spawn) gives: the starting process's environment as it is at the start plus
the function's, the handler imported in the environment itself, its own random state, its
layer ahead of what was preloaded, and the starting process's standard error.

Each scenario runs in a process of its own (tests/integration/environments_process.py), which
starts its own forkserver.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from sweeper_local.lambda_runtime import START_METHOD_VARIABLE

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]


def scenario(name: str, start_method: str | None = None) -> list[dict[str, Any]]:
    env = {k: v for k, v in os.environ.items() if k != START_METHOD_VARIABLE}
    if start_method is not None:
        env[START_METHOD_VARIABLE] = start_method
    done = subprocess.run(
        [sys.executable, "-m", "tests.integration.environments_process", name],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
        check=True,
    )
    found: list[dict[str, Any]] = json.loads(done.stdout.splitlines()[-1])
    return found


def test_environment_is_the_starting_process_environment_at_start_plus_the_function_one() -> None:
    # Given a variable set before the first environment (and the forkserver) started, then
    # removed, and another set after it
    first, second = scenario("environ")

    # Then each environment's os.environ is exactly the starting process's at its start plus
    # the function's: the late variable is seen, the removed one is gone
    assert [first["start_method"], second["start_method"]] == ["forkserver", "forkserver"]
    assert first["environ"] == first["expected_environ"]
    assert second["environ"] == second["expected_environ"]
    assert second["environ"]["SWEEPER_TEST_LATE"] == "set after the first environment started"
    assert "SWEEPER_TEST_GONE" not in second["environ"]
    assert second["environ"]["SWEEPER_TEST_FN"] == "two"


def test_handler_module_is_imported_in_each_environment_after_its_variables_are_set() -> None:
    # Given two environments of a handler whose module notes its process and a variable at import
    a, b = scenario("imports")

    # Then each imported it itself (not the forkserver), with its own variables already set
    assert [a["start_method"], b["start_method"]] == ["forkserver", "forkserver"]
    assert a["imported"] == {"pid": a["pid"], "mark": "a"}
    assert b["imported"] == {"pid": b["pid"], "mark": "b"}
    assert a["pid"] != b["pid"]


def test_random_state_made_by_a_preloaded_module_differs_per_environment() -> None:
    # Given the X-Ray SDK's sampling generator, made when the forkserver preloaded the SDK
    a, b = scenario("imports")

    # Then each environment draws its own numbers, as two fresh imports would
    assert a["sampling_draw"] != b["sampling_draw"]


def test_environment_whose_variables_the_preload_read_differently_starts_fresh() -> None:
    # Given a function variable the X-Ray SDK reads when it is imported, unset in the forkserver
    (found,) = scenario("stale")

    # Then that environment is a fresh interpreter, which imports the SDK with it set
    assert found["start_method"] == "spawn"
    assert "AWS_XRAY_CONTEXT_MISSING" in found["stale_preload"]
    assert found["environ"] == found["expected_environ"]


def test_layer_module_shadowing_a_preloaded_one_is_imported_from_the_layer() -> None:
    # Given a layer (SWEEPER_LOCAL_LAYER_PATH) that holds its own copy of a preloaded module
    (found,) = scenario("layer")

    # Then the environment starts fresh and imports the layer's copy, as Lambda would
    assert found["start_method"] == "spawn"
    layer = found["environ"]["SWEEPER_LOCAL_LAYER_PATH"]
    assert found["modules"]["jmespath"] == str(Path(layer) / "jmespath" / "__init__.py")


def test_environment_writes_to_the_standard_error_of_its_start() -> None:
    # Given the starting process's stderr redirected after the forkserver started
    (found,) = scenario("stderr")

    # Then what the environment writes there reaches the redirected stderr, as spawn's would
    assert found["start_method"] == "forkserver"
    assert "written by the environment" in found["captured"]


def test_start_method_variable_spawns_every_environment() -> None:
    # Given SWEEPER_LOCAL_START_METHOD=spawn
    first, second = scenario("environ", start_method="spawn")

    # Then every environment is a fresh interpreter, with the same environment as before
    assert [first["start_method"], second["start_method"]] == ["spawn", "spawn"]
    assert second["environ"] == second["expected_environ"]

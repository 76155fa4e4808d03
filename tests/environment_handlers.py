"""A Lambda handler that reports the process it runs in, for the execution environment's tests.

What it saw when its module was imported (the process, `SWEEPER_TEST_MARK`) shows where and
when the cold start imported it; each invocation returns that, the process's environment, a
draw from the X-Ray SDK's sampling generator (made when the SDK was imported), and writes
`stderr` from its event to its standard error.
"""

from __future__ import annotations

import os
import sys
from typing import Any

IMPORTED = {"pid": os.getpid(), "mark": os.environ.get("SWEEPER_TEST_MARK")}


def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    from aws_xray_sdk.core import xray_recorder  # type: ignore[import-untyped]

    if event.get("stderr"):
        print(event["stderr"], file=sys.stderr, flush=True)
    named = event.get("modules", [])
    modules = {name: getattr(sys.modules.get(name), "__file__", None) for name in named}
    return {
        "imported": IMPORTED,
        "pid": os.getpid(),
        "environ": dict(os.environ),
        "sampling_draw": xray_recorder.sampler._random.random(),
        "modules": modules,
    }

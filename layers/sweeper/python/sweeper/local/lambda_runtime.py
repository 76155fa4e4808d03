"""Running a handler from functions/ the way Lambda does: its own process, a real-shaped context.

Each worker process is one "execution environment": it imports the handler module once (cold
start) and keeps its module state (cached clients, the ledger connection) across invocations, as
Lambda does. What a function prints (Powertools logs and EMF metrics) goes to a log file, the
local CloudWatch Logs; metrics are read back from its EMF lines exactly as CloudWatch would.
"""

from __future__ import annotations

import importlib.util
import json
import multiprocessing
import os
import sys
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from types import ModuleType
from typing import Any

from sweeper.errors import LocalStackError


def functions_dir() -> Path:
    """The repository's functions/ folder (SWEEPER_FUNCTIONS_DIR overrides)."""
    explicit = os.environ.get("SWEEPER_FUNCTIONS_DIR")
    if explicit:
        return Path(explicit)
    # layers/sweeper/python/sweeper/local/lambda_runtime.py -> repository root
    here = Path(__file__).resolve()
    candidate = here.parents[5] / "functions"
    if not candidate.is_dir():
        raise LocalStackError(
            "cannot find the functions/ folder; run from a checkout (pip install -e .) "
            "or set SWEEPER_FUNCTIONS_DIR"
        )
    return candidate


@cache
def load_handler(function: str) -> Callable[[dict[str, Any], Any], Any]:
    """Import functions/<function>/app.py once per process and return its `handler`."""
    path = functions_dir() / function / "app.py"
    spec = importlib.util.spec_from_file_location(f"sweeper_fn_{function}", path)
    if spec is None or spec.loader is None:
        raise LocalStackError(f"no handler at functions/{function}/app.py")
    module: ModuleType = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    handler: Callable[[dict[str, Any], Any], Any] = module.handler
    return handler


@dataclass
class LocalLambdaContext:
    """The attributes and method of Lambda's context object that handlers and Powertools use."""

    function_name: str
    timeout_seconds: float
    memory_limit_in_mb: int = 512
    function_version: str = "$LATEST"
    region: str = "us-east-1"
    account: str = "123456789012"
    aws_request_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    _deadline: float = field(default=0.0, repr=False)

    def __post_init__(self) -> None:
        self._deadline = time.monotonic() + self.timeout_seconds

    @property
    def invoked_function_arn(self) -> str:
        return f"arn:aws:lambda:{self.region}:{self.account}:function:{self.function_name}"

    @property
    def log_group_name(self) -> str:
        return f"/aws/lambda/{self.function_name}"

    @property
    def log_stream_name(self) -> str:
        return f"local/{os.getpid()}"

    def get_remaining_time_in_millis(self) -> int:
        return max(0, int((self._deadline - time.monotonic()) * 1000))


@dataclass(frozen=True, slots=True)
class Invocation:
    """What one invocation returned (or raised)."""

    response: Any
    error: str | None
    duration_seconds: float


def parse_emf(output: str) -> dict[str, float]:
    """Sum the metric values of every EMF document in a captured stdout."""
    totals: dict[str, float] = {}
    for line in output.splitlines():
        if '"_aws"' not in line:
            continue
        try:
            doc = json.loads(line)
        except json.JSONDecodeError:
            continue
        for directive in doc.get("_aws", {}).get("CloudWatchMetrics", []):
            for metric in directive.get("Metrics", []):
                name = metric["Name"]
                values = doc.get(name, 0)
                total = sum(values) if isinstance(values, list) else values
                totals[name] = totals.get(name, 0.0) + float(total)
    return totals


def invoke(
    function: str, event: dict[str, Any], *, function_name: str, timeout_seconds: float
) -> Invocation:
    """Invoke a handler in this process (a worker: see `init_worker`)."""
    handler = load_handler(function)
    context = LocalLambdaContext(function_name=function_name, timeout_seconds=timeout_seconds)
    started = time.monotonic()
    response: Any = None
    error: str | None = None
    try:
        response = handler(event, context)
    except Exception as exc:  # a function error: Lambda reports it, the event source retries
        error = f"{type(exc).__name__}: {exc}"
    finally:
        sys.stdout.flush()
    return Invocation(response, error, time.monotonic() - started)


def warm(function: str, hold_seconds: float = 0.3) -> None:
    """Cold-start one worker: import the handler, and hold the worker so each gets one."""
    load_handler(function)
    time.sleep(hold_seconds)


def init_worker(env: dict[str, str], log_file: str | None) -> None:
    """Worker initializer: the function's environment, and stdout to the local log file."""
    os.environ.update(env)
    if log_file:
        sys.stdout = open(log_file, "a", encoding="utf-8", buffering=1)  # noqa: SIM115


def new_environment(
    env: dict[str, str], log_file: str | None, workers: int = 1
) -> ProcessPoolExecutor:
    """A pool of `workers` execution environments for one function."""
    return ProcessPoolExecutor(
        max_workers=workers,
        mp_context=multiprocessing.get_context("spawn"),
        initializer=init_worker,
        initargs=(env, log_file),
    )


def metrics_from_log(log_file: str) -> dict[str, float]:
    """Every metric the functions emitted, summed from the EMF lines of the log file."""
    with open(log_file, encoding="utf-8") as log:
        return parse_emf(log.read())

"""Running a handler from functions/ the way Lambda does: its own process, a real-shaped context.

Each worker process of the local poller is one "execution environment": it imports the handler
module once (cold start) and keeps its module state (cached clients, the ledger connection)
across invocations, as Lambda does. What the handler prints (Powertools logs and EMF metrics)
is captured; metrics are parsed from the EMF lines exactly as CloudWatch would.
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import json
import os
import sys
import time
import uuid
from collections.abc import Callable
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
    """What one invocation returned (or raised), and the metrics it emitted."""

    response: Any
    error: str | None
    metrics: dict[str, float]
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
    function: str, event: dict[str, Any], *, function_name: str, timeout_seconds: float,
    log_file: str | None = None,
) -> Invocation:
    """Invoke a handler in this process, capturing what it prints."""
    handler = load_handler(function)
    context = LocalLambdaContext(function_name=function_name, timeout_seconds=timeout_seconds)
    buffer = io.StringIO()
    started = time.monotonic()
    response: Any = None
    error: str | None = None
    with contextlib.redirect_stdout(buffer):
        try:
            response = handler(event, context)
        except Exception as exc:  # a function error: Lambda reports it, the poller retries
            error = f"{type(exc).__name__}: {exc}"
    output = buffer.getvalue()
    if log_file:
        with open(log_file, "a", encoding="utf-8") as out:
            out.write(output)
    return Invocation(response, error, parse_emf(output), time.monotonic() - started)


def init_worker(env: dict[str, str]) -> None:
    """ProcessPool initializer: the function's environment variables."""
    os.environ.update(env)

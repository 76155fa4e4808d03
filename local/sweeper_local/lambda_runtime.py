"""Running a handler from functions/ the way Lambda does: its own process, a real-shaped context.

Each worker process is one "execution environment": it imports the handler module once (cold
start) and keeps its module state (cached clients, the ledger connection) across invocations, as
Lambda does. What a function prints (Powertools logs and EMF metrics) goes to a log file, the
local CloudWatch Logs; metrics are read back from its EMF lines exactly as CloudWatch would.

The processes are forked from a forkserver that has imported the SDKs and the product's modules
once (`sweeper_local.preload`), not spawned as fresh interpreters that import them again each
cold start; the child is otherwise what spawn makes (the starting process's environment, plus
the function's, and its stdout and stderr), and the handler is imported in it.
`SWEEPER_LOCAL_START_METHOD=spawn` spawns them instead (docs/decisions.md, 2026-12-02).
"""

from __future__ import annotations

import atexit
import contextlib
import importlib
import importlib.util
import json
import multiprocessing
import os
import resource
import signal
import sys
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from functools import cache
from multiprocessing import reduction
from multiprocessing.connection import Connection
from multiprocessing.context import ForkServerContext, SpawnContext
from multiprocessing.process import BaseProcess
from pathlib import Path
from types import ModuleType
from typing import Any

from sweeper_local import preload
from sweeper_local.cpu_cap import CpuCap, CpuCaps, vcpu_for
from sweeper_local.errors import LocalStackError

#: How long a cold start may take locally (imports on a busy machine) before it is a failure.
INIT_TIMEOUT_SECONDS = 120.0
#: A directory the worker puts on its path: the local stand-in for a function's own layer.
LAYER_PATH_VARIABLE = "SWEEPER_LOCAL_LAYER_PATH"
#: How long a stopping environment may take to exit before it is killed.
CLOSE_TIMEOUT_SECONDS = 5.0
#: How environments are started: `forkserver` (the default) forks them from a server that has
#: preloaded the heavy modules; `spawn` starts each in a fresh interpreter.
START_METHOD_VARIABLE = "SWEEPER_LOCAL_START_METHOD"
START_METHODS = ("forkserver", "spawn")
#: What the forkserver imports when it starts (once per process that starts environments).
PRELOAD_MODULE = "sweeper_local.forkserver_preload"


def start_method() -> str:
    """The start method `START_METHOD_VARIABLE` chooses (read at every start)."""
    chosen = os.environ.get(START_METHOD_VARIABLE) or "forkserver"
    if chosen not in START_METHODS:
        raise LocalStackError(
            f"{START_METHOD_VARIABLE}={chosen!r}: use one of {', '.join(START_METHODS)}"
        )
    return chosen


def _context(method: str) -> SpawnContext | ForkServerContext:
    if method == "spawn":
        return multiprocessing.get_context("spawn")
    context = multiprocessing.get_context("forkserver")
    # Read when the server starts, once per process: nothing else here uses a forkserver.
    context.set_forkserver_preload([PRELOAD_MODULE])
    return context


@dataclass(frozen=True, slots=True)
class _StalePreload:
    """A forked child's answer when the preloaded modules depend on what differs in it."""

    reason: str


class _Stream:
    """This process's stdout or stderr, handed to the child: a spawned child inherits them, a
    forkserver's child would have the server's (the output of a test, or a detached stack's
    log, that started before)."""

    def __init__(self, fd: int) -> None:
        self.fd = fd

    def __reduce__(self) -> tuple[Any, ...]:
        # Pickled while the process starts: the start method passes the descriptor along.
        return (_received_fd, (reduction.DupFd(self.fd),))


def _received_fd(duplicate: Any) -> int:
    fd: int = duplicate.detach()
    return fd


def _streams() -> tuple[_Stream | None, _Stream | None]:
    def open_fd(fd: int) -> _Stream | None:
        try:
            os.fstat(fd)
        except OSError:  # closed here: the child has none either
            return None
        return _Stream(fd)

    return open_fd(1), open_fd(2)


def _adopt_streams(streams: tuple[Any, Any]) -> None:
    for target, fd in ((1, streams[0]), (2, streams[1])):
        if fd is None:
            os.close(target)
        elif fd != target:
            os.dup2(fd, target)
            os.close(fd)


def functions_dir() -> Path:
    """The repository's functions/ folder (SWEEPER_FUNCTIONS_DIR overrides)."""
    explicit = os.environ.get("SWEEPER_FUNCTIONS_DIR")
    if explicit:
        return Path(explicit)
    # local/sweeper_local/lambda_runtime.py -> repository root
    here = Path(__file__).resolve()
    candidate = here.parents[2] / "functions"
    if not candidate.is_dir():
        raise LocalStackError(
            "cannot find the functions/ folder; run from a checkout (pip install -e .) "
            "or set SWEEPER_FUNCTIONS_DIR"
        )
    return candidate


@cache
def load_handler(function: str) -> Callable[[dict[str, Any], Any], Any]:
    """Import functions/<function>/app.py once per process and return its `handler`.

    `module:attribute` names any importable handler instead (as Lambda's handler setting does).
    """
    if ":" in function:
        module_name, attribute = function.split(":", 1)
        found: Callable[[dict[str, Any], Any], Any] = getattr(
            importlib.import_module(module_name), attribute
        )
        return found
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


class InvocationStatus(StrEnum):
    """How an invocation ended, as the event source sees it."""

    SUCCEEDED = "succeeded"
    FUNCTION_ERROR = "function_error"  # the handler raised, or its response is not JSON
    TIMED_OUT = "timed_out"  # killed at the function's timeout; the environment is gone
    ENVIRONMENT_DIED = "environment_died"  # the process died (SIGKILL, OOM, a crash in C)


@dataclass(frozen=True, slots=True)
class Invocation:
    """What one invocation returned (or raised)."""

    response: Any
    error: str | None
    duration_seconds: float
    status: InvocationStatus = InvocationStatus.SUCCEEDED
    #: CPU time the environment's process used during the invocation (all its threads): what
    #: bounds one environment on Lambda, whose CPU share follows its memory. 0 when unknown (an
    #: environment that died or was killed).
    cpu_seconds: float = 0.0
    #: The environment's process's peak resident memory so far, MiB (Lambda reports its "Max
    #: Memory Used" the same way, per environment). 0 when unknown.
    max_rss_mb: float = 0.0


def peak_rss_mb() -> float:
    """This process's peak resident set size in MiB (Linux reports `ru_maxrss` in KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


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
    """Invoke a handler in this process (an execution environment's worker)."""
    handler = load_handler(function)
    context = LocalLambdaContext(function_name=function_name, timeout_seconds=timeout_seconds)
    started = time.monotonic()
    cpu_started = time.process_time()
    response: Any = None
    error: str | None = None
    try:
        # Lambda serialises the response to JSON; what does not serialise is a function error.
        response = json.loads(json.dumps(handler(event, context)))
    except (TypeError, ValueError) as exc:
        error = f"Runtime.MarshalError: {type(exc).__name__}"
    except Exception as exc:  # a function error: Lambda reports it, the event source retries
        error = f"{type(exc).__name__}: {exc}"
    finally:
        sys.stdout.flush()
    status = InvocationStatus.SUCCEEDED if error is None else InvocationStatus.FUNCTION_ERROR
    cpu = time.process_time() - cpu_started
    return Invocation(
        response, error, time.monotonic() - started, status, cpu, max_rss_mb=peak_rss_mb()
    )


def init_worker(
    env: dict[str, str], log_file: str | None, *, environ: dict[str, str] | None = None
) -> None:
    """The function's environment, and stdout to the local log file; a layer of the team's own
    code (`LAYER_PATH_VARIABLE`) goes on the path, as Lambda puts a layer's `python/` there.

    With `environ` (the starting process's environment when it started this one), os.environ
    becomes exactly `environ` plus `env`, as a spawned child's is.
    """
    if environ is not None:
        os.environ.clear()
        os.environ.update(environ)
    os.environ.update(env)
    layer = env.get(LAYER_PATH_VARIABLE)
    if layer and layer not in sys.path:
        sys.path.insert(0, layer)
    if log_file:
        sys.stdout = open(log_file, "a", encoding="utf-8", buffering=1)  # noqa: SIM115


def _serve(
    conn: Connection,
    function: str,
    environ: dict[str, str],
    env: dict[str, str],
    log_file: str | None,
    streams: tuple[Any, Any],
    method: str,
) -> None:
    """An execution environment's process: cold start, then one invocation at a time."""
    _adopt_streams(streams)
    init_worker(env, log_file, environ=environ)
    try:
        stale = preload.stale(os.environ)
        if stale is not None:  # the starting process starts a fresh interpreter instead
            conn.send(_StalePreload(stale))
            return
        try:
            load_handler(function)
        except Exception as exc:  # Lambda's Runtime.ImportModuleError: reported, not raised
            conn.send(f"{type(exc).__name__}: {exc}")
            return
        conn.send(None)
        while True:
            try:
                request = conn.recv()
            except EOFError:  # the event source went away
                return
            if request is None:
                return
            event, function_name, timeout_seconds = request
            conn.send(
                invoke(
                    function, event, function_name=function_name, timeout_seconds=timeout_seconds
                )
            )
    finally:
        if method != "spawn":
            # A spawned interpreter runs its exit handlers when it ends; a forked child ends
            # with os._exit, so it runs them here.
            atexit._run_exitfuncs()


class ExecutionEnvironment:
    """One Lambda execution environment for a function: a process of its own.

    It imports the handler once (cold start) and keeps its module state across invocations, as
    Lambda does. An invocation that runs past the function's timeout is killed with its process,
    and a process that dies (SIGKILL, OOM) is gone: either way the next invocation starts a new
    environment, with a cold start. One invocation at a time, like a Lambda environment.
    """

    def __init__(
        self,
        function: str,
        env: dict[str, str],
        log_file: str | None = None,
        *,
        init_timeout_seconds: float = INIT_TIMEOUT_SECONDS,
        memory_mb: int | None = None,
        cpu_caps: CpuCaps | None = None,
    ) -> None:
        self.function = function
        self._env = env
        self._log_file = log_file
        self._init_timeout_seconds = init_timeout_seconds
        # With both, every cold-started process is held to its memory's CPU share once its
        # handler is loaded (the init phase runs uncapped: it is not what the caps measure).
        self._memory_mb = memory_mb
        self._cpu_caps = cpu_caps
        self.cpu_cap: CpuCap | None = None
        self._throttled_before: tuple[int, float] = (0, 0.0)  # of the caps of earlier processes
        self._process: BaseProcess | None = None
        self._conn: Connection | None = None
        self._ready = False
        self._lock = threading.Lock()
        self.cold_starts = 0
        #: How the current (or last) process was started: `forkserver` or `spawn`.
        self.start_method: str | None = None
        #: Why the last forked start had to be a fresh interpreter instead (None: it did not).
        self.stale_preload: str | None = None

    @property
    def pid(self) -> int | None:
        return None if self._process is None else self._process.pid

    def start(self) -> None:
        """Start the process (a cold start) unless one runs; `initialise` waits for it."""
        if self._process is not None:
            return
        self._start(start_method())
        self.cold_starts += 1

    def _start(self, method: str) -> None:
        context = _context(method)
        parent, child = context.Pipe()
        process = context.Process(
            target=_serve,
            # A spawned child starts with this process's environment as it is now; a
            # forkserver's would have the server's, so the child is given this one to take.
            args=(
                child,
                self.function,
                dict(os.environ),
                self._env,
                self._log_file,
                _streams(),
                method,
            ),
            name=f"lambda-{self.function}",
            daemon=True,
        )
        process.start()
        child.close()  # only the child holds it now: its death reads as EOF here
        self._process, self._conn, self._ready = process, parent, False
        self.start_method = method

    def initialise(self) -> None:
        """Wait for the cold start; LocalStackError when the handler cannot be loaded."""
        self.start()
        if self._ready:
            return
        deadline = time.monotonic() + self._init_timeout_seconds
        failure = self._await_init(deadline)
        if isinstance(failure, _StalePreload):
            # The same cold start in a fresh interpreter: the preloaded modules depend on what
            # differs in this environment.
            self.stale_preload = failure.reason
            self.discard()
            self._start("spawn")
            failure = self._await_init(deadline)
        if failure is not None:
            self.discard()
            raise LocalStackError(f"the {self.function} function failed to initialise: {failure}")
        self._ready = True
        self._cap_cpu()

    def _await_init(self, deadline: float) -> str | _StalePreload | None:
        """The cold start's answer: None when the handler is loaded."""
        assert self._conn is not None
        failure: str | _StalePreload | None = "did not start in time"
        try:
            if self._conn.poll(max(0.0, deadline - time.monotonic())):
                failure = self._conn.recv()
        except (EOFError, OSError):
            failure = f"died while starting ({self._exit_description()})"
        return failure

    def throttling(self) -> tuple[int, float]:
        """Periods in which this environment's CPU cap paused it, and for how long (seconds),
        over every process it has had."""
        periods, seconds = self._throttled_before
        if self.cpu_cap is not None:
            now_periods, now_seconds = self.cpu_cap.throttled()
            periods, seconds = periods + now_periods, seconds + now_seconds
        return periods, seconds

    def _cap_cpu(self) -> None:
        pid = self.pid
        if self._cpu_caps is None or self._memory_mb is None or pid is None:
            return
        cap = self._cpu_caps.cap(vcpu_for(self._memory_mb))
        if cap is None:
            return
        try:
            cap.add(pid)
        except OSError:
            cap.remove()
            return
        self.cpu_cap = cap

    def invoke(
        self, event: dict[str, Any], *, function_name: str, timeout_seconds: float
    ) -> Invocation:
        """Run one invocation, killing the environment at `timeout_seconds`."""
        with self._lock:
            started = time.monotonic()
            try:
                self.initialise()
            except LocalStackError as exc:
                return Invocation(
                    None, f"Runtime.InitError: {exc}", 0.0, InvocationStatus.FUNCTION_ERROR
                )
            assert self._conn is not None
            try:
                self._conn.send((event, function_name, timeout_seconds))
                if self._conn.poll(timeout_seconds):
                    result: Invocation = self._conn.recv()
                    return result
            except (EOFError, OSError):
                pass  # the process died: below
            elapsed = time.monotonic() - started
            if self._alive():
                self.discard()  # Lambda stops the environment at the timeout
                return Invocation(
                    None,
                    f"Task timed out after {timeout_seconds:.2f} seconds",
                    elapsed,
                    InvocationStatus.TIMED_OUT,
                )
            reason = self._exit_description()
            self.discard()
            return Invocation(
                None,
                f"Runtime.ExitError: the execution environment died ({reason})",
                elapsed,
                InvocationStatus.ENVIRONMENT_DIED,
            )

    def _alive(self) -> bool:
        if self._process is None:
            return False
        self._process.join(timeout=0.05)  # a process that just died needs a moment to be reaped
        return self._process.is_alive()

    def _exit_description(self) -> str:
        if self._process is None:
            return "no process"
        self._process.join(timeout=1)
        code = self._process.exitcode
        if code is None:
            return "still running"
        if code < 0:
            return f"signal {signal.Signals(-code).name}"
        return f"exit code {code}"

    def discard(self) -> None:
        """Kill the process now (the environment is lost); the next invocation starts anew."""
        if self._process is not None:
            if self._process.is_alive():
                self._process.kill()
            self._process.join(timeout=5)
        if self._conn is not None:
            self._conn.close()
        if self.cpu_cap is not None:
            self._throttled_before = self.throttling()
            self.cpu_cap.remove()
            self.cpu_cap = None
        self._process, self._conn, self._ready = None, None, False

    def close(self) -> None:
        """Let the process end on its own (the event source is stopping), else kill it."""
        if self._conn is not None and self._process is not None and self._process.is_alive():
            with contextlib.suppress(OSError):
                self._conn.send(None)
            self._process.join(timeout=CLOSE_TIMEOUT_SECONDS)
        self.discard()


def metrics_from_log(log_file: str) -> dict[str, float]:
    """Every metric the functions emitted, summed from the EMF lines of the log file."""
    with open(log_file, encoding="utf-8") as log:
        return parse_emf(log.read())

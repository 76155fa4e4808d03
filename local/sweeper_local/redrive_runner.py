"""The redrive function on the local stack, run by its schedule as EventBridge Scheduler runs it.

On AWS the schedule invokes the policy's redrive every 15 minutes, or every minute with
`[policies.redrive] automatic = "throttled"` (infra/redrive.py). `LocalRedrive` does the same in
an execution environment of its own (a worker process, started at the first run): each run gets
the scheduler's event for its time, one at a time (the function's reserved concurrency is 1; a
run still going at the next time delays it, as Lambda's throttle would). `every_seconds` gives
the local cadence another period (a benchmark's); the runs keep their reports.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import threading
import time
from datetime import UTC, datetime
from typing import Any, Self

from sweeper.config import Policy
from sweeper_local.lambda_runtime import ExecutionEnvironment, Invocation
from sweeper_local.pipeline import scheduler_event
from sweeper_local.service import Service

#: The redrive function's timeout, as the CDK app sets it (infra/redrive.py).
REDRIVE_TIMEOUT_SECONDS = 300.0

log = logging.getLogger(__name__)


class LocalRedrive(Service):
    """The policy's redrive, invoked every `every_seconds` (its schedule's period by default)."""

    def __init__(
        self,
        policy: Policy,
        env: dict[str, str],
        log_file: str | None = None,
        *,
        every_seconds: float | None = None,
        first_run_seconds: float | None = None,
        function_name: str | None = None,
    ) -> None:
        """`first_run_seconds`: when the first run comes after the start (one period by
        default); the runs then follow every `every_seconds` from it."""
        self.policy = policy
        self.every_seconds = every_seconds or float(policy.redrive.period_seconds)
        self.first_run_seconds = (
            self.every_seconds if first_run_seconds is None else first_run_seconds
        )
        self.function_name = function_name or f"sweeper-{policy.name}-redrive"
        self._environment = ExecutionEnvironment("redrive", env, log_file)
        self._stop = threading.Event()
        self._running = threading.Event()  # a run is being invoked
        self._thread: threading.Thread | None = None
        #: Each run: (epoch seconds it started, what it returned or None, its error or None).
        self.runs: list[tuple[float, dict[str, Any] | None, str | None]] = []

    def start(self) -> Self:
        self._thread = threading.Thread(target=self._tick, name="local-redrive", daemon=True)
        self._thread.start()
        return self

    def _tick(self) -> None:
        first = time.monotonic() + self.first_run_seconds
        runs = 0
        while not self._stop.is_set():
            at = first + runs * self.every_seconds
            runs += 1
            if self._stop.wait(max(0.0, at - time.monotonic())):
                return
            self.fire()

    def fire(self) -> Invocation:
        """One scheduled run now; its report kept in `runs`."""
        started = time.time()
        self._running.set()
        try:
            result = self._environment.invoke(
                scheduler_event(self.policy.name, datetime.now(UTC).replace(microsecond=0)),
                function_name=self.function_name,
                timeout_seconds=REDRIVE_TIMEOUT_SECONDS,
            )
        finally:
            self._running.clear()
        error = result.error
        if error is not None and self._stop.is_set():
            error = "stopped with the stack"  # a run keeping watch ends with its environment
        elif error is not None:
            log.warning("redrive %s failed: %s", self.function_name, error)
        self.runs.append((started, result.response, error))
        return result

    def stop(self) -> None:
        self._stop.set()
        pid = self._environment.pid
        if self._running.is_set() and pid is not None:
            # A run keeping watch ends with its environment, killed as Lambda's timeout would;
            # the runner's own thread then finds it gone and cleans up.
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        if self._thread is not None:
            self._thread.join(timeout=REDRIVE_TIMEOUT_SECONDS)
        self._environment.close()

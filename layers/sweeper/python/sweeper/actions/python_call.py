"""The `python` action kind: a callable from the team's own package, run in the consumer.

The kind's module (see sweeper.actions.base): its config (`PythonActionConfig`), its
implementation (`PythonCallAction`), its outcome mapping (`sweeper.actions.contract`: the
callable's `Answer`, `NotSent` transient, any other exception unknown), its grants and network
path (none beyond the consumer's own: what the callable reaches, the team grants it), and its
code: `package_path` (relative to the policy file) is shipped by the CDK app as a layer of its
own, so `module` imports in the consumer as it does locally. `make synth` and `sweeper doctor`
import the callable in a child process first: one that cannot be imported fails synth with one
line naming it.
"""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final, Literal

from pydantic import Field

from sweeper.actions.base import (
    Action,
    ActionContext,
    ActionKind,
    Grant,
    NetworkPath,
    Preflight,
)
from sweeper.actions.contract import Call, result_of_answer, result_of_exception
from sweeper.models import ActionCall, ActionResult, OutcomeClass

#: How long the child process that imports the callable at synth may take.
IMPORT_CHECK_TIMEOUT_SECONDS: Final = 60

# Run in a child process: imports `module`, checks `function` is callable; exit 3 when it is
# not, 4 with the exception's type name when the import fails.
_IMPORT_CHECK: Final = """
import importlib, sys
try:
    target = getattr(importlib.import_module(sys.argv[1]), sys.argv[2], None)
except BaseException as exc:
    print(type(exc).__name__)
    sys.exit(4)
sys.exit(0 if callable(target) else 3)
"""


class PythonActionConfig(ActionKind):
    """Call `callable` (`module:function`) from the team's package at `package_path`."""

    kind: Literal["python"] = "python"
    callable: str = Field(
        pattern=r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*:[A-Za-z_][A-Za-z0-9_]*$"
    )
    #: The directory that holds the team's package (what would be on sys.path), relative to
    #: the policy file: shipped as the consumer's own layer.
    package_path: str = Field(min_length=1, max_length=1024)
    #: The longest one call may take (the callable receives what is left of it).
    timeout_seconds: float = Field(default=30.0, gt=0, le=600)

    @property
    def module(self) -> str:
        return self.callable.partition(":")[0]

    @property
    def function(self) -> str:
        return self.callable.partition(":")[2]

    def build(self, context: ActionContext) -> Action:
        return PythonCallAction(self)

    def grants(self) -> tuple[Grant, ...]:
        """Nothing beyond the consumer's own role."""
        return ()

    def network_path(self) -> NetworkPath:
        """Nothing beyond the consumer's own (DynamoDB, SQS)."""
        return NetworkPath()

    @property
    def call_seconds(self) -> float:
        return self.timeout_seconds

    @property
    def target(self) -> str:
        return f"callable {self.callable}"

    def rehearsal_problem(self) -> str | None:
        return (
            f"its python callable {self.callable} makes calls of its own, which the local "
            "stack cannot send to --api-url"
        )

    def layer_dir(self, policy_dir: Path) -> Path:
        return (policy_dir / self.package_path).resolve()

    def synth_errors(self, policy_dir: Path) -> list[str]:
        problem = self.import_problem(policy_dir)
        return [] if problem is None else [problem]

    def preflight(self, client: Callable[[str], Any], policy_dir: Path) -> list[Preflight]:
        problem = self.import_problem(policy_dir)
        name = f"callable {self.callable}"
        if problem is None:
            return [Preflight(name, True, f"importable from {self.package_path}")]
        return [Preflight(name, False, problem, "correct action.callable or package_path")]

    def import_problem(self, policy_dir: Path) -> str | None:
        """Why the callable cannot be imported from `package_path`, in one line; None when it
        can. Imported in a child process, so the team's module never runs in the caller's."""
        folder = self.layer_dir(policy_dir)
        where = f"action.callable {self.callable} (package_path {self.package_path})"
        if not folder.is_dir():
            return f"{where}: package_path is not a directory next to the policy file"
        path = os.pathsep.join([str(folder), *(p for p in sys.path if p)])
        try:
            done = subprocess.run(  # noqa: S603 - our interpreter, fixed code, no shell
                [sys.executable, "-c", _IMPORT_CHECK, self.module, self.function],
                capture_output=True,
                text=True,
                timeout=IMPORT_CHECK_TIMEOUT_SECONDS,
                env={**os.environ, "PYTHONPATH": path},
                check=False,
            )
        except subprocess.TimeoutExpired:
            return f"{where}: importing it took longer than {IMPORT_CHECK_TIMEOUT_SECONDS} s"
        if done.returncode == 0:
            return None
        if done.returncode == 3:
            return f"{where}: {self.function} is not a callable of {self.module}"
        error = (done.stdout.strip().splitlines() or ["an error"])[-1][:80]
        return f"{where} cannot be imported ({error})"


class PythonCallAction:
    """Carry out a job by calling the team's callable once; see `sweeper.actions.Action`."""

    def __init__(
        self, config: PythonActionConfig, function: Callable[[Call], Any] | None = None
    ) -> None:
        """`function` is the callable itself (tests); by default it is imported on first use."""
        self._config = config
        self._function = function
        self._lock = threading.Lock()

    def _callable(self) -> Callable[[Call], Any]:
        with self._lock:
            if self._function is None:
                module = importlib.import_module(self._config.module)
                found = getattr(module, self._config.function)
                if not callable(found):
                    raise TypeError(self._config.callable)
                self._function = found
            return self._function

    def warm(self, job: ActionCall, timeout_seconds: float | None = None) -> None:
        """Nothing prepared: the callable is the team's own, and importing it may have effects."""

    def perform(self, job: ActionCall, timeout_seconds: float | None = None) -> ActionResult:
        """Call once and classify the answer or the exception; never raises for either."""
        left = self._config.timeout_seconds if timeout_seconds is None else timeout_seconds
        if left <= 0:
            return ActionResult(outcome=OutcomeClass.TRANSIENT, code="no_time_left")
        try:
            function = self._callable()
        except Exception:
            # Nothing was called: a configuration problem for every job, so the scope closes.
            return ActionResult(outcome=OutcomeClass.AUTH, code="callable_unavailable")
        try:
            answer = function(Call.for_job(job, left))
        except Exception as exc:
            return result_of_exception(exc)
        return result_of_answer(answer)

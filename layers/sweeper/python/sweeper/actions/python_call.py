"""The `python` action kind: a callable from the team's own package, run in the consumer.

The kind's module (see sweeper.actions.base): its config (`PythonActionConfig`), its
implementation (`PythonCallAction`), its outcome mapping (`sweeper.actions.contract`: the
callable's `Answer`, `NotSent` transient, any other exception unknown), and its code:
`package_path` (relative to the policy file) is shipped by the CDK app as a layer of its own, so
`module` imports in the consumer as it does locally. Its deploy-time provider
(`sweeper_tools.deploy.python_call`) ships that layer and imports the callable at synth and in
`sweeper doctor` first.
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Callable
from typing import Any, Literal

from pydantic import Field

from sweeper.actions.base import (
    Action,
    ActionContext,
    ActionKind,
)
from sweeper.actions.contract import Call, result_of_answer, result_of_exception
from sweeper.models import ActionCall, ActionResult, OutcomeClass


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

    @property
    def call_seconds(self) -> float:
        return self.timeout_seconds


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

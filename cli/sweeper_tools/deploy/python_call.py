"""The `python` kind's deploy-time half (see sweeper_tools.deploy.base): no grants and no network
path beyond the consumer's own (what the callable reaches, the team grants it); its code,
`package_path` (relative to the policy file), shipped by the CDK app as a layer of its own;
`make synth` and `sweeper doctor` import the callable in a child process first, and one that
cannot be imported fails synth with one line naming it."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

from sweeper.actions.python_call import PythonActionConfig
from sweeper_tools.deploy.base import DeployKind, Grant, NetworkPath, Preflight

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


class PythonDeploy(DeployKind[PythonActionConfig]):
    """The `python` kind to the CDK app, `doctor` and the local stack."""

    @property
    def target(self) -> str:
        return f"callable {self.config.callable}"

    def grants(self) -> tuple[Grant, ...]:
        """Nothing beyond the consumer's own role."""
        return ()

    def network_path(self) -> NetworkPath:
        """Nothing beyond the consumer's own (DynamoDB, SQS)."""
        return NetworkPath()

    def rehearsal_problem(self) -> str | None:
        return (
            f"its python callable {self.config.callable} makes calls of its own, which the "
            "local stack cannot send to --api-url"
        )

    def layer_dir(self, policy_dir: Path) -> Path:
        return (policy_dir / self.config.package_path).resolve()

    def synth_errors(self, policy_dir: Path) -> list[str]:
        problem = self.import_problem(policy_dir)
        return [] if problem is None else [problem]

    def preflight(self, client: Callable[[str], Any], policy_dir: Path) -> list[Preflight]:
        problem = self.import_problem(policy_dir)
        name = f"callable {self.config.callable}"
        if problem is None:
            return [Preflight(name, True, f"importable from {self.config.package_path}")]
        return [Preflight(name, False, problem, "correct action.callable or package_path")]

    def import_problem(self, policy_dir: Path) -> str | None:
        """Why the callable cannot be imported from `package_path`, in one line; None when it
        can. Imported in a child process, so the team's module never runs in the caller's."""
        config = self.config
        folder = self.layer_dir(policy_dir)
        where = f"action.callable {config.callable} (package_path {config.package_path})"
        if not folder.is_dir():
            return f"{where}: package_path is not a directory next to the policy file"
        path = os.pathsep.join([str(folder), *(p for p in sys.path if p)])
        try:
            done = subprocess.run(  # noqa: S603 - our interpreter, fixed code, no shell
                [sys.executable, "-c", _IMPORT_CHECK, config.module, config.function],
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
            return f"{where}: {config.function} is not a callable of {config.module}"
        error = (done.stdout.strip().splitlines() or ["an error"])[-1][:80]
        return f"{where} cannot be imported ({error})"

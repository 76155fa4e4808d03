"""Packaging: the two layers and the function code, all plain folder assets (no Docker).

- deps layer: third-party wheels for python3.13/arm64, built by `layers/build.py` into
  `build/layers/deps/python/` (see that script for how and why).
- shared layer: the `sweeper` package itself, from `layers/sweeper/python/sweeper`.
- each function: its folder under `functions/`, handler `app.handler`.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from aws_cdk import aws_lambda as lambda_
from constructs import Construct

from sweeper.errors import ConfigError

REPO_ROOT = Path(__file__).resolve().parents[1]
FUNCTIONS_DIR = REPO_ROOT / "functions"
SHARED_LAYER_DIR = REPO_ROOT / "layers" / "sweeper"
#: Where the team's own action code is staged as a layer (`python/` is on a function's path).
ACTION_LAYERS_DIR = REPO_ROOT / "build" / "action-layers"
MIGRATIONS_DIR = SHARED_LAYER_DIR / "python" / "sweeper" / "ledger" / "migrations"

LAMBDA_RUNTIME = lambda_.Runtime.PYTHON_3_13
LAMBDA_ARCHITECTURE = lambda_.Architecture.ARM_64
HANDLER = "app.handler"
HANDLER_FILE = "app.py"
#: Development leftovers that must not reach Lambda. The deps layer keeps its __pycache__: that
#: bytecode is built on purpose (hash-checked, for the target Python) to shorten cold starts.
SOURCE_EXCLUDES = ["**/__pycache__", "**/*.pyc", "**/.mypy_cache", "**/*.egg-info"]
DEPS_EXCLUDES = [".build-stamp.json"]


class Packaging(Construct):
    """The layers every function carries, and the code asset of each function."""

    def __init__(self, scope: Construct, construct_id: str, *, deps_layer_dir: Path) -> None:
        super().__init__(scope, construct_id)
        if not (deps_layer_dir / "python").is_dir():
            raise ConfigError(
                f"the deps layer is not built ({deps_layer_dir.name}/python is missing): "
                "run `make layers` (python layers/build.py) first"
            )
        self.deps_layer = lambda_.LayerVersion(
            self,
            "DepsLayer",
            code=lambda_.Code.from_asset(str(deps_layer_dir), exclude=DEPS_EXCLUDES),
            compatible_runtimes=[LAMBDA_RUNTIME],
            compatible_architectures=[LAMBDA_ARCHITECTURE],
            description="sweeper third-party dependencies (python3.13, arm64)",
        )
        self.shared_layer = lambda_.LayerVersion(
            self,
            "SharedLayer",
            code=lambda_.Code.from_asset(str(SHARED_LAYER_DIR), exclude=SOURCE_EXCLUDES),
            compatible_runtimes=[LAMBDA_RUNTIME],
            compatible_architectures=[LAMBDA_ARCHITECTURE],
            description="the sweeper package shared by every function",
        )

    @property
    def layers(self) -> list[lambda_.ILayerVersion]:
        return [self.deps_layer, self.shared_layer]

    @staticmethod
    def function_code(name: str) -> lambda_.Code:
        """The asset of `functions/<name>/`; synth fails if its handler file is missing."""
        folder = FUNCTIONS_DIR / name
        if not (folder / HANDLER_FILE).is_file():
            raise ConfigError(f"functions/{name}/{HANDLER_FILE} is missing")
        return lambda_.Code.from_asset(str(folder), exclude=SOURCE_EXCLUDES)


def action_code_layer(
    scope: Construct, construct_id: str, code_dir: Path, policy_name: str
) -> lambda_.LayerVersion:
    """A layer of the team's own package directory (a `python` action's `package_path`): its
    content is staged under `python/`, where Lambda puts a layer on the function's path."""
    staged = ACTION_LAYERS_DIR / policy_name
    if staged.exists():
        shutil.rmtree(staged)
    shutil.copytree(code_dir, staged / "python", ignore=shutil.ignore_patterns(*_IGNORED))
    return lambda_.LayerVersion(
        scope,
        construct_id,
        code=lambda_.Code.from_asset(str(staged), exclude=SOURCE_EXCLUDES),
        compatible_runtimes=[LAMBDA_RUNTIME],
        compatible_architectures=[LAMBDA_ARCHITECTURE],
        description=f"{policy_name}: the team's own action code",
    )


_IGNORED = ("__pycache__", "*.pyc", ".mypy_cache", "*.egg-info")

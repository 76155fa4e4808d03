"""Packaging: the two layers and the function code, all plain folder assets (no Docker).

- deps layer: third-party wheels for python3.13/arm64, built by `layers/build.py` into
  `build/layers/deps/python/` (see that script for how and why).
- shared layer: the `sweeper` package itself, from `layers/sweeper/python/sweeper`.
- each function: its folder under `functions/`, handler `app.handler`.
- the policy file, for the operator functions that serve every policy: a layer of one JSON file
  (`config_layer`), staged under `build/` by its content's hash.
"""

from __future__ import annotations

import hashlib
import os
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
#: Where the policy file is staged as a layer, one folder per content.
CONFIG_LAYERS_DIR = REPO_ROOT / "build" / "config-layers"
CONFIG_LAYER_FOLDER = "sweeper-config"
CONFIG_FILE_NAME = "config.json"
#: Where Lambda puts that file (a layer's content goes under /opt).
CONFIG_FILE_PATH = f"/opt/{CONFIG_LAYER_FOLDER}/{CONFIG_FILE_NAME}"
CONFIG_DIGEST_CHARS = 16
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


def config_layer(scope: Construct, construct_id: str, config_json: str) -> lambda_.LayerVersion:
    """A layer holding the policy file as JSON at CONFIG_FILE_PATH. Staged in a folder named by
    the content's hash and written by rename: two synths of different files never share or
    half-write one."""
    digest = hashlib.sha256(config_json.encode()).hexdigest()[:CONFIG_DIGEST_CHARS]
    staged = CONFIG_LAYERS_DIR / digest
    target = staged / CONFIG_LAYER_FOLDER / CONFIG_FILE_NAME
    if not target.is_file():
        target.parent.mkdir(parents=True, exist_ok=True)
        partial = target.with_name(f"{CONFIG_FILE_NAME}.{os.getpid()}")
        partial.write_text(config_json, encoding="utf-8")
        partial.replace(target)
    return lambda_.LayerVersion(
        scope,
        construct_id,
        code=lambda_.Code.from_asset(str(staged)),
        compatible_runtimes=[LAMBDA_RUNTIME],
        compatible_architectures=[LAMBDA_ARCHITECTURE],
        description="the policy file, for the operator functions",
    )


_IGNORED = ("__pycache__", "*.pyc", ".mypy_cache", "*.egg-info")

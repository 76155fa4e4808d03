"""The shared layer ships the product only: no harness, no CLI, nothing the deps layer lacks.

The layer checked is the asset CDK staged for the `default` synth (what a deploy uploads), not
the source folder. Every shipped module is imported in a child interpreter that sees only the
layer and the installed packages, behind an import hook that refuses any top-level module that
is neither the standard library nor one the deps layer's requirements provide.
"""

from __future__ import annotations

import ast
import importlib.metadata
import json
import shutil
import site
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from layers import build
from tests.infra.conftest import Synth

#: What must never reach Lambda: the harness and the operator CLI, by folder and by module.
HARNESS_AND_CLI_PATHS = ("sweeper/local", "sweeper/cli", "sweeper_local", "sweeper_cli")


def _distribution_closure(requirements: list[str]) -> set[str]:
    """The distributions the requirements pull in (extras and markers honoured), installed here."""
    seen: set[str] = set()
    pending = [Requirement(text) for text in requirements]
    while pending:
        requirement = pending.pop()
        name = requirement.name.lower().replace("_", "-")
        if name in seen:
            continue
        seen.add(name)
        for text in importlib.metadata.requires(requirement.name) or []:
            child = Requirement(text)
            extras = {"", *requirement.extras}
            if child.marker is None or any(child.marker.evaluate({"extra": e}) for e in extras):
                pending.append(child)
    return seen


def deps_layer_modules() -> frozenset[str]:
    """The top-level modules the deps layer's requirements provide."""
    wanted = _distribution_closure(build.runtime_dependencies())
    return frozenset(
        module
        for module, distributions in importlib.metadata.packages_distributions().items()
        if module.isidentifier()
        and not module.startswith("__")  # __pycache__ folders beside a distribution's files
        and any(d.lower().replace("_", "-") in wanted for d in distributions)
    )


def allowed_modules() -> frozenset[str]:
    return deps_layer_modules() | sys.stdlib_module_names | {"sweeper", "__future__"}


def shipped_modules(layer_python: Path) -> list[str]:
    names = []
    for path in sorted(layer_python.rglob("*.py")):
        parts = list(path.relative_to(layer_python).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        names.append(".".join(parts))
    return names


def _runtime_imports(tree: ast.Module) -> set[str]:
    """Top-level names of every absolute import, module- or function-level, outside
    `if TYPE_CHECKING:` (never executed)."""
    skipped: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skipped.update(id(child) for stmt in node.body for child in ast.walk(stmt))
    found: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            found.update(alias.name.partition(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module.partition(".")[0])
    return found


def foreign_imports(layer_python: Path, allowed: frozenset[str]) -> dict[str, list[str]]:
    """Shipped files that import (anywhere in them) a module the layers do not provide."""
    foreign = {}
    for path in sorted(layer_python.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        outside = sorted(_runtime_imports(tree) - allowed)
        if outside:
            foreign[str(path.relative_to(layer_python))] = outside
    return foreign


#: Run in a child interpreter (-I -S: no user site, no .pth files, so no editable installs).
_IMPORT_EVERY_MODULE = textwrap.dedent(
    """
    import importlib, importlib.abc, importlib.machinery, json, sys
    layer, site_dirs, allowed, modules = json.loads(sys.argv[1])
    allowed = frozenset(allowed)
    stdlib_dirs = list(sys.path)  # -I -S: the interpreter's own library folders only

    class Refuse(importlib.abc.MetaPathFinder):
        def find_spec(self, fullname, path, target=None):
            top = fullname.partition(".")[0]
            in_stdlib = importlib.machinery.PathFinder.find_spec(top, stdlib_dirs) is not None
            if top not in allowed and not in_stdlib:  # e.g. _sysconfigdata_* is stdlib too
                raise ModuleNotFoundError(f"{top} is not in the layers", name=top)
            return None

    sys.path[:0] = [layer]
    sys.path.extend(site_dirs)
    sys.meta_path.insert(0, Refuse())
    failed = {}
    for name in modules:
        try:
            importlib.import_module(name)
        except Exception as exc:
            failed[name] = f"{type(exc).__name__}: {exc}"
    print(json.dumps(failed))
    """
)


def import_in_layer(layer_python: Path, allowed: frozenset[str]) -> dict[str, str]:
    """Import every module of the layer with only the allowed top-level modules; the failures."""
    argument = json.dumps(
        [str(layer_python), site.getsitepackages(), sorted(allowed), shipped_modules(layer_python)]
    )
    done = subprocess.run(  # our interpreter, fixed script
        [sys.executable, "-I", "-S", "-c", _IMPORT_EVERY_MODULE, argument],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    failed: dict[str, str] = json.loads(done.stdout)
    return failed


@pytest.fixture(scope="module")
def layer_python(default: Synth) -> Path:
    """The `python/` folder of the shared layer's asset, as CDK staged it for the deploy: the
    layer's S3 key names the asset, and the asset manifest its staged folder."""
    [layer] = [
        resource
        for logical_id, resource in default.resources("AWS::Lambda::LayerVersion").items()
        if "SharedLayer" in logical_id
    ]
    asset_hash = str(layer["Properties"]["Content"]["S3Key"]).removesuffix(".zip")
    manifest = json.loads((default.outdir / f"{default.stack.stack_name}.assets.json").read_text())
    source = manifest["files"][asset_hash]["source"]
    assert source["packaging"] == "zip"
    return default.outdir / str(source["path"]) / "python"


@pytest.fixture(scope="module")
def allowed() -> frozenset[str]:
    return allowed_modules()


def test_the_layer_ships_the_product_package_and_nothing_beside_it(layer_python: Path) -> None:
    assert sorted(p.name for p in layer_python.iterdir()) == ["sweeper"]
    assert (layer_python / "sweeper" / "ledger" / "migrations" / "0001_ledger.sql").is_file()


def test_the_layer_holds_no_harness_or_cli_module(layer_python: Path) -> None:
    shipped = [str(p.relative_to(layer_python)) for p in layer_python.rglob("*")]

    assert [p for p in shipped if p.startswith(HARNESS_AND_CLI_PATHS)] == []


def test_no_shipped_module_imports_what_the_deps_layer_lacks(
    layer_python: Path, allowed: frozenset[str]
) -> None:
    assert {"click", "moto", "sweeper_local", "sweeper_cli"}.isdisjoint(allowed)
    assert foreign_imports(layer_python, allowed) == {}


def test_every_shipped_module_imports_with_only_the_deps_layer(
    layer_python: Path, allowed: frozenset[str]
) -> None:
    assert import_in_layer(layer_python, allowed) == {}


@pytest.mark.parametrize("module", ["click", "sweeper_local.vendor", "moto"])
def test_a_shipped_module_importing_the_harness_or_click_is_refused(
    layer_python: Path, allowed: frozenset[str], tmp_path: Path, module: str
) -> None:
    # Given the layer with one more module, importing what only the harness or the CLI has
    copy = tmp_path / "python"
    shutil.copytree(layer_python, copy)
    (copy / "sweeper" / "leak.py").write_text(f"import {module}\n", encoding="utf-8")

    # When it is checked, Then both checks name the module and what it imports
    assert foreign_imports(copy, allowed) == {"sweeper/leak.py": [module.partition(".")[0]]}
    failed = import_in_layer(copy, allowed)
    assert list(failed) == ["sweeper.leak"]
    assert module.partition(".")[0] in failed["sweeper.leak"]

"""The Lambda layer ships only what runs: every module of `sweeper` is reached by a function.

Each entry point in `functions/*/app.py` is parsed (not imported) and its imports of `sweeper`
followed through the package's import graph (test_import_graph.import_graph: module-level and
function-level imports, relative ones resolved, a module's parent packages included). A module of
the shipped package that no function reaches belongs to the operator tools or the benchmark.
"""

from __future__ import annotations

import ast
from pathlib import Path

from tests.unit.test_import_graph import PACKAGE_DIR, import_graph, reachable

FUNCTIONS_DIR = Path(__file__).resolve().parents[2] / "functions"


def entry_imports(entry: Path, package: str) -> set[str]:
    """The modules of `package` an entry point imports (a `from pkg import mod` names pkg.mod)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(entry.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return {n for n in names if n == package or n.startswith(f"{package}.")}


def unreached(package_dir: Path, entries: list[Path]) -> list[str]:
    """The package's modules that no entry point reaches, sorted."""
    graph = import_graph(package_dir)
    reached: set[str] = set()
    for entry in entries:
        for name in entry_imports(entry, package_dir.name):
            while name and name not in graph:  # `from pkg.mod import function`
                name = name.rpartition(".")[0]
            while name:  # the module, then each package above it
                reached.add(name)
                reached |= reachable(graph, name)
                name = name.rpartition(".")[0]
    return sorted(set(graph) - reached)


def test_every_shipped_module_is_imported_by_a_lambda_function() -> None:
    # Given every Lambda entry point
    entries = sorted(FUNCTIONS_DIR.glob("*/app.py"))
    assert len(entries) >= 9

    # When their imports are followed through the shipped package, Then nothing is left over
    assert unreached(PACKAGE_DIR, entries) == []


def test_a_module_only_a_tool_imports_is_named(tmp_path: Path) -> None:
    # Given a package whose function reaches `a` (and through it `sub.b`), not `tool` nor `sub.c`
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "sub" / "__init__.py").write_text("")
    (package / "a.py").write_text("def f():\n    from .sub import b\n")
    (package / "sub" / "b.py").write_text("")
    (package / "sub" / "c.py").write_text("")
    (package / "tool.py").write_text("from pkg import a\n")
    entry = tmp_path / "fn" / "app.py"
    entry.parent.mkdir()
    entry.write_text("from pkg.a import f\n")

    # Then the left-overs are named, and what the function reaches is not
    assert unreached(package, [entry]) == ["pkg.sub.c", "pkg.tool"]

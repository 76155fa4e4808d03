"""The Lambda layer ships only what runs: every module of `sweeper` is reached by a function.

Each entry point in `functions/*/app.py` is parsed (not imported) and its imports of `sweeper`
followed through the package's import graph (test_import_graph.import_graph: module-level and
function-level imports, relative ones resolved, a module's parent packages included). A module of
the shipped package that no function reaches belongs to the operator tools or the benchmark.
"""

from __future__ import annotations

import ast
import importlib
from dataclasses import dataclass
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


# --- what a function runs, inside the modules ---------------------------------------------------
#
# The rule: a public class, function or method of the shipped package is run when its name is
# used (as a name or an attribute, `x.name`) by a function's entry point, by code the package
# runs on import (module level, class bodies, decorators, defaults), or inside a function that
# is itself run (its body or its signature's types); repeated until nothing more is reached.
# What runs without its name written is reached with its class: a dunder, a method under a
# registering decorator (a validator, a route), a method overriding one of a base outside the
# package (Powertools calls `process`). Names, not types: a method sharing a run one's name is
# taken as run, so the rule misses some dead code, never code called by a name it writes.

#: Decorators that leave a function to be called by name (any other may register it: a route, a
#: handler, a validator, which is then run without its name being written anywhere).
_PLAIN_DECORATORS = frozenset(
    {"property", "cached_property", "classmethod", "staticmethod", "abstractmethod", "override"}
)


@dataclass(frozen=True)
class Definition:
    """A class or function of the package: where ("path:Class.name"), the name that reaches it,
    the names its body uses, and whether it is public."""

    key: str
    reached_by: str
    uses: frozenset[str]
    public: bool


def _names(*nodes: ast.AST) -> set[str]:
    """The names and attribute names the nodes use."""
    found: set[str] = set()
    for node in nodes:
        for inner in ast.walk(node):
            if isinstance(inner, ast.Name):
                found.add(inner.id)
            elif isinstance(inner, ast.Attribute):
                found.add(inner.attr)
    return found


def _decorator_name(node: ast.expr) -> str:
    target = node.func if isinstance(node, ast.Call) else node
    if isinstance(target, ast.Attribute):
        return target.attr
    return target.id if isinstance(target, ast.Name) else ""


def _framework_hooks(module: str, class_name: str) -> set[str]:
    """The names the class's bases outside the package define (what such a base calls)."""
    try:
        found = getattr(importlib.import_module(module), class_name, None)
    except ImportError:  # a package built for a test, not on the path
        return set()
    if not isinstance(found, type):
        return set()
    return {
        name
        for base in found.__mro__[1:]
        if base.__module__.partition(".")[0] != module.partition(".")[0]
        for name in vars(base)
    }


def definitions(package_dir: Path) -> tuple[list[Definition], set[str]]:
    """Every class and function of the package, and the names its import-time code uses."""
    found: list[Definition] = []
    on_import: set[str] = set()

    def visit(body: list[ast.stmt], where: str, module: str, owner: ast.ClassDef | None) -> None:
        hooks = _framework_hooks(module, owner.name) if owner else set()
        for node in body:
            if isinstance(node, ast.ClassDef):
                on_import.update(_names(*node.bases, *node.keywords, *node.decorator_list))
                key = f"{where}:{node.name}" if owner is None else f"{where}.{node.name}"
                found.append(Definition(key, node.name, frozenset(), not node.name.startswith("_")))
                visit(node.body, key, module, node)
            elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                on_import.update(_names(*node.decorator_list, *node.args.defaults))
                implicit = (
                    node.name.startswith("__")
                    or node.name in hooks
                    or any(_decorator_name(d) not in _PLAIN_DECORATORS for d in node.decorator_list)
                )
                key = f"{where}:{node.name}" if owner is None else f"{where}.{node.name}"
                # its body, and its signature's types (a protocol is used where it is named)
                uses = frozenset(
                    _names(*node.body, node.args, *([node.returns] if node.returns else []))
                )
                if implicit and owner is None:
                    on_import.update(uses)
                else:
                    public = not node.name.startswith("_") and not implicit
                    reached_by = owner.name if implicit and owner else node.name
                    found.append(Definition(key, reached_by, uses, public))
            else:
                on_import.update(_names(node))

    for path in sorted(package_dir.rglob("*.py")):
        where = path.relative_to(package_dir.parent).as_posix()
        module = ".".join(path.relative_to(package_dir.parent).with_suffix("").parts)
        visit(ast.parse(path.read_text(encoding="utf-8")).body, where, module, None)
    return found, on_import


def names_used(*paths: Path) -> set[str]:
    """Every name the code under the paths uses (see `_names`)."""
    return _names(
        *(ast.parse(p.read_text(encoding="utf-8")) for root in paths for p in root.rglob("*.py"))
    )


def never_run(package_dir: Path, functions_dir: Path) -> list[str]:
    """The package's public classes, functions and methods no function runs (the rule above)."""
    found, on_import = definitions(package_dir)
    by_name: dict[str, list[Definition]] = {}
    for definition in found:
        by_name.setdefault(definition.reached_by, []).append(definition)
    waiting, seen, reached = names_used(functions_dir) | on_import, set[str](), set[str]()
    while waiting:
        name = waiting.pop()
        seen.add(name)
        for definition in by_name.get(name, []):
            reached.add(definition.key)
            waiting |= definition.uses - seen
    return sorted(d.key for d in found if d.public and d.key not in reached)


def test_every_public_definition_of_the_shipped_package_is_run_by_a_lambda_function() -> None:
    # Given the shipped package's public classes, functions and methods, and what the functions
    # run of them
    unused = never_run(PACKAGE_DIR, FUNCTIONS_DIR)
    # Then each is run
    assert unused == []


def test_a_definition_only_a_tool_or_dead_code_reaches_is_named(tmp_path: Path) -> None:
    # Given a package whose function runs `run` (and through it `helper`) and reads `A.size`,
    # while a tool calls `plan` (which calls `only_plan`), `Tool` is used by nobody and
    # `recurse` only by itself; a route and `__init__` run unnamed
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "a.py").write_text(
        "def run(): return helper()\n"
        "def helper(): return 1\n"
        "def plan(): return only_plan()\n"
        "def only_plan(): return 2\n"
        "def recurse(n): return recurse(n - 1)\n"
        "@app.get('/x')\n"
        "def route(): return checked()\n"
        "def checked(): return 3\n"
        "class Tool:\n"
        "    pass\n"
        "class A:\n"
        "    def __init__(self): self.made = built()\n"
        "    @property\n"
        "    def size(self): return 1\n"
        "    def grants(self): return ()\n"
        "def built(): return 0\n"
    )
    functions = tmp_path / "functions"
    (functions / "fn").mkdir(parents=True)
    (functions / "fn" / "app.py").write_text("from pkg.a import run, A\nrun(); A().size\n")
    tools = tmp_path / "tools"
    tools.mkdir()
    (tools / "cli.py").write_text("from pkg.a import plan\nplan()\n")

    # Then what no function runs is named, and nothing else
    assert never_run(package, functions) == [
        "pkg/a.py:A.grants",
        "pkg/a.py:Tool",
        "pkg/a.py:only_plan",
        "pkg/a.py:plan",
        "pkg/a.py:recurse",
    ]

"""The product package's import graph: no circle, and no arrow to the harness or the CLI.

Every module of `sweeper` is parsed (not imported); an arrow is any import of another of its
modules, at module level or inside a function, `if TYPE_CHECKING:` included (a type-only arrow
is still an arrow in the design). Importing `a.b.c` also imports the packages `a.b` and `a`.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import sweeper

PACKAGE_DIR = Path(sweeper.__file__).resolve().parent
#: The wings above the product: it may never import them (they import it).
UPPER_WINGS = ("sweeper_local", "sweeper_cli", "sweeper_tools", "sweeper_bench")
#: Known circles, each a sorted tuple of module names, left for another change to break. Empty:
#: add one only with the reason it cannot be broken yet.
ALLOWED_CYCLES: frozenset[tuple[str, ...]] = frozenset()
#: The bedrock: the platform's limits, the adaptive rate's arithmetic, which the policy
#: models and the limiter both import, and a vendor's reading, which an action result carries.
#: They import nothing of sweeper.
BEDROCK = ("sweeper.limits", "sweeper.adaptive_rate", "sweeper.vendor_reading")
#: The ground floor: the bedrock, errors, the domain's models and redaction. It imports nothing
#: above it, and the ledger (the data layer) leans on it alone.
GROUND_FLOOR = frozenset({*BEDROCK, "sweeper.errors", "sweeper.models", "sweeper.redaction"})


def module_name(path: Path, package_dir: Path) -> str:
    parts = [package_dir.name, *path.relative_to(package_dir).with_suffix("").parts]
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imported_names(tree: ast.Module, importer: str, is_package: bool) -> set[str]:
    """Every absolute name the module imports (relative imports resolved)."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = importer.split(".")
                anchor = anchor[: len(anchor) - node.level + (1 if is_package else 0)]
                base = ".".join([*anchor, *([base] if base else [])])
            names.add(base)
            # `from pkg import mod` imports the module pkg.mod when there is one
            names.update(f"{base}.{alias.name}" for alias in node.names)
    return names


def import_graph(package_dir: Path) -> dict[str, set[str]]:
    """Module -> the package's modules it imports (with their parent packages)."""
    files = {module_name(p, package_dir): p for p in package_dir.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in files.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        own_ancestors = {name.rsplit(".", n)[0] for n in range(1, name.count(".") + 1)}
        targets: set[str] = set()
        for imported in _imported_names(tree, name, path.name == "__init__.py"):
            while imported and imported not in files:
                imported = imported.rpartition(".")[0]
            while imported:  # the module, then each package above it
                if imported != name and imported not in own_ancestors:
                    targets.add(imported)
                imported = imported.rpartition(".")[0]
        graph[name] = targets
    return graph


def cycles(graph: dict[str, set[str]]) -> list[tuple[str, ...]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[tuple[str, ...]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph.get(node, ())):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(tuple(sorted(component)))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(found)


def reachable(graph: dict[str, set[str]], start: str) -> set[str]:
    """Every module `start` imports, directly or through others."""
    seen: set[str] = set()
    todo = [start]
    while todo:
        for target in graph.get(todo.pop(), ()):
            if target not in seen:
                seen.add(target)
                todo.append(target)
    return seen


def within(package: str, modules: set[str]) -> list[str]:
    """The modules that are `package` or inside it, sorted."""
    return sorted(m for m in modules if m == package or m.startswith(f"{package}."))


def upward_imports(package_dir: Path) -> dict[str, list[str]]:
    """Modules of the package that import a wing above it."""
    upward = {}
    for path in sorted(package_dir.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        imported = [
            alias.name
            for node in ast.walk(tree)
            if isinstance(node, ast.Import)
            for alias in node.names
        ] + [
            node.module
            for node in ast.walk(tree)
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module
        ]
        wrong = sorted({name for name in imported if name.partition(".")[0] in UPPER_WINGS})
        if wrong:
            upward[module_name(path, package_dir)] = wrong
    return upward


def test_the_product_package_has_no_import_cycle() -> None:
    found = cycles(import_graph(PACKAGE_DIR))

    assert [cycle for cycle in found if cycle not in ALLOWED_CYCLES] == []


def test_the_product_never_imports_the_harness_or_the_cli() -> None:
    assert upward_imports(PACKAGE_DIR) == {}


def test_the_policy_models_never_reach_the_limiter() -> None:
    # Given the product's graph, When every config module's imports are followed to the end
    graph = import_graph(PACKAGE_DIR)
    reached = set().union(*(reachable(graph, m) for m in within("sweeper.config", set(graph))))

    # Then none of them is the limiter: the policy sits below what it configures
    assert within("sweeper.config", set(graph)) != []
    assert within("sweeper.limiter", reached) == []


@pytest.mark.parametrize("module", BEDROCK)
def test_the_ground_floor_imports_nothing_of_sweeper(module: str) -> None:
    assert import_graph(PACKAGE_DIR)[module] == set()


def test_a_circle_is_found_and_named_through_a_function_level_import(tmp_path: Path) -> None:
    # Given a package whose config imports the event source, which imports it back lazily
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "sub" / "__init__.py").write_text("")
    (package / "config.py").write_text("from pkg.sub import event_source\n")
    (package / "sub" / "event_source.py").write_text(
        "def check():\n    from pkg import config\n    return config\n"
    )
    (package / "leaf.py").write_text("import pkg.config\n")

    # When its graph is checked, Then the circle names both modules, and nothing else
    assert cycles(import_graph(package)) == [("pkg.config", "pkg.sub.event_source")]


def test_a_type_only_or_relative_import_is_an_arrow_too(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("from . import b\n")
    (package / "b.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.a import A\n"
    )

    assert cycles(import_graph(package)) == [("pkg.a", "pkg.b")]


def test_an_import_of_a_wing_above_is_named(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "smoke.py").write_text("def view():\n    from sweeper_local.vendor import f\n")

    assert upward_imports(package) == {"pkg.smoke": ["sweeper_local.vendor"]}


def arrows_above(
    graph: dict[str, set[str]], floor: str, allowed: frozenset[str]
) -> dict[str, list[str]]:
    """Modules of `floor` (a module or package name) that import outside it and `allowed`."""
    wrong = {}
    for module, targets in graph.items():
        if module != floor and not module.startswith(f"{floor}."):
            continue
        above = sorted(
            t
            for t in targets
            if t not in allowed and t != "sweeper" and t != floor and not t.startswith(f"{floor}.")
        )
        if above:
            wrong[module] = above
    return wrong


def test_the_ground_floor_imports_only_itself() -> None:
    graph = import_graph(PACKAGE_DIR)
    wrong = {
        module: sorted(graph[module] - GROUND_FLOOR - {"sweeper"})
        for module in GROUND_FLOOR
        if graph[module] - GROUND_FLOOR - {"sweeper"}
    }
    assert wrong == {}


def test_the_ledger_leans_on_the_ground_floor_only() -> None:
    # The data layer never imports logic (backpressure, config, the consumer...) above it.
    assert arrows_above(import_graph(PACKAGE_DIR), "sweeper.ledger", GROUND_FLOOR) == {}


def test_an_arrow_from_the_data_layer_up_is_named(tmp_path: Path) -> None:
    package = tmp_path / "sweeper"
    (package / "ledger").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "ledger" / "__init__.py").write_text("")
    (package / "ledger" / "store.py").write_text("from sweeper.backpressure import Settled\n")
    (package / "backpressure.py").write_text("from sweeper.errors import E\n")
    (package / "errors.py").write_text("")

    graph = import_graph(package)

    assert arrows_above(graph, "sweeper.ledger", GROUND_FLOOR) == {
        "sweeper.ledger.store": ["sweeper.backpressure"]
    }

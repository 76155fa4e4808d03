"""A constant of the shipped package has one name: no module gives another module's constant a
second one (`MAX_RETRY_AT_SECONDS = MAX_WAIT_SECONDS`), which a reader takes for a second bound
and a change of one leaves the other's readers to guess at. Every module is parsed, not imported.
"""

from __future__ import annotations

import ast

from tests.unit.test_import_graph import PACKAGE_DIR


def renamed_constants(tree: ast.Module) -> list[str]:
    """The module-level `NEW = OLD` of `tree` where OLD is a constant imported from sweeper."""
    imported = {
        alias.asname or alias.name
        for node in tree.body
        if isinstance(node, ast.ImportFrom)
        and (node.level or (node.module or "").startswith("sweeper"))
        for alias in node.names
    }
    found: list[str] = []
    for node in tree.body:
        if not isinstance(node, ast.Assign | ast.AnnAssign):
            continue
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        value = node.value
        if isinstance(value, ast.Name) and value.id in imported and value.id.isupper():
            found.extend(f"{ast.unparse(target)} = {value.id}" for target in targets)
    return found


def test_no_shipped_module_gives_another_modules_constant_a_second_name() -> None:
    # Given every module of the shipped package
    renaming = {
        path.relative_to(PACKAGE_DIR).as_posix(): found
        for path in sorted(PACKAGE_DIR.rglob("*.py"))
        if (found := renamed_constants(ast.parse(path.read_text(), filename=str(path))))
    }
    # Then each imports the constant it means under its one name
    assert renaming == {}


def test_a_second_name_is_seen_and_a_use_is_not() -> None:
    # Given a constant renamed (imported absolutely, or relatively), and uses that are not
    renames = [
        "from sweeper.vendor_reading import MAX_WAIT_SECONDS\nMAX_AT: Final = MAX_WAIT_SECONDS",
        "from .base import LEAD\nFIRST_LEAD = LEAD",
    ]
    fine = [
        "from sweeper.vendor_reading import MAX_WAIT_SECONDS\nHALF = MAX_WAIT_SECONDS / 2",
        "from sweeper.config import Policy\nShorthand = Policy",
        "LOCAL = 3\nOTHER = LOCAL",
    ]
    # Then every renaming is seen, and nothing else
    assert [text for text in renames if not renamed_constants(ast.parse(text))] == []
    assert [text for text in fine if renamed_constants(ast.parse(text))] == []

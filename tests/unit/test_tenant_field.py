"""The `{tenant_id}` field, as the action's templates name it: one constant for the product."""

from __future__ import annotations

import ast

from sweeper.actions.templates import TENANT_FIELD
from tests.unit.test_import_graph import PACKAGE_DIR


def constants_of(value: str) -> list[str]:
    """`module:NAME` of each module-level constant of the package bound to `value`."""
    found = []
    for path in sorted(PACKAGE_DIR.rglob("*.py")):
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.AnnAssign | ast.Assign) and (
                isinstance(node.value, ast.Constant) and node.value.value == value
            ):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for target in targets:
                    if isinstance(target, ast.Name):
                        found.append(f"{path.relative_to(PACKAGE_DIR)}:{target.id}")
    return found


def test_the_tenant_field_is_one_constant() -> None:
    # Given every module of the product, When their constants are read
    # Then one names the tenant's field: the URL's host and the secret's name both use it
    assert TENANT_FIELD == "{tenant_id}"
    assert constants_of("{tenant_id}") == ["actions/templates.py:TENANT_FIELD"]

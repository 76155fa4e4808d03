"""The admission seam holds: the consumer speaks to its limits through `sweeper.admission` only.

Every module is parsed, not imported. The consumer may import the limiter's plain answers and
its `Limiter` type, never a capability protocol it would have to check with `isinstance`, nor
a regime's module (leases, several limits, paired items): what a limiter can do is asked once,
by the admission's facade (`Abilities`). The two packages stay small enough to read.
"""

from __future__ import annotations

import ast
from pathlib import Path

import sweeper

PACKAGE_DIR = Path(sweeper.__file__).resolve().parent
#: What only a regime of `sweeper.admission` may know of the limiter.
CAPABILITIES = {
    "GateReader",
    "PairedSource",
    "LeaseSource",
    "SlotSource",
    "ThrottleNotes",
    "BudgetSource",
}
REGIME_MODULES = {
    "sweeper.limiter.leases",
    "sweeper.limiter.paired",
    "sweeper.limiter.several",
    "sweeper.limiter.budget",
}
MODULE_MOST_LINES = 500
CONSUMER_MOST_LINES = 1000


def _imports(path: Path) -> set[tuple[str, str]]:
    """(module, name) for every `from module import name` in the file ((module, "") for
    `import module`)."""
    found: set[tuple[str, str]] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.ImportFrom) and node.module:
            found.update((node.module, alias.name) for alias in node.names)
        elif isinstance(node, ast.Import):
            found.update((alias.name, "") for alias in node.names)
    return found


def test_the_consumer_never_asks_what_its_limiter_can_do() -> None:
    # Given every module of the consumer
    asked = {
        f"{path.name}: {module}.{name}"
        for path in sorted((PACKAGE_DIR / "consumer").glob("*.py"))
        for module, name in _imports(path)
        if name in CAPABILITIES or module in REGIME_MODULES
    }
    # Then none imports a limiter capability or a regime's limiter module
    assert asked == set()


def test_the_admission_and_the_consumer_stay_small() -> None:
    # Given the two packages' modules
    sizes = {
        path.relative_to(PACKAGE_DIR).as_posix(): len(path.read_text().splitlines())
        for package in ("admission", "consumer")
        for path in sorted((PACKAGE_DIR / package).glob("*.py"))
    }
    # Then no module is over the house's bound, and the consumer is within its own
    assert {name: n for name, n in sizes.items() if n > MODULE_MOST_LINES} == {}
    consumer = sum(n for name, n in sizes.items() if name.startswith("consumer/"))
    assert consumer <= CONSUMER_MOST_LINES

"""The house stays readable: no module of the shipped package over 500 lines, the consumer within
1,000 (issue 42's targets). A module that outgrows the bound is split by concern, not trimmed."""

from __future__ import annotations

from pathlib import Path

import sweeper

PACKAGE_DIR = Path(sweeper.__file__).resolve().parent
MODULE_MOST_LINES = 500
CONSUMER_MOST_LINES = 1000


def line_counts(package_dir: Path) -> dict[str, int]:
    """Each module of the package (its path under the package) with its number of lines."""
    return {
        path.relative_to(package_dir).as_posix(): len(path.read_text().splitlines())
        for path in sorted(package_dir.rglob("*.py"))
    }


def test_no_module_of_the_shipped_package_is_over_the_house_bound() -> None:
    # Given every module of the shipped package, subpackages included
    counts = line_counts(PACKAGE_DIR)
    # Then none is longer than the bound
    assert {name: n for name, n in counts.items() if n > MODULE_MOST_LINES} == {}


def test_the_consumer_package_is_within_its_bound() -> None:
    # Given the consumer's modules
    counts = line_counts(PACKAGE_DIR / "consumer")
    # Then together they are within the consumer's bound
    assert sum(counts.values()) <= CONSUMER_MOST_LINES


def test_the_bound_counts_modules_in_subpackages(tmp_path: Path) -> None:
    # Given a package whose only long module lies two levels down
    deep = tmp_path / "pkg" / "inner"
    deep.mkdir(parents=True)
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (deep / "long.py").write_text("x = 1\n" * (MODULE_MOST_LINES + 1))
    # Then it is counted, with its path under the package
    assert line_counts(tmp_path / "pkg") == {"__init__.py": 0, "inner/long.py": 501}

"""The retrying classes `status` counts are the same in the code, the query and its index."""

from __future__ import annotations

import re
from importlib import resources

from sweeper.failing import RETRYING_CLASSES
from sweeper.ledger.view_sql import RETRYING_BY_CODE
from sweeper.models import OutcomeClass

PREDICATE = re.compile(r"last_outcome IN \(([^)]*)\)")


def _classes(sql: str) -> set[str]:
    (listed,) = PREDICATE.findall(sql)
    return {name.strip().strip("'") for name in listed.split(",")}


def test_the_query_counts_exactly_the_classes_that_do_not_settle_a_job() -> None:
    retrying = {outcome.value for outcome in OutcomeClass if not outcome.settled}
    assert {outcome.value for outcome in RETRYING_CLASSES} == retrying
    assert _classes(RETRYING_BY_CODE) == retrying


def test_the_index_names_the_same_classes_as_the_query() -> None:
    folder = resources.files("sweeper.ledger").joinpath("migrations")
    (index,) = [
        entry.read_text(encoding="utf-8")
        for entry in folder.iterdir()
        if "CREATE INDEX sweeper_jobs_retrying" in entry.read_text(encoding="utf-8")
    ]
    assert _classes(index) == _classes(RETRYING_BY_CODE)

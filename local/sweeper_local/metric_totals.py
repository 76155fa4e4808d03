"""A metric sink that keeps totals in memory: the local stack's, and the tests'."""

from __future__ import annotations

from sweeper.observability import CLOUDWATCH_UNITS


class CountingSink:
    """A MetricSink that keeps totals in memory (tests, the local stack).

    As strict about units as Powertools' Metrics: a unit CloudWatch does not know raises there
    (MetricUnitError, failing the invocation), so it raises here too.
    """

    def __init__(self) -> None:
        self.totals: dict[str, float] = {}

    def add_metric(self, name: str, unit: str, value: float) -> None:
        if unit not in CLOUDWATCH_UNITS:
            raise ValueError(f"metric {name}: {unit!r} is not a CloudWatch unit")
        self.totals[name] = self.totals.get(name, 0.0) + value

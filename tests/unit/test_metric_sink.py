"""The in-memory metric sink is as strict about units as the production one (Powertools)."""

from __future__ import annotations

import pytest
from aws_lambda_powertools import Metrics
from aws_lambda_powertools.metrics.exceptions import MetricUnitError

from sweeper.observability import CountingSink


@pytest.mark.parametrize("unit", ["Count", "Seconds", "Milliseconds"])
def test_a_cloudwatch_unit_is_counted(unit: str) -> None:
    sink = CountingSink()
    sink.add_metric("Calls", unit, 2)
    sink.add_metric("Calls", unit, 1)
    assert sink.totals == {"Calls": 3.0}


@pytest.mark.parametrize("unit", ["count", "COUNT", "XXCountXX", "calls"])
def test_a_unit_powertools_refuses_is_refused_here_too(unit: str) -> None:
    with pytest.raises(MetricUnitError):
        Metrics(namespace="Test").add_metric("Calls", unit, 1)
    with pytest.raises(ValueError, match="not a CloudWatch unit"):
        CountingSink().add_metric("Calls", unit, 1)


def test_a_metric_without_a_unit_is_refused() -> None:
    with pytest.raises(ValueError, match="not a CloudWatch unit"):
        CountingSink().add_metric("Calls", None, 1)  # type: ignore[arg-type]

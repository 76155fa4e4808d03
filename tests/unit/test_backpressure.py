"""The producer's in-flight budget follows what the consumers settle, within the quota's formula."""

from __future__ import annotations

import pytest

from sweeper.backpressure import (
    GROWTH,
    START_FRACTION,
    completion_window_seconds,
    in_flight_budget,
)
from sweeper.config import Policy, Quota

# 40/s at headroom 1 over half of a 600 s lease: the quota's formula allows 12,000 in flight.
POLICY = Policy(
    name="exports", quota=Quota(limit=40, period_seconds=1, headroom=1.0), lease_seconds=600
)


def test_the_window_is_half_a_lease_over_the_growth_factor() -> None:
    assert POLICY.max_in_flight == 12_000
    assert completion_window_seconds(POLICY) == pytest.approx(300 / GROWTH)


def test_a_first_run_starts_with_a_share_of_the_formula() -> None:
    budget = in_flight_budget(POLICY, completed_in_window=0, in_flight=0)
    assert (budget.limit, budget.reason) == (int(12_000 * START_FRACTION), "start")


def test_work_in_flight_with_nothing_settled_gets_nothing_more() -> None:
    budget = in_flight_budget(POLICY, completed_in_window=0, in_flight=700)
    assert (budget.limit, budget.reason) == (700, "stalled")


@pytest.mark.parametrize(("completed", "expected"), [(100, 150), (2000, 3000), (7999, 11_999)])
def test_in_flight_follows_the_achieved_rate_times_half_a_lease(
    completed: int, expected: int
) -> None:
    # Consumers behind (work still in flight): GROWTH x what the window settled
    budget = in_flight_budget(POLICY, completed_in_window=completed, in_flight=500)
    assert (budget.limit, budget.reason) == (expected, "completions")


def test_consumers_that_drained_everything_get_at_least_the_start() -> None:
    budget = in_flight_budget(POLICY, completed_in_window=100, in_flight=0)
    assert (budget.limit, budget.reason) == (3000, "start")


def test_never_above_the_quotas_formula() -> None:
    budget = in_flight_budget(POLICY, completed_in_window=50_000, in_flight=100)
    assert (budget.limit, budget.reason) == (12_000, "quota")

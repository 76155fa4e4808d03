"""A call's cost in points: reserved with its slot, corrected by its answer both ways.

Shopify's rule (sweeper.admission.costs): a call runs when the bucket holds its requested
cost, is charged its actual cost, and the difference is returned. The learned limit takes the
expected cost before the call and the answer's actual cost corrects it; a lower one gives the
difference back to the scope's shared item. The limiter here is an in-memory item counting the
units it holds ahead of a frozen clock (no unit comes back by time), so what it holds is what
the vendor charged.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sweeper.adaptive_rate import Adaptive
from sweeper.admission import Clocks, Permit, admission_for
from sweeper.config import Policy
from sweeper.limiter import Denial, Grant, ScopeState
from sweeper.limiter.held import HeldRate
from sweeper.models import ActionCall
from sweeper.vendor_reading import BucketReading, CostReading, VendorReading

NOW = 1_000.0
SCOPE = "points:store"
#: The told rate: 50 points a second (the ceiling of what a bucket's restore rate is paced at).
TOLD = 50


class _Sink:
    def add_metric(self, name: str, unit: str, value: float) -> None:
        return None


@dataclass
class _PointsItem:
    """One scope's item: the units it holds ahead of now (a frozen clock), its held rate, its
    gate; `refund` gives units back, never below none ahead."""

    ahead: int = 0
    rate: float | None = None
    closed_until: float | None = None
    refunds: list[int] = field(default_factory=list)

    def reserve(
        self,
        scope: str,
        interval: float,
        horizon: float,
        count: int = 1,
        adaptive: Adaptive | None = None,
        not_before: float | None = None,
        slack: float = 0.0,
        tolerance: float = 0.0,
        units: int = 1,
    ) -> Grant | Denial:
        if self.closed_until is not None and self.closed_until > NOW:
            return Denial(self.closed_until, "throttled")
        self.ahead += count * units
        return Grant(NOW, count, 0.0)

    def refund(
        self, scope: str, units: int, interval: float, adaptive: Adaptive | None = None
    ) -> bool:
        self.refunds.append(units)
        given = min(units, self.ahead)
        self.ahead -= given
        return given > 0

    def hold_rate(
        self,
        scope: str,
        rate: float,
        *,
        unset_only: bool = False,
        within: float = 0.0,
        only_from: float | None = None,
        stated: float | None = None,
    ) -> bool:
        if unset_only and self.rate is not None:
            return False
        changed = self.rate != rate
        self.rate = rate
        return changed

    def held_rate(self, scope: str) -> HeldRate | None:
        return None if self.rate is None else HeldRate(self.rate, 1)

    def close(self, scope: str, until: float, reason: str) -> float:
        self.closed_until = max(until, self.closed_until or until)
        return self.closed_until

    def cut(self, scope: str, adaptive: Adaptive) -> float:
        return self.rate or 0.0

    def state(self, scope: str) -> ScopeState:
        return ScopeState(scope, None, self.closed_until, None, None)


def _policy(reserve: float | str = 15) -> Policy:
    """One store's bucket, told 50 points a second, each call reserving `reserve`."""
    return Policy.model_validate(
        {
            "name": "shopify",
            "limits": [
                {
                    "name": "points",
                    "key": "{tenant_id}",
                    "rate": {"limit": TOLD, "period_seconds": 1},
                    "learn": {"cost": {"reserve": reserve, "bucket": "shopify"}},
                }
            ],
        }
    )


def _job(n: int, params: dict[str, Any] | None = None) -> ActionCall:
    return ActionCall(
        key=f"k{n}",
        idempotency_key=f"i{n}",
        policy="shopify",
        policy_version=1,
        tenant_id="store",
        object_id=f"o{n}",
        scope=SCOPE,
        attempt=1,
        batch_id="b",
        params=params or {},
    )


def _call(
    policy: Policy, item: _PointsItem, answer: CostReading, n: int = 0, **params: Any
) -> None:
    """One call of the scope: admitted, answered with `answer`, finished."""
    clocks = Clocks(lambda _: None, lambda: NOW, lambda: 0.0, random.Random(0), _Sink())
    batch = admission_for(policy, item, clocks, 1, {SCOPE: 1})
    admission = batch.call(_job(n, params), {})
    assert isinstance(admission.admit(lambda: None), Permit)
    admission.ended(None, VendorReading(cost=answer))
    admission.done()


def _answer(actual: float | None, level: float, requested: float = 15) -> CostReading:
    return CostReading(requested, actual, BucketReading(level, 1000, TOLD))


def test_a_lower_actual_cost_gives_the_difference_back() -> None:
    # Given a call reserving 15 points
    item = _PointsItem()
    # When its answer says it cost 5
    _call(_policy(), item, _answer(5, 995))
    # Then the scope holds 5 points of it, not 15: the 10 unused came back to the shared item
    assert item.ahead == 5


def test_a_higher_actual_cost_takes_the_rest() -> None:
    item = _PointsItem()
    _call(_policy(), item, _answer(22, 978, requested=25))
    assert item.ahead == 22
    assert item.refunds == []


def test_a_cost_from_a_param_is_corrected_both_ways() -> None:
    item = _PointsItem()
    _call(_policy("{params.cost}"), item, _answer(3, 997), cost=12)
    assert item.ahead == 3


def test_a_throttled_answer_keeps_the_reservation_and_closes_the_gate() -> None:
    # Given a call reserving 15 points, throttled: no actual cost, 4 points in the bucket
    item = _PointsItem()
    _call(_policy(), item, _answer(None, 4))
    # Then nothing is given back, and the gate is closed until 11 points have restored
    assert item.ahead == 15
    assert item.closed_until == pytest.approx(NOW + 11 / TOLD)


#: An answer: (requested, actual as a share of it, currentlyAvailable, restoreRate).
ANSWERS = st.tuples(st.integers(1, 100), st.floats(0, 1), st.integers(0, 1000), st.integers(1, 500))


@given(st.integers(1, 40), st.lists(ANSWERS, min_size=1, max_size=12))
def test_after_any_answers_the_limiter_holds_what_was_charged_and_no_faster_pace(
    reserve: int, answers: list[tuple[int, float, int, int]]
) -> None:
    item = _PointsItem()
    policy = _policy(reserve)
    headroom = policy.quota.effective_headroom
    charged = 0
    for n, (requested, share, level, restore) in enumerate(answers):
        actual = max(1, round(requested * share))  # Shopify never charges above the request
        item.closed_until = None  # each call is admitted: what it teaches is the property
        _call(policy, item, CostReading(requested, actual, BucketReading(level, 1000, restore)), n)
        charged += actual
        # Then the scope holds exactly the points the vendor charged (none refunded twice,
        # none kept that the vendor returned)
        assert item.ahead == charged
        # And it is paced no faster than the latest answer restores, nor the told rate
        assert item.rate is not None
        assert item.rate <= min(TOLD, restore) * headroom + 1e-9
        # And a bucket holding less than the next call requests closes the gate until it has
        # restored that much
        need = max(reserve, requested)
        if level < need:
            assert item.closed_until is not None
            assert item.closed_until >= NOW + (need - level) / restore - 1e-9
        else:
            assert item.closed_until is None

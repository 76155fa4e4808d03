"""The rate's derived burst tolerance (`Quota.pacing`) on every reservation the admission makes.

A batch's own rate reserves through its bank (a block, a restock, a late call's spent slot);
a call held by several rates reserves one slot of each (`reserve_all`, and a late call's spent
slots). Each write carries the tolerance of the rate it reserves in; paired limits carry none.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from types import SimpleNamespace

import pytest

from sweeper.adaptive_rate import Adaptive
from sweeper.admission import BatchSlots, Clocks, admission_for
from sweeper.admission.composed import EveryLimit
from sweeper.admission.pairing import PairedLimits
from sweeper.config import Policy, Quota
from sweeper.limiter import Denial, Grant
from sweeper.limiter.several import LimitAsk, reserve_all

NOW = 1_000.0
#: A window of 10 per second paced with room for a burst of 3 calls.
QUOTA = Quota(limit=10, period_seconds=1.0, burst=3)


class _Sink:
    def add_metric(self, name: str, unit: str, value: float) -> None:
        return None


@dataclass
class _GcraWithTolerance:
    """An in-memory GCRA per key: the first slot `max(tat - tolerance, now, not_before)`, the
    tolerances asked remembered."""

    now: float = NOW
    tat: dict[str, float] = field(default_factory=dict)
    tolerances: list[float] = field(default_factory=list)
    lead: float = 0.0

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
        self.tolerances.append(tolerance)
        now = max(self.now, not_before or 0.0)
        tat = self.tat.get(scope, 0.0)
        first = max(tat - tolerance, now)
        if first > self.now + horizon:
            return Denial(first - horizon, "rate")
        self.tat[scope] = max(tat, now) + count * interval
        return Grant(first, count, interval)

    def give_back(self, scope: str, slot_at: float, interval: float) -> bool:
        return False


def _batch(policy: Policy, limiter: _GcraWithTolerance) -> object:
    clocks = Clocks(lambda _: None, lambda: limiter.now, lambda: 0.0, random.Random(0), _Sink())
    return admission_for(policy, limiter, clocks, 4, {"s": 40})  # type: ignore[arg-type]


def test_a_batchs_every_write_carries_its_rates_derived_tolerance() -> None:
    # Given a batch under a rate paced with a burst, its scope busy until 0.2 s from now
    tolerance = QUOTA.pacing().tolerance_seconds
    assert tolerance > 0.2
    limiter = _GcraWithTolerance()
    limiter.tat["s"] = NOW + 0.2
    batch = _batch(Policy(name="exports", quota=QUOTA), limiter)
    slots = batch.slots  # type: ignore[attr-defined]
    # When it reserves a block, restocks, and gives up a late call's slot
    _, decision = slots.reserve("s", QUOTA.interval_seconds, 60.0, object())
    slots.forget("s")  # nothing banked: the restock and the spent slot write again
    slots.restock("s", QUOTA.interval_seconds, 60.0)
    slots.forget("s")
    slots.spend_one("s", QUOTA.interval_seconds, QUOTA.period_seconds)
    # Then each write carried the tolerance, and the first call goes now, not after the backlog
    assert limiter.tolerances == [tolerance] * 3
    assert isinstance(decision, Grant)
    assert decision.slot_at == NOW


def test_a_rate_without_burst_reserves_with_none() -> None:
    limiter = _GcraWithTolerance()
    batch = _batch(Policy(name="exports", quota=QUOTA.model_copy(update={"burst": 0})), limiter)

    batch.slots.reserve("s", QUOTA.interval_seconds, 60.0, object())  # type: ignore[attr-defined]

    assert limiter.tolerances == [0.0]


def test_a_paired_batch_writes_its_own_rate_without_a_tolerance() -> None:
    # A paired batch's own rate writes (a lease waiter's block) carry none: the rule is not
    # shown for paired limits
    limiter = _GcraWithTolerance()
    slots = BatchSlots(
        limiter,  # type: ignore[arg-type]
        4,
        {"s": 40},
        lambda: NOW,
        _Sink(),
        paired=PairedLimits("app:all", 0.01),
        tolerance_seconds=0.3,
    )
    slots.restock("s", QUOTA.interval_seconds, 60.0)

    assert limiter.tolerances == [0.0]


@pytest.mark.parametrize("paired", [None, PairedLimits("app:all", 0.01)])
def test_a_late_calls_slots_in_several_limits_carry_the_tolerance_unless_paired(
    paired: PairedLimits | None,
) -> None:
    # Given a call held by two rates, its batch's limits paired or not
    limiter = _GcraWithTolerance()
    ticket = SimpleNamespace(
        slots=SimpleNamespace(paired=paired),
        abilities=SimpleNamespace(several=limiter),
        rates=lambda: [("store:1", QUOTA), ("app", QUOTA)],
    )
    # When its request left late and a slot of each limit is spent without a call
    EveryLimit(ticket)._spend_in_every_limit()  # type: ignore[arg-type]
    # Then each carried its rate's tolerance; as paired limits' fallback, none
    tolerance = 0.0 if paired else QUOTA.pacing().tolerance_seconds
    assert limiter.tolerances == [tolerance, tolerance]


def test_several_limits_each_reserve_with_their_own_tolerance() -> None:
    # Given a store busy until 0.8 s from now with 1 s of tolerance, and an idle app
    limiter = _GcraWithTolerance()
    limiter.tat["store:1"] = NOW + 0.8
    store, app = LimitAsk("store:1", 0.5, 1.0), LimitAsk("app", 0.1, 0.0)
    # When a call asks for a slot of each
    got = reserve_all(limiter, [store, app], 60.0, 0.02, now=NOW)
    # Then the store's tolerance lets it go now, not after the store's backlog
    assert not isinstance(got, Denial)
    assert got.send_at == NOW
    assert limiter.tolerances == [1.0, 0.0]

"""The in-flight budget's arithmetic (sweeper.producer.backpressure); the ledger's side is
integration."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from sweeper.config import ConsumerConfig, Policy, Quota
from sweeper.ledger.rows import Settled
from sweeper.producer.backpressure import (
    achieved_rate,
    floor,
    in_flight_budget,
    republish_delay_seconds,
    window_seconds,
)

T0 = datetime(2026, 11, 29, 2, 0, tzinfo=UTC)
#: 40/s for a 120 s lease: the quota's formula is 2,400, the window 60 s, the floor 150.
POLICY = Policy(
    name="exports",
    quota=Quota(limit=40, period_seconds=1, headroom=1.0),
    lease_seconds=120,
    consumer=ConsumerConfig(timeout_seconds=30),
)


def settled(count: int, span_seconds: float) -> Settled:
    return Settled(count, T0, T0 + timedelta(seconds=span_seconds))


def test_the_window_is_half_a_lease_and_the_floor_a_sixteenth_of_the_formula() -> None:
    assert (POLICY.max_in_flight, window_seconds(POLICY), floor(POLICY)) == (2400, 60.0, 150)


def test_the_floor_is_at_least_one_batch_per_environment_and_at_most_the_formula() -> None:
    wide = POLICY.model_copy(
        update={"consumer": ConsumerConfig(reserved_concurrency=20, max_concurrency=20)}
    )
    assert floor(wide) == 200
    tiny = Policy(
        name="tiny", quota=Quota(limit=1, period_seconds=1, headroom=1.0), lease_seconds=20
    )
    assert (tiny.max_in_flight, floor(tiny)) == (10, 10)


def test_the_rate_is_over_the_span_of_the_settlements_not_the_whole_window() -> None:
    # 300 settled within 10 s of a 60 s window: the consumers reach 30/s while they have work
    assert achieved_rate(POLICY, settled(300, 10)) == 30.0
    # a burst in one instant is spread over a tenth of the window at least
    assert achieved_rate(POLICY, settled(60, 0)) == 10.0
    assert achieved_rate(POLICY, Settled(0, None, None)) == 0.0


def test_the_budget_is_the_achieved_rate_over_half_a_lease_between_floor_and_formula() -> None:
    assert in_flight_budget(POLICY, settled(300, 60)).limit == 300  # 5/s x 60 s
    assert in_flight_budget(POLICY, settled(300, 60)).reason == "achieved"
    assert in_flight_budget(POLICY, settled(10, 60)).limit == 150
    assert in_flight_budget(POLICY, settled(10, 60)).reason == "floor"
    assert in_flight_budget(POLICY, Settled(0, None, None)).limit == 150
    assert in_flight_budget(POLICY, settled(4000, 60)).limit == 2400
    assert in_flight_budget(POLICY, settled(4000, 60)).reason == "quota"


def test_a_reclaim_waits_out_the_visibility_timeout_beyond_the_lease() -> None:
    # consumers time out at 30 s: messages stay hidden 180 s, 60 s beyond the 120 s lease
    assert republish_delay_seconds(POLICY) == 60
    # the default: 360 s of visibility within a 900 s lease, no wait
    assert republish_delay_seconds(Policy(name="exports")) == 0

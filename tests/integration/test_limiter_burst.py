"""The shared limiter with a burst tolerance (the GCRA's tau), against DynamoDB (moto server).

A reservation at `now` gets `max(tat - tau, now)` and moves `tat` to `max(tat, now) + interval`:
slots left unused for up to tau are granted late, at once, and never more than the rule of
sweeper.pacing_rule lets into any window. Every clock here is frozen and the lead cut to nothing
(a slack of the longest lead), so each slot is exact to the microsecond.
"""

from __future__ import annotations

import random
from typing import Any

import pytest

from sweeper.config import Quota
from sweeper.limiter import MAX_LEAD_SECONDS, Denial, DynamoLimiter, Grant
from sweeper.pacing_rule import US
from sweeper_local.aws import LocalAws
from tests.vendor_counters import burst_calls, refused_by_sliding_window

pytestmark = pytest.mark.integration

T = 1_700_000_000.0
NO_LEAD = MAX_LEAD_SECONDS  # a slack this long cuts any lead to nothing: "now" is the clock


def frozen(start: float = T) -> tuple[list[float], Any]:
    now = [start]
    return now, lambda: now[0]


def slot(decision: Grant | Denial) -> float:
    assert isinstance(decision, Grant), decision
    return round(decision.slot_at - T, 6)


def test_after_an_idle_gap_burst_plus_one_slots_are_granted_at_once(
    local_aws: LocalAws, table: str
) -> None:
    # Given an idle scope at 10/s with a tolerance of three intervals, asked at a frozen moment
    now, clock = frozen()
    limiter = DynamoLimiter(local_aws.dynamodb(), table, clock=clock)

    def take(scope: str, tolerance: float) -> float:
        return slot(limiter.reserve(scope, 0.1, 5.0, slack=NO_LEAD, tolerance=tolerance))

    # When five slots are asked for at once
    # Then the first four (the burst of three, and one) are now, the fifth an interval later
    assert [take("burst", 0.3) for _ in range(5)] == [0, 0, 0, 0, 0.1]
    # And after an idle gap longer than the tolerance the burst is there again
    now[0] = T + 2
    assert [take("burst", 0.3) for _ in range(5)] == [2, 2, 2, 2, 2.1]
    # While without a tolerance (today's limiter) they are spaced from the first
    assert [take("spaced", 0.0) for _ in range(5)] == [2, 2.1, 2.2, 2.3, 2.4]


def test_a_scope_behind_by_part_of_the_tolerance_grants_only_that_part_at_once(
    local_aws: LocalAws, table: str
) -> None:
    # Given a scope at 10/s, tolerance 0.3 s, whose burst was used up at T (next slot T + 0.1)
    now, clock = frozen()
    limiter = DynamoLimiter(local_aws.dynamodb(), table, clock=clock)
    for _ in range(5):
        limiter.reserve("part", 0.1, 5.0, slack=NO_LEAD, tolerance=0.3)
    # When 0.45 s pass without a reservation (the slots at T + 0.2, 0.3 and 0.4 unused)
    now[0] = T + 0.45
    taken = [
        slot(limiter.reserve("part", 0.1, 5.0, slack=NO_LEAD, tolerance=0.3)) for _ in range(4)
    ]
    # Then the three that went by are granted now, the next at its own time
    assert taken == [0.45, 0.45, 0.45, 0.5]


def test_a_block_takes_the_tolerance_for_its_first_slot_and_keeps_its_spacing(
    local_aws: LocalAws, table: str
) -> None:
    # Given a scope at 10/s with a tolerance of 0.3 s, one slot taken at T
    _, clock = frozen()
    limiter = DynamoLimiter(local_aws.dynamodb(), table, clock=clock)
    limiter.reserve("blk", 0.1, 5.0, slack=NO_LEAD, tolerance=0.3)
    # When a block of three is asked for at the same moment (the busy path)
    block = limiter.reserve("blk", 0.1, 5.0, count=3, slack=NO_LEAD, tolerance=0.3)
    # Then it starts now, one interval apart, and the scope's tat moved on by three intervals
    assert isinstance(block, Grant)
    assert (slot(block), block.count, round(block.interval, 6)) == (0, 3, 0.1)
    assert limiter.state("blk").next_slot_at == pytest.approx(T + 0.4, abs=1e-6)


def test_the_horizon_counts_the_tolerance(local_aws: LocalAws, table: str) -> None:
    # Given a scope at 2/s with a tolerance of 0.3 s whose tat is a second ahead
    _, clock = frozen()
    limiter = DynamoLimiter(local_aws.dynamodb(), table, clock=clock)
    for _ in range(2):
        limiter.reserve("far", 0.5, 5.0, slack=NO_LEAD, tolerance=0.3)
    assert limiter.state("far").next_slot_at == pytest.approx(T + 1.0, abs=1e-6)
    # When a consumer asks with a horizon of 0.6 s, then of 0.8 s
    short = limiter.reserve("far", 0.5, 0.6, slack=NO_LEAD, tolerance=0.3)
    fits = limiter.reserve("far", 0.5, 0.8, slack=NO_LEAD, tolerance=0.3)
    # Then the next slot is tat - tau = T + 0.7: refused the first (back when it comes within
    # the horizon), granted the second
    assert isinstance(short, Denial)
    assert (round(short.retry_at - T, 6), short.reason) == (0.1, "rate")
    assert slot(fits) == 0.7


def test_a_slot_given_back_after_a_burst_is_granted_again(local_aws: LocalAws, table: str) -> None:
    # Given a scope at 10/s, tolerance 0.3 s: four slots at T, the fifth at T + 0.1
    _, clock = frozen()
    limiter = DynamoLimiter(local_aws.dynamodb(), table, clock=clock)
    taken = [
        slot(limiter.reserve("back", 0.1, 5.0, slack=NO_LEAD, tolerance=0.3)) for _ in range(5)
    ]
    assert taken == [0, 0, 0, 0, 0.1]
    # When the fifth is given back (the scope's tat goes one interval back)
    assert limiter.give_back("back", T + 0.1, 0.1)
    assert limiter.state("back").next_slot_at == pytest.approx(T + 0.4, abs=1e-6)
    # Then the next reservation gets that slot again, at its own time
    assert slot(limiter.reserve("back", 0.1, 5.0, slack=NO_LEAD, tolerance=0.3)) == 0.1
    assert limiter.give_back("back", T + 0.1, 0.1)
    again = limiter.reserve("back", 0.1, 5.0, slack=NO_LEAD, tolerance=0.3)
    assert slot(again) == 0.1
    # And a slot that is not the last one taken is not given back
    assert not limiter.give_back("back", T, 0.1)


def test_shared_reservations_at_the_derived_pacing_never_exceed_the_window(
    local_aws: LocalAws, table: str
) -> None:
    # Given 10 per second counted in a sliding window, paced at 0.6 of the default headroom
    # (the rest derived into a burst tolerance), and two consumers on one scope
    default = Quota(limit=10, period_seconds=1)
    quota = Quota(limit=10, period_seconds=1, headroom=round(default.safe_headroom * 0.6, 3))
    pacing = quota.pacing()
    assert burst_calls(pacing) >= 2
    now, clock = frozen()
    limiters = [DynamoLimiter(local_aws.dynamodb(), table, clock=clock) for _ in range(2)]
    chance = random.Random(42)
    slots: list[float] = []
    # When they reserve in any order, in blocks of one to three, at moments now together and
    # now an idle while apart, for about ten seconds of the rate
    for _ in range(50):
        now[0] += chance.choice([0.0, 0.0, pacing.interval_seconds, 0.4, 1.5])
        decision = chance.choice(limiters).reserve(
            "shared",
            pacing.interval_seconds,
            horizon=30.0,
            count=chance.randint(1, 3),
            slack=NO_LEAD,
            tolerance=pacing.tolerance_seconds,
        )
        assert isinstance(decision, Grant)
        slots += decision.slots
    # Then bursts were granted (slots at one moment) ...
    assert max(slots.count(at) for at in slots) >= 2
    # ... and no window of T, for calls arriving up to the budget after their slots, would
    # hold more than N: at most N slots in any window of T + a
    window = quota.period_seconds + quota.arrival_budget_seconds
    assert refused_by_sliding_window([round(s * US) / US for s in slots], 10, window) == []


def test_a_slot_another_consumer_reserved_after_is_not_given_back(
    local_aws: LocalAws, table: str
) -> None:
    # Given a consumer granted a slot of the burst, and another consumer a slot after it
    _, clock = frozen()
    mine, other = (DynamoLimiter(local_aws.dynamodb(), table, clock=clock) for _ in range(2))
    for _ in range(2):
        mine.reserve("kept", 0.1, 5.0, slack=NO_LEAD, tolerance=0.3)
    other.reserve("kept", 0.1, 5.0, slack=NO_LEAD, tolerance=0.3)
    # When the first gives its last slot back, before and after reading the scope
    assert not mine.give_back("kept", T, 0.1)
    mine.state("kept")
    assert not mine.give_back("kept", T, 0.1)
    # Then the other's slot stays taken: the tat is where the three reservations left it
    assert mine.state("kept").next_slot_at == pytest.approx(T + 0.3, abs=1e-6)

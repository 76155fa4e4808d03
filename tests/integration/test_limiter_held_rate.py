"""A rate the vendor stated, held on a scope's limiter item (`DynamoLimiter.hold_rate`): every
consumer reserves at it, and its next slot is the new interval after the last."""

from __future__ import annotations

import pytest

from sweeper.limiter import Adaptive, DynamoLimiter, Grant
from sweeper_local.aws import LocalAws

pytestmark = pytest.mark.integration

#: How a learned scope reserves (sweeper.admission.learned.learned_spec): never climbs alone.
HELD = Adaptive(floor=0.001, cap=100.0, increase=0.0, cut=1.0, cooldown=1.0)


def _slot(limiter: DynamoLimiter) -> float:
    grant = limiter.reserve("scope-a", 1.0, horizon=5.0, adaptive=HELD)
    assert isinstance(grant, Grant)
    return grant.slot_at


def test_a_held_rate_spaces_the_next_slot_by_the_new_interval_for_every_consumer(
    local_aws: LocalAws, table: str
) -> None:
    # Given a scope started at 1 call a second, and one slot taken
    one, other = (DynamoLimiter(local_aws.dynamodb(), table) for _ in range(2))
    assert one.hold_rate("scope-a", 1.0, unset_only=True)
    first = _slot(one)
    # When the vendor states 10 a second: the next slot is a tenth of a second after the last
    assert one.hold_rate("scope-a", 10.0)
    raised = _slot(one)
    assert raised - first == pytest.approx(0.1, abs=0.002)
    # When it then states 2 a second: half a second after the last, for another consumer too
    assert one.hold_rate("scope-a", 2.0)
    lowered = _slot(other)
    assert lowered - raised == pytest.approx(0.5, abs=0.002)
    # And a start asked again, or a rate within the share held, writes nothing
    writes = one.writes
    assert not one.hold_rate("scope-a", 50.0, unset_only=True)
    assert not one.hold_rate("scope-a", 2.01, within=0.01)
    assert one.writes == writes


def test_a_rate_held_only_from_the_start_is_not_written_once_another_was_learned(
    local_aws: LocalAws, table: str
) -> None:
    # Given a scope started at 1 call a second by one consumer
    one, other = (DynamoLimiter(local_aws.dynamodb(), table) for _ in range(2))
    assert one.hold_rate("scope-a", 1.0, unset_only=True)
    # When another consumer learns 10 a second, and the first is told to leave the start
    assert other.hold_rate("scope-a", 10.0)
    assert not one.hold_rate("scope-a", 50.0, only_from=1.0)
    # Then the learned rate stands: the next slot is a tenth of a second after the last
    first = _slot(other)
    assert _slot(other) - first == pytest.approx(0.1, abs=0.002)
    # And from the start itself the scope is raised
    assert one.hold_rate("scope-b", 1.0, unset_only=True)
    assert one.hold_rate("scope-b", 50.0, only_from=1.0)
    assert not one.hold_rate("scope-b", 60.0, only_from=1.0)


def test_what_the_vendor_stated_rides_on_the_write_that_holds_the_rate(
    local_aws: LocalAws, table: str
) -> None:
    # Given a scope started at 1 call a second
    one, other = (DynamoLimiter(local_aws.dynamodb(), table) for _ in range(2))
    assert one.hold_rate("scope-a", 1.0, unset_only=True)
    # When a shared quota's pace of 6 a second is held under the vendor's statement of 10
    writes = one.writes
    assert one.hold_rate("scope-a", 6.0, stated=10.0)
    # Then it is the one write that holds the rate, and another consumer reading the item
    # knows both: what the others' spend left and what the vendor allows
    assert one.writes == writes + 1
    other.state("scope-a")
    held = other.held_rate("scope-a")
    assert held is not None
    assert (held.rate, held.stated) == (6.0, 10.0)
    # And a rate held with no statement beside it leaves none of the one before
    assert one.hold_rate("scope-a", 8.0)
    other.state("scope-a")
    again = other.held_rate("scope-a")
    assert again is not None
    assert (again.rate, again.stated) == (8.0, None)

"""The last look's rule (sweeper.admission.learned `lowered_since`): a slot granted at one held
rate is given up when the rate held now is a lowering the old pace would overspend. For a
quota others spend too, the held rate moves with their spend as well; the item records what
the vendor's own statement allowed beside it, and only that counts.

Each case is two readings of a scope's item, one when the slot was granted and one at the
last look: `HeldRate(rate, version, stated)`, rates in calls per second, headroom applied.
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from sweeper.admission.learned import lowered_since
from sweeper.limiter.held import HeldRate

HEADROOM = 0.95
#: Granted under a vendor stating 50 a second; the others' spend held the pace at 40.
GRANTED = HeldRate(40 * HEADROOM, 3, stated=50 * HEADROOM)


def test_a_shared_quotas_vendor_lowering_below_the_old_pace_gives_the_slot_up() -> None:
    # When the vendor now states 20 a second (below the 38 the slot was paced at)
    now = HeldRate(20 * HEADROOM, 4, stated=20 * HEADROOM)
    # Then the slot is given up
    assert lowered_since(GRANTED, now, HEADROOM, shared=True)


def test_a_shared_pace_moved_by_the_others_spend_alone_keeps_the_slot() -> None:
    # When the others spent more: the pace held halves, the vendor still states 50 a second
    now = HeldRate(20 * HEADROOM, 4, stated=50 * HEADROOM)
    # Then the slot is spent (the reserve's gate bounds the others' spend)
    assert not lowered_since(GRANTED, now, HEADROOM, shared=True)


def test_a_shared_rate_held_with_no_statement_keeps_the_slot() -> None:
    # When a write that records no statement (a cut, a start) lowered the rate held
    now = HeldRate(20 * HEADROOM, 4)
    # Then nothing says the vendor moved it: the slot is spent
    assert not lowered_since(GRANTED, now, HEADROOM, shared=True)


def test_a_shared_vendor_lowering_the_old_pace_still_fits_keeps_the_slot() -> None:
    # When the vendor lowers to 39 a second: the old pace of 38 is within what it allows
    now = HeldRate(39 * HEADROOM, 4, stated=39 * HEADROOM)
    assert not lowered_since(GRANTED, now, HEADROOM, shared=True)


def test_a_quota_of_its_own_gives_the_slot_up_on_the_rate_held() -> None:
    # Given a quota sweeper has alone: the rate held is the vendor's statement
    granted = HeldRate(50 * HEADROOM, 3)
    # Then a lowering below the old pace gives the slot up, one within the headroom does not
    assert lowered_since(granted, HeldRate(20 * HEADROOM, 4), HEADROOM, shared=False)
    assert not lowered_since(granted, HeldRate(49 * HEADROOM, 4), HEADROOM, shared=False)
    # And a rate no newer than the one granted changes nothing
    assert not lowered_since(granted, HeldRate(20 * HEADROOM, 3), HEADROOM, shared=False)


RATES = st.floats(0.001, 1_000)


@given(RATES, RATES, st.floats(1.0, 10.0), st.floats(0.001, 1_000), st.floats(0.5, 1.0))
def test_a_shared_slot_is_never_given_up_while_the_vendor_has_not_lowered(
    pace: float, stated: float, raised_by: float, moved: float, headroom: float
) -> None:
    # Given a slot paced at most at what the vendor stated (the share never passes it)
    granted = HeldRate(min(pace, stated), 1, stated=stated)
    # When a newer write holds any pace while the vendor states as much or more
    now = HeldRate(moved, 2, stated=stated * raised_by)
    # Then the slot is spent
    assert not lowered_since(granted, now, headroom, shared=True)

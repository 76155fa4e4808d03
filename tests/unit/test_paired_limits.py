"""Two limits planned on one item (sweeper.limiter.paired): whatever the item holds and the
batch wants, each limit's slots keep their spacing and no slot is earlier than allowed."""

from __future__ import annotations

import itertools
import random
from collections import Counter

from hypothesis import event, given, settings
from hypothesis import strategies as st

from sweeper.limiter import Denial
from sweeper.limiter.paired import MAX_HOLES, Block, SharedItem, Want, plan_block

US = 1_000_000
REAL = 1_000 * US
LEAD = 50_000

keys = st.sampled_from(["s0", "s1", "s2", "s3", "s4"])


@st.composite
def cases(draw: st.DrawFn) -> tuple[SharedItem, int, list[Want], int, int, int]:
    wide_step = draw(st.integers(5_000, 200_000))
    narrow_step = draw(st.integers(wide_step, 2 * US))
    names = draw(st.lists(keys, min_size=1, max_size=5, unique=True))
    wants = [Want(k, narrow_step, draw(st.integers(1, 4))) for k in names]
    offset = st.integers(-US, 2 * US)
    hole = st.tuples(st.integers(-US, 2 * US), st.integers(0, 300_000)).map(
        lambda h: (REAL + h[0], REAL + h[0] + h[1])
    )
    tat = REAL + draw(offset)
    # holes lie before the tat, a step short of it (as plan_block leaves them)
    holes = [(a, b) for a, b in draw(st.lists(hole, max_size=4)) if b <= tat - wide_step]
    item = SharedItem(
        version=draw(st.integers(0, 5)),
        tat=tat,
        next_free={k: REAL + draw(offset) for k in draw(st.lists(keys, max_size=5))},
        closed={k: REAL + draw(offset) for k in draw(st.lists(keys, max_size=2))},
        closed_until=draw(st.sampled_from([0, REAL + US])),
        holes=tuple(sorted(holes)),
    )
    horizon = draw(st.integers(100_000, 3 * US))
    span = draw(st.integers(0, 500_000))
    most = draw(st.integers(1, 12))
    return item, wide_step, wants, horizon, span, most


@settings(max_examples=400, deadline=None)
@given(cases())
def test_every_planned_slot_keeps_both_limits(
    case: tuple[SharedItem, int, list[Want], int, int, int],
) -> None:
    item, wide_step, wants, horizon, span, most = case
    now = REAL + LEAD
    plan = plan_block(
        item, wide_step, wants, real=REAL, now=now, horizon=horizon, span=span, most=most
    )
    if isinstance(plan, Denial):
        assert plan.retry_at * US >= REAL - 1
        return
    assert isinstance(plan, Block)
    times = [at for _, at in plan.slots]
    assert 1 <= len(times) <= most
    # The wide limit: in order, a step apart, from the lead on, from its tat or in one of its
    # holes, within the horizon
    assert times[0] >= now
    assert all(t >= item.tat or any(a <= t <= b for a, b in item.holes) for t in times)
    assert all(b - a >= wide_step for a, b in itertools.pairwise(times))
    assert times[-1] <= REAL + horizon
    assert times[-1] - times[0] <= span
    main = [t for t in times if t >= item.tat]
    assert plan.tat == (main[-1] + wide_step if main else item.tat)
    # Each narrow key: from its next free time, a step apart, within what the batch wants,
    # never while its gate or the wide gate is closed
    assert item.closed_until <= now
    step = wants[0].step
    for want in wants:
        mine = [at for key, at in plan.slots if key == want.key]
        assert len(mine) <= want.count
        if not mine:
            continue
        assert mine[0] >= item.next_free.get(want.key, 0)
        assert all(b - a >= step for a, b in itertools.pairwise(mine))
        assert item.closed.get(want.key, 0) <= now
        assert plan.next_free[want.key] == mine[-1] + step
    # The asker is told when to come back if it got no slot
    asker_slots = [at for key, at in plan.slots if key == wants[0].key]
    assert (plan.asker is None) == bool(asker_slots)


def test_a_block_gives_the_wide_slots_to_the_keys_whose_turn_has_come() -> None:
    # Given an app at 10 ms per slot and stores at 0.5 s, store s1 used 0.2 s ago
    item = SharedItem(version=3, tat=REAL, next_free={"s1": REAL + 300_000})
    wants = [Want("s0", 500_000, 1), Want("s1", 500_000, 1), Want("s2", 500_000, 2)]
    # When a block of up to 5 is planned within 0.2 s
    plan = plan_block(
        item, 10_000, wants, real=REAL, now=REAL + LEAD, horizon=US, span=200_000, most=5
    )
    # Then s0 (asking) and s2 take the next two app slots; s1 and s2's second are not due
    assert isinstance(plan, Block)
    assert plan.slots == (("s0", REAL + LEAD), ("s2", REAL + LEAD + 10_000))
    assert plan.asker is None
    assert plan.tat == REAL + LEAD + 20_000


def test_a_closed_gate_is_a_denial_without_a_write() -> None:
    wants = [Want("s0", 500_000, 1)]
    wide_closed = SharedItem(closed_until=REAL + US, reason="throttled")
    store_closed = SharedItem(closed={"s0": REAL + 2 * US})
    for item, until in ((wide_closed, REAL + US), (store_closed, REAL + 2 * US)):
        plan = plan_block(
            item, 10_000, wants, real=REAL, now=REAL + LEAD, horizon=US, span=0, most=1
        )
        assert plan == Denial(until / US, "throttled")


def test_a_due_slot_goes_to_the_key_with_the_most_records_left() -> None:
    # Given a batch with one record of s0 (asking) and of s1, and three of s2, all free
    wants = [Want("s0", 500_000, 1), Want("s1", 500_000, 1), Want("s2", 500_000, 3)]
    # When a block of two is planned
    plan = plan_block(
        SharedItem(), 10_000, wants, real=REAL, now=REAL + LEAD, horizon=US, span=200_000, most=2
    )
    # Then the asker and s2, the store with the most records left, take them: its records are
    # not left to the batch's end, when they would wait for their store's turns one by one
    assert isinstance(plan, Block)
    assert [key for key, _ in plan.slots] == ["s0", "s2"]


def test_of_keys_with_as_many_records_left_the_one_free_the_longest_goes_first() -> None:
    # Given stores at 2/s, s1 last reserved (by any batch) 0.6 s ago and s2 0.9 s ago
    item = SharedItem(next_free={"s1": REAL - 100_000, "s2": REAL - 400_000})
    wants = [Want("s0", 500_000, 1), Want("s1", 500_000, 2), Want("s2", 500_000, 2)]
    # When a block of two is planned
    plan = plan_block(
        item, 10_000, wants, real=REAL, now=REAL + LEAD, horizon=US, span=200_000, most=2
    )
    # Then s2's turn comes first: batches that list their stores in one order spread their
    # calls over every store, rather than all taking the first stores of that order
    assert isinstance(plan, Block)
    assert [key for key, _ in plan.slots] == ["s0", "s2"]


def test_batches_sharing_the_item_end_at_the_app_pace_not_on_their_last_stores() -> None:
    # Given four batches of 100 records, five for each of 20 stores (2/s each) in one order,
    # under an app limit of 30/s: each batch in turn plans a block (up to six slots within
    # 0.2 s) for its next record in that order and for the records of other stores
    stores = [f"s{i:02d}" for i in range(20)]
    records = [[store for _ in range(5) for store in stores] for _ in range(4)]
    item = SharedItem()
    real = REAL
    planned: list[int] = []
    # When they plan every record
    while any(records):
        for batch in records:
            if not batch:
                continue
            left = Counter(batch)
            wants = [Want(batch[0], US // 2, left[batch[0]])]
            wants += [Want(s, US // 2, n) for s, n in left.items() if s != batch[0]]
            plan = plan_block(
                item,
                US // 30,
                wants,
                real=real,
                now=real + LEAD,
                horizon=2 * US,
                span=200_000,
                most=6,
            )
            if isinstance(plan, Denial):
                continue
            for key, at in plan.slots:
                batch.remove(key)  # that store's first record in the batch's order
                planned.append(at)
            item = SharedItem(
                version=item.version + 1,
                tat=plan.tat,
                next_free={**item.next_free, **plan.next_free},
            )
        real = max(real + 10_000, item.tat - LEAD)  # the clock moves on with the app's slots
    # Then the 400 calls take less than one store turn (0.5 s) beyond the app's pace: their
    # last records are spread over the stores, not queued on the last stores of the order at
    # 2/s each while the app's slots go unused (measured: 14.2 s when every batch preferred
    # the stores in its order, 13.7 s now; the app's pace is 13.3 s)
    assert max(planned) - min(planned) < 400 * US // 30 + US // 2


def _after(item: SharedItem, plan: Block) -> SharedItem:
    """The item after the block's write (as the limiter writes it)."""
    return SharedItem(
        version=item.version + 1,
        tat=plan.tat,
        next_free={**item.next_free, **plan.next_free},
        has_tat=True,
        holes=plan.holes,
    )


def test_a_store_is_booked_in_the_gap_a_block_left_on_a_slack_app() -> None:
    # Given a slack app (10 ms per slot) and stores at 0.2 s; s1 is next free 0.15 s from now
    now = REAL + LEAD
    item = SharedItem(version=1, tat=REAL, next_free={"s1": now + 150_000}, has_tat=True)

    # When one batch, with only s1's records left, books its slot: its block jumps ahead to s1
    def book(item: SharedItem, store: str) -> Block | Denial:
        # one slot for `store` (0.2 s apart) on an app of 10 ms slots
        wants = [Want(store, 200_000, 1)]
        return plan_block(item, 10_000, wants, real=REAL, now=now, horizon=US, span=200_000, most=3)

    first = book(item, "s1")
    assert isinstance(first, Block)
    assert first.slots == (("s1", now + 150_000),)
    assert first.tat == now + 160_000
    # Then the app's times it skipped are kept as a hole, a step short of s1's slot
    assert first.holes == ((now, now + 140_000),)
    # And another batch, asking for s0 (free) at the same time, is booked in that gap, not
    # after s1's slot: the app's slack is used, not lost
    second = book(_after(item, first), "s0")
    assert isinstance(second, Block)
    assert second.slots == (("s0", now),)
    # And the hole is split around the slot by the app's step; the app's tat has not moved
    assert second.holes == ((now + 10_000, now + 140_000),)
    assert second.tat == now + 160_000


def test_a_hole_ending_before_the_real_time_is_dropped_and_the_fewest_slots_go_first() -> None:
    step = 10_000
    # Given an item with a hole past, and more holes than the item keeps
    past = (REAL - 50_000, REAL - 1)
    many = [(REAL + US + i * 100_000, REAL + US + i * 100_000 + (i % 3) * step) for i in range(20)]
    item = SharedItem(version=1, tat=REAL + 4 * US, has_tat=True, holes=(past, *many))
    # When a block is planned for a key not free until after every hole
    plan = plan_block(
        item,
        step,
        [Want("s0", 200_000, 1)],
        real=REAL,
        now=REAL + LEAD,
        horizon=5 * US,
        span=200_000,
        most=1,
    )
    assert isinstance(plan, Block)
    # Then the past hole is gone, MAX_HOLES are kept, and those kept hold the most slots
    assert past not in plan.holes
    assert len(plan.holes) == MAX_HOLES
    assert min(b - a for a, b in plan.holes) >= max(
        b - a for a, b in many if (a, b) not in plan.holes
    )
    assert list(plan.holes) == sorted(plan.holes)


blocks = st.lists(
    st.tuples(
        st.lists(keys, min_size=1, max_size=5, unique=True),  # the batch's keys, asker first
        st.integers(1, 4),  # slots wanted per key
        # time passing before the block: often none (batches planning side by side)
        st.one_of(st.just(0), st.integers(0, 50_000), st.integers(0, 400_000)),
        st.sampled_from([0, 20_000, 50_000, 250_000]),  # the planning process's lead
        st.integers(0, 400_000),  # span
        st.integers(1, 8),  # most
    ),
    min_size=1,
    max_size=40,
)


@settings(max_examples=400, deadline=None)
@given(
    st.integers(5_000, 50_000),
    st.dictionaries(keys, st.integers(20_000, 600_000), min_size=5),
    blocks,
    st.randoms(use_true_random=False),
)
def test_blocks_booked_through_holes_keep_every_limit_spaced(
    wide_step: int,
    narrow_steps: dict[str, int],
    sequence: list[tuple[list[str], int, int, int, int, int]],
    rng: random.Random,
) -> None:
    # Given blocks planned one after another on one item, each from the item as the last
    # write left it, by planners whose leads differ (so holes open, are used and split)
    item = SharedItem()
    real = REAL
    wide: list[int] = []
    narrow: dict[str, list[int]] = {}
    for names, count, elapsed, lead, span, most in sequence:
        real += elapsed
        now = real + lead
        wants = [Want(k, narrow_steps[k], rng.randint(1, count)) for k in names]
        plan = plan_block(
            item, wide_step, wants, real=real, now=now, horizon=2 * US, span=span, most=most
        )
        if isinstance(plan, Denial):
            continue
        for key, at in plan.slots:
            # every slot at or after its planner's now, within the horizon
            assert now <= at <= real + 2 * US
            if at < item.tat:
                event("a slot booked in a hole")
            wide.append(at)
            narrow.setdefault(key, []).append(at)
        # every hole lies before the tat and ends at or after the real time
        assert all(a <= b < plan.tat and b >= real for a, b in plan.holes)
        item = _after(item, plan)
    # Then every pair of the wide limit's slots is at least its step apart, whichever block
    # (and hole) each came from, and every key's slots at least the key's step apart
    wide.sort()
    assert all(b - a >= wide_step for a, b in itertools.pairwise(wide))
    for key, times in narrow.items():
        times.sort()
        assert all(b - a >= narrow_steps[key] for a, b in itertools.pairwise(times)), key

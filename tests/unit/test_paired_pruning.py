"""The paired item is kept small (sweeper.limiter.paired): a store whose next free time and
gate are past is removed in a block's write, and that changes no reservation's time."""

from __future__ import annotations

from collections.abc import Sequence

from hypothesis import given, settings
from hypothesis import strategies as st

from sweeper.limiter import Denial
from sweeper.limiter.paired import (
    MAX_HOLES,
    PRUNE_MARGIN_SECONDS,
    PRUNE_PER_WRITE,
    SAFE_ITEM_BYTES,
    Block,
    SharedItem,
    Want,
    grown_bytes,
    item_bytes,
    plan_block,
    stale_keys,
)

US = 1_000_000
START = 1_000 * US
WIDE_STEP = 25_000  # 40/s for the app
NARROW_STEP = 500_000  # 2/s per store
HORIZON = 2 * US
SPAN = 200_000


def _written(item: SharedItem, plan: Block, removed: Sequence[str]) -> SharedItem:
    """The item after a block's write that also removes `removed` (as the limiter writes it)."""
    gone = set(removed)
    return SharedItem(
        version=item.version + 1,
        tat=plan.tat,
        closed_until=item.closed_until,
        next_free={
            **{k: t for k, t in item.next_free.items() if k not in gone},
            **plan.next_free,
        },
        closed={k: t for k, t in item.closed.items() if k not in gone},
        has_tat=True,
        holes=plan.holes,
    )


def _closed(item: SharedItem, key: str, until: int) -> SharedItem:
    return SharedItem(
        version=item.version,
        tat=item.tat,
        closed_until=item.closed_until,
        next_free=item.next_free,
        closed={**item.closed, key: max(until, item.closed.get(key, 0))},
        has_tat=item.has_tat,
        holes=item.holes,
    )


def _reserve(
    item: SharedItem, wants: list[Want], real: int, lead: int, prune: bool
) -> tuple[SharedItem, Block | Denial]:
    plan = plan_block(
        item,
        WIDE_STEP,
        wants,
        real=real,
        now=real + lead,
        horizon=HORIZON,
        span=SPAN,
        most=8,
    )
    if isinstance(plan, Denial):
        return item, plan
    cut = real - int(PRUNE_MARGIN_SECONDS * US)
    removed = stale_keys(item, cut, set(plan.next_free), PRUNE_PER_WRITE) if prune else []
    return _written(item, plan, removed), plan


def test_after_many_stores_go_idle_the_item_holds_only_the_active_ones() -> None:
    # Given 300 stores each called once, one after the other, 0.1 s apart
    item = SharedItem()
    real = START
    for n in range(300):
        item, plan = _reserve(item, [Want(f"store-{n}", NARROW_STEP, 1)], real, 50_000, True)
        assert isinstance(plan, Block)
        real += 100_000
    # When two stores stay busy for 30 s more
    for _ in range(150):
        for key in ("busy-a", "busy-b"):
            item, _ = _reserve(item, [Want(key, NARROW_STEP, 1)], real, 50_000, True)
        real += 200_000
    # Then the idle stores are gone from the item: only the busy ones are left
    assert set(item.next_free) == {"busy-a", "busy-b"}
    assert item.closed == {}
    assert item_bytes(item) < 1_000


def test_a_store_closed_into_the_future_keeps_its_gate_and_is_removed_after_it() -> None:
    item = SharedItem()
    item, _ = _reserve(item, [Want("shut", NARROW_STEP, 1)], START, 50_000, True)
    item = _closed(item, "shut", START + 10 * US)
    # Busy elsewhere for 5 s: its gate is still closed, so it stays
    real = START
    for _ in range(25):
        real += 200_000
        item, _ = _reserve(item, [Want("other", NARROW_STEP, 1)], real, 50_000, True)
    assert item.closed == {"shut": START + 10 * US}
    assert isinstance(
        plan_block(
            item,
            WIDE_STEP,
            [Want("shut", NARROW_STEP, 1)],
            real=real,
            now=real,
            horizon=HORIZON,
            span=SPAN,
            most=1,
        ),
        Denial,
    )
    # Past its closure and the margin: removed
    for _ in range(40):
        real += 200_000
        item, _ = _reserve(item, [Want("other", NARROW_STEP, 1)], real, 50_000, True)
    assert "shut" not in item.closed
    assert "shut" not in item.next_free


def test_a_write_that_would_grow_a_full_item_is_told_by_its_size() -> None:
    many = {f"store-{n:06d}": START + US for n in range(12_000)}
    full = SharedItem(next_free=many)
    assert item_bytes(full) > SAFE_ITEM_BYTES
    # A new store grows it; a store already there does not; pruning shrinks it
    assert grown_bytes(full, {"new"}, []) > item_bytes(full)
    assert grown_bytes(full, {"store-000001"}, []) == item_bytes(full)
    assert grown_bytes(full, {"new"}, ["store-000002", "store-000003"]) < item_bytes(full)
    # The wide limit's holes count too: writing more grows it, dropping them shrinks it
    holes = tuple((START + n * US, START + n * US + 1_000) for n in range(MAX_HOLES))
    assert grown_bytes(full, set(), [], holes) > item_bytes(full)
    holed = SharedItem(next_free=many, holes=holes)
    assert item_bytes(holed) > item_bytes(full)
    assert grown_bytes(holed, set(), [], ()) == item_bytes(full)


steps = st.lists(
    st.tuples(
        st.sampled_from(["reserve", "reserve", "reserve", "close"]),
        st.lists(st.sampled_from([f"s{n}" for n in range(8)]), min_size=1, max_size=4, unique=True),
        st.integers(0, 3 * US),  # time passing before the step
        st.integers(0, 250_000),  # the planning process's lead
        st.integers(1, 3),  # slots wanted per store
    ),
    min_size=1,
    max_size=60,
)


@settings(max_examples=300, deadline=None)
@given(steps)
def test_pruning_never_changes_any_reservation(
    sequence: list[tuple[str, list[str], int, int, int]],
) -> None:
    pruned, kept = SharedItem(), SharedItem()
    real = START
    for action, names, elapsed, lead, count in sequence:
        real += elapsed
        if action == "close":
            until = real + elapsed // 2
            pruned, kept = _closed(pruned, names[0], until), _closed(kept, names[0], until)
            continue
        wants = [Want(k, NARROW_STEP, count) for k in names]
        pruned, with_pruning = _reserve(pruned, wants, real, lead, True)
        kept, without = _reserve(kept, wants, real, lead, False)
        assert with_pruning == without
        assert pruned.tat == kept.tat
    assert set(pruned.next_free) <= set(kept.next_free)

"""The paired item stays small on DynamoDB (sweeper.limiter.paired): stores that went idle are
removed by the block writes themselves, and a write that would grow a full item is not made."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from sweeper.config import Policy
from sweeper.limiter import DynamoLimiter, paired_writes
from sweeper.limiter.items import ScopeItems
from sweeper.limiter.paired import (
    CLOSED_PREFIX,
    MAX_HOLES,
    NEXT_PREFIX,
    PairedItemFull,
    SharedItem,
    Want,
    item_bytes,
)
from sweeper_local.aws import LocalAws, provision
from tests.conftest import Pipeline
from tests.integration.test_consumer import publish_all
from tests.integration.test_parallel_calls import invoke
from tests.integration.test_throttle_routing import two_limits

pytestmark = pytest.mark.integration

WIDE = "app:app"
WIDE_INTERVAL = 0.025  # 40/s
STORE_STEP = 500_000  # 2/s per store, in µs
PINNED_LEAD = 0.02  # the limiters' lead, in s (see the hole test)


@pytest.fixture
def table(local_aws: LocalAws, unique_name: str) -> str:
    return provision(
        local_aws.sqs(), local_aws.dynamodb(), Policy(name="p"), prefix=unique_name
    ).limiter_table


class _Clock:
    def __init__(self) -> None:
        self.at = 2_000_000_000.0

    def __call__(self) -> float:
        return self.at


def _item(local_aws: LocalAws, table: str) -> dict[str, Any]:
    got = local_aws.dynamodb().get_item(
        TableName=table, Key={"pk": {"S": f"scope#{WIDE}"}}, ConsistentRead=True
    )
    item: dict[str, Any] = got["Item"]
    return item


def _stores(item: dict[str, Any]) -> set[str]:
    return {
        name.split("#", 1)[1]
        for name in item
        if name.startswith(NEXT_PREFIX) or name.startswith(CLOSED_PREFIX)
    }


def _reserve(limiter: DynamoLimiter, store: str) -> dict[str, list[float]]:
    slots, denial = limiter.reserve_paired(
        WIDE, WIDE_INTERVAL, [Want(store, STORE_STEP, 1)], 2.0, 0.2, 1
    )
    assert denial is None, store
    return slots


def test_five_hundred_stores_over_time_leave_the_app_item_small(
    local_aws: LocalAws, table: str
) -> None:
    # Given two consumers' limiters on one clock, 500 distinct stores called over 50 s
    clock = _Clock()
    limiters = [DynamoLimiter(local_aws.dynamodb(), table, clock=clock) for _ in range(2)]
    for n in range(500):
        _reserve(limiters[n % 2], f"store-{n:04d}")
        clock.at += 0.1
    # Then the item holds the stores called within about their period and the margin, not
    # every store it ever served
    item = _item(local_aws, table)
    stores = _stores(item)
    assert 0 < len(stores) <= 40, len(stores)
    assert "store-0499" in stores
    assert "store-0000" not in stores
    assert sum(len(name) + 21 for name in item) < 2_000


def test_a_write_that_would_grow_a_full_item_is_not_made_and_is_logged(
    local_aws: LocalAws,
    table: str,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    # Given an item holding three active stores, and a safe size it has reached
    clock = _Clock()
    limiter = DynamoLimiter(local_aws.dynamodb(), table, clock=clock)
    for store in ("s1", "s2", "s3"):
        _reserve(limiter, store)
    before = _item(local_aws, table)
    reached = item_bytes(SharedItem.parse(before))
    monkeypatch.setattr(paired_writes, "SAFE_ITEM_BYTES", reached)
    # When a fourth store asks: no write, the call is told to reserve its limits one by one,
    # and the wide key is logged with its outcome code
    with caplog.at_level(logging.WARNING), pytest.raises(PairedItemFull):
        _reserve(limiter, "s4")
    assert _item(local_aws, table) == before
    assert any(
        getattr(r, "code", None) == "paired_item_full" and getattr(r, "scope", None) == WIDE
        for r in caplog.records
    )
    # A store already on the item still gets its slot in one write
    clock.at += 1.0
    assert set(_reserve(limiter, "s1")) == {"s1"}


def test_a_call_whose_store_would_grow_a_full_item_holds_its_limits_one_by_one(
    pipeline: Pipeline, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # Given a policy whose two limits are paired on the app's item, and that item full
    p = two_limits(pipeline, monkeypatch, pipeline.vendor.url)
    monkeypatch.setattr(paired_writes, "SAFE_ITEM_BYTES", 0)
    p.seed(3, tenants=3)
    # When a batch runs
    with caplog.at_level(logging.WARNING):
        response = invoke(p, publish_all(p))
    # Then every call was made, each holding a slot of each limit on its own item (the app's
    # item took no store), and the full item was logged
    assert response == {"batchItemFailures": []}
    assert p.vendor.audit().effects_total == 3
    app = _item(p.aws, p.resources.limiter_table)
    assert _stores(app) == set()
    assert "tat" in app
    limiter = DynamoLimiter(p.aws.dynamodb(), p.resources.limiter_table)
    assert limiter.state("exports:tenant-0").next_slot_at is not None
    assert any(getattr(r, "code", None) == "paired_item_full" for r in caplog.records)


def test_a_gap_one_consumer_skipped_is_booked_by_another_and_the_holes_stay_few(
    local_aws: LocalAws, table: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given two consumers' limiters on one clock, a slack app (40/s) and stores at 2/s; s1 was
    # called 0.4 s ago (its next slot 0.1 s ahead). Their lead is pinned: a measured lead grows
    # with the very write that grants the slot, so a bound read after it would not be the one
    # the slot was planned with
    monkeypatch.setattr(ScopeItems, "lead", property(lambda _self: PINNED_LEAD))
    clock = _Clock()
    first, second = (DynamoLimiter(local_aws.dynamodb(), table, clock=clock) for _ in range(2))
    called = _reserve(first, "s1")["s1"][0]
    clock.at = called + 0.4
    # When the first asks for s1 alone: its slot is 0.1 s ahead, past several free app slots
    slots = _reserve(first, "s1")
    assert slots["s1"][0] == pytest.approx(called + 0.5, abs=1e-6)
    # Then the item keeps the app's skipped times as a hole (written in the same write)
    item = SharedItem.parse(_item(local_aws, table))
    assert item.holes
    # And the second, which has not seen that write, is told the item (one failed write) and
    # books s2 inside that hole, not after s1's slot
    got = _reserve(second, "s2")
    assert clock.at + PINNED_LEAD - 1e-6 <= got["s2"][0] < slots["s1"][0]
    # And many such jumps leave at most MAX_HOLES on the item
    for _ in range(60):
        clock.at += 0.5 + PINNED_LEAD
        _reserve(first, "s1")
    assert len(SharedItem.parse(_item(local_aws, table)).holes) <= MAX_HOLES

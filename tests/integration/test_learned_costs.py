"""A call's cost in points on the shared limiter: weighed with its slot, refunded when lower.

The limiter's own writes on DynamoDB (weighted slots, a refund that moves every consumer's
next slot earlier, never before now), then the refund through the consumer against the vendor
simulator's points bucket (sweeper.admission.costs).
"""

from __future__ import annotations

import time

import pytest

from sweeper.adaptive_rate import Adaptive
from sweeper.admission.costs import COST_HORIZON_SECONDS
from sweeper.limiter import DynamoLimiter, Grant
from sweeper.limiter.items import US
from sweeper.vendor_reading import MAX_COUNT, MAX_WAIT_SECONDS
from sweeper_local.aws import LocalAws
from sweeper_local.graphql_cost import PointsApi
from sweeper_local.vendor import VendorSimulator
from tests.conftest import Pipeline
from tests.integration.test_learned_limits import learning, paying_points, run, scope_item

pytestmark = pytest.mark.integration

T0 = 1_000_000.0


def test_a_weighted_slot_moves_the_next_one_by_its_units(local_aws: LocalAws, table: str) -> None:
    # Given a scope at 10 units a second
    now = [T0]
    limiter = DynamoLimiter(local_aws.dynamodb(), table, clock=lambda: now[0])
    # When one call takes a slot weighing 5 units, then another one unit
    first = limiter.reserve("s", 0.1, 10.0, units=5)
    second = limiter.reserve("s", 0.1, 10.0)
    # Then the second slot is 5 intervals after the first
    assert isinstance(first, Grant)
    assert isinstance(second, Grant)
    assert second.slot_at - first.slot_at == pytest.approx(0.5, abs=1e-6)


def test_a_refund_moves_every_consumers_next_slot_earlier(local_aws: LocalAws, table: str) -> None:
    # Given two consumers of one scope at 10 units a second, one call holding 8 units
    now = [T0]
    a = DynamoLimiter(local_aws.dynamodb(), table, clock=lambda: now[0])
    b = DynamoLimiter(local_aws.dynamodb(), table, clock=lambda: now[0])
    first = a.reserve("s", 0.1, 10.0, units=8)
    assert isinstance(first, Grant)
    # When its answer says it cost 3: 5 units go back
    assert a.refund("s", 5, 0.1)
    # Then the other consumer's next slot is 3 intervals after the first, not 8
    second = b.reserve("s", 0.1, 10.0)
    assert isinstance(second, Grant)
    assert second.slot_at - first.slot_at == pytest.approx(0.3, abs=1e-6)


def test_a_refund_never_moves_the_next_slot_before_now(local_aws: LocalAws, table: str) -> None:
    # Given a call that took 4 units, 0.3 s ago
    now = [T0]
    limiter = DynamoLimiter(local_aws.dynamodb(), table, clock=lambda: now[0])
    assert isinstance(limiter.reserve("s", 0.1, 10.0, units=4), Grant)
    now[0] += 0.3
    # When 3 units are refunded (0.1 s of the 0.4 s it took are still ahead)
    assert limiter.refund("s", 3, 0.1)
    # Then the scope is idle from now, not 0.2 s before it (no credit banked)
    item = local_aws.dynamodb().get_item(TableName=table, Key={"pk": {"S": "scope#s"}})["Item"]
    assert int(item["tat"]["N"]) == int(now[0] * US)
    # And a scope already idle has nothing to give back
    now[0] += 1.0
    assert not limiter.refund("s", 2, 0.1)


def test_an_enormous_actual_cost_takes_an_hour_of_the_rate_at_most(
    local_aws: LocalAws, table: str
) -> None:
    # Given a scope at 10 units a second, and an answer saying its call cost 10**9 points (a
    # buggy or hostile vendor: the most a reading keeps)
    now = [T0]
    limiter = DynamoLimiter(local_aws.dynamodb(), table, clock=lambda: now[0])
    # When the excess is taken as the consumer takes it (sweeper.admission.costs.correct)
    limiter.reserve("s", 0.1, COST_HORIZON_SECONDS, MAX_COUNT)
    # Then the scope's next slot lies within the hour, not 3 years on: one answer never
    # closes a scope for longer than a stated wait may (MAX_WAIT_SECONDS)
    item = local_aws.dynamodb().get_item(TableName=table, Key={"pk": {"S": "scope#s"}})["Item"]
    assert int(item["tat"]["N"]) <= int((T0 + MAX_WAIT_SECONDS + 1.0) * US)  # + a slot, the lead
    assert COST_HORIZON_SECONDS <= MAX_WAIT_SECONDS


def test_a_refund_at_a_rate_its_process_never_reserved_at_gives_nothing(
    local_aws: LocalAws, table: str
) -> None:
    # Given a scope held at 10 units a second, where one consumer took 4 units at that rate
    now = [T0]
    spec = Adaptive(floor=0.001, cap=10.0, increase=0.0, cut=1.0, cooldown=1.0)
    a = DynamoLimiter(local_aws.dynamodb(), table, clock=lambda: now[0])
    b = DynamoLimiter(local_aws.dynamodb(), table, clock=lambda: now[0])
    a.hold_rate("s", 10.0)
    assert isinstance(a.reserve("s", 0.1, 10.0, adaptive=spec, units=4), Grant)
    tat = local_aws.dynamodb().get_item(TableName=table, Key={"pk": {"S": "scope#s"}})["Item"]
    # When a consumer that never reserved at the held rate is asked to refund 3 units
    # Then it gives nothing back (its guess of the spacing would be the floor's, 1,000 s a unit)
    assert not b.refund("s", 3, 0.1, spec)
    item = local_aws.dynamodb().get_item(TableName=table, Key={"pk": {"S": "scope#s"}})["Item"]
    assert item["tat"] == tat["tat"]
    # And the one that reserved gives back 3 units at the rate held
    assert a.refund("s", 3, 0.1, spec)
    item = local_aws.dynamodb().get_item(TableName=table, Key={"pk": {"S": "scope#s"}})["Item"]
    assert int(tat["tat"]["N"]) - int(item["tat"]["N"]) == 3 * US // 10


def test_a_lower_cost_is_refunded_through_the_consumer(
    pipeline: Pipeline, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a bucket restoring 10 points a second, where each call requests 15 and costs 1,
    # and a policy told 10 points a second, each call reserving its requested 15
    points = PointsApi(maximum=1000, restore_rate=10, cost_range=(1, 1), requested_cost=15)
    with VendorSimulator(graphql=points) as vendor:
        p = learning(pipeline, monkeypatch, vendor, "ratelimit", told=(10, 1.0))
        p = paying_points(p, monkeypatch, {"reserve": 15, "bucket": "shopify"})
        # When four jobs are called, one at a time
        started = time.time()
        assert run(p, 4) == 4
        done = time.time()
    # Then each call's 14 unused points came back: the calls went about a point's interval
    # apart, not 15 (1.6 s each at the rate held, 4.8 s for the four), and the scope holds no
    # more than the last call's point ahead
    assert done - started < 4.0
    assert int(scope_item(p)["tat"]["N"]) / US < done + 0.5
    assert points.audit().throttled_total == 0

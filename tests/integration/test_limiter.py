"""The shared limiter and gate against DynamoDB (moto server), under real concurrency."""

from __future__ import annotations

import itertools
import threading
import time
from typing import Any

import pytest

from sweeper.config import LATE_SLOT_TOLERANCE_SECONDS, Policy
from sweeper.errors import LimiterError
from sweeper.limiter import (
    FIRST_LEAD_SECONDS,
    ITEM_TTL_SECONDS,
    MAX_LEAD_SECONDS,
    Adaptive,
    Denial,
    DynamoLimiter,
    Grant,
    ScopeState,
)
from sweeper.local.aws import LocalAws, provision

pytestmark = pytest.mark.integration


@pytest.fixture
def table(local_aws: LocalAws, unique_name: str) -> str:
    return provision(
        local_aws.sqs(), local_aws.dynamodb(), Policy(name="p"), prefix=unique_name
    ).limiter_table


def test_concurrent_consumers_never_get_slots_closer_than_the_interval(
    local_aws: LocalAws, table: str
) -> None:
    # Given eight consumers with their own clients, reserving one scope at 50/s for 1.5 s
    interval = 0.02
    slots: list[float] = []
    lock = threading.Lock()
    stop_at = time.time() + 1.5
    barrier = threading.Barrier(8)

    def consumer() -> None:
        limiter = DynamoLimiter(local_aws.dynamodb(), table)
        barrier.wait()
        while time.time() < stop_at:
            decision = limiter.reserve("scope-a", interval, horizon=0.5)
            if isinstance(decision, Grant):
                with lock:
                    slots.append(decision.slot_at)
                time.sleep(max(0.0, decision.slot_at - time.time()))

    threads = [threading.Thread(target=consumer) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    # Then the slots, whoever took them, are spaced by at least the interval (1 µs rounding)
    slots.sort()
    gaps = [b - a for a, b in itertools.pairwise(slots)]
    assert len(slots) >= 15  # enough to judge the spacing (moto carries 20-40 here under load)
    assert min(gaps) >= interval - 1e-6
    # and together they used the rate, not eight times it
    span = slots[-1] - slots[0]
    assert len(slots) - 1 <= span / interval + 1


def test_a_slot_beyond_the_horizon_is_refused_with_when_to_come_back(
    local_aws: LocalAws, table: str
) -> None:
    # Slots 5 s apart and a horizon of 10 s plus the most a lead may be: the fourth request is
    # refused unless the first three took 5 s (wide enough for a loaded machine; the arithmetic
    # is the same at any scale).
    horizon = 10.0 + MAX_LEAD_SECONDS
    limiter = DynamoLimiter(local_aws.dynamodb(), table)
    grants = [limiter.reserve("s", 5.0, horizon=horizon) for _ in range(3)]
    assert all(isinstance(g, Grant) for g in grants)  # now (+ the lead), +5 s, +10 s
    refused = limiter.reserve("s", 5.0, horizon=horizon)
    assert isinstance(refused, Denial)
    assert refused.reason == "rate"
    last = grants[-1]
    assert isinstance(last, Grant)
    assert refused.retry_at == pytest.approx(last.slot_at + 5.0 - horizon, abs=1e-3)


def test_a_closed_gate_refuses_every_consumer_until_it_reopens(
    local_aws: LocalAws, table: str
) -> None:
    a = DynamoLimiter(local_aws.dynamodb(), table)
    b = DynamoLimiter(local_aws.dynamodb(), table)
    until = time.time() + 0.6
    a.close("s", until, "throttled")
    refused = b.reserve("s", 0.01, horizon=0.1)
    assert isinstance(refused, Denial)
    assert refused.reason == "throttled"
    assert refused.retry_at == pytest.approx(until, abs=1e-3)
    assert b.state("s").closed(time.time())
    deadline = time.time() + 5
    while time.time() < deadline and b.state("s").closed(time.time()):
        time.sleep(0.05)
    assert isinstance(b.reserve("s", 0.01, horizon=0.1), Grant)


def test_a_closure_is_never_shortened(local_aws: LocalAws, table: str) -> None:
    limiter = DynamoLimiter(local_aws.dynamodb(), table)
    now = time.time()
    limiter.close("s", now + 30, "throttled")
    assert limiter.close("s", now + 5, "throttled") == pytest.approx(now + 30, abs=1e-3)
    assert limiter.state("s").closed_until == pytest.approx(now + 30, abs=1e-3)


def test_an_auth_closure_says_so(local_aws: LocalAws, table: str) -> None:
    limiter = DynamoLimiter(local_aws.dynamodb(), table)
    limiter.close("s", time.time() + 60, "auth")
    refused = limiter.reserve("s", 0.01, horizon=1)
    assert isinstance(refused, Denial)
    assert refused.reason == "auth"


def test_a_reservation_costs_one_write_in_either_regime(local_aws: LocalAws, table: str) -> None:
    # Given a limiter reserving one scope at 1/s (busy: each slot is ahead of now)
    a = DynamoLimiter(local_aws.dynamodb(), table)
    slots = [a.reserve("busy", 1.0, horizon=10) for _ in range(4)]
    # Then each reservation took one conditional write, the slots one interval apart
    assert a.writes == 4
    assert all(isinstance(s, Grant) for s in slots)
    firsts = [s.slot_at for s in slots if isinstance(s, Grant)]
    assert [round(b - x, 6) for x, b in itertools.pairwise(firsts)] == [1.0, 1.0, 1.0]
    # and a refusal beyond the horizon costs one write too, and the next grant again one
    assert isinstance(a.reserve("busy", 1.0, horizon=0.5), Denial)
    assert a.writes == 5
    assert isinstance(a.reserve("busy", 1.0, horizon=10), Grant)
    assert a.writes == 6
    # When a scope is idle (its slots behind now), each reservation is one write as well, at now
    # plus the lead (the slowest recent round trip: the answer is back by then)
    for _ in range(3):
        lead = a.lead  # what this reservation plans with
        before = time.time()
        idle = a.reserve("idle", 0.000_001, horizon=1)
        assert isinstance(idle, Grant)
        assert before + lead <= idle.slot_at <= time.time() + lead
    assert a.writes == 9
    # and a limiter that has not seen a busy scope pays one wrong guess, once, not a slot
    b = DynamoLimiter(local_aws.dynamodb(), table)
    late = b.reserve("busy", 1.0, horizon=10)
    assert isinstance(late, Grant)
    assert late.slot_at == pytest.approx(firsts[-1] + 2.0, abs=1e-6)
    assert b.writes == 2
    # and one that guesses idle for a busy scope and must refuse pays one write, not two
    c = DynamoLimiter(local_aws.dynamodb(), table)
    assert isinstance(c.reserve("busy", 1.0, horizon=0.5), Denial)
    assert c.writes == 1
    # The item expires a day after its last use (DynamoDB TTL, epoch seconds)
    for scope in ("busy", "idle"):
        key = {"pk": {"S": f"scope#{scope}"}}
        item = local_aws.dynamodb().get_item(TableName=table, Key=key)["Item"]
        assert abs(int(item["expires_at"]["N"]) - (time.time() + ITEM_TTL_SECONDS)) <= 60


class SlowWrites:
    """A DynamoDB client whose writes take `delay` longer: a latency spike, or a loaded host."""

    def __init__(self, client: Any, delay: float) -> None:
        self._client = client
        self._delay = delay

    def update_item(self, **kwargs: Any) -> Any:
        time.sleep(self._delay)
        return self._client.update_item(**kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)


def test_a_slow_write_still_grants_a_slot_the_consumer_can_use(
    local_aws: LocalAws, table: str
) -> None:
    # Given writes that take 80 ms longer than usual, more than the consumer's late-slot tolerance
    limiter = DynamoLimiter(SlowWrites(local_aws.dynamodb(), 0.08), table)  # type: ignore[arg-type]
    limiter.reserve("slow", 0.000_001, horizon=1)  # the first one measures the round trip
    assert limiter.lead >= 0.08
    # When a consumer reserves an idle scope, again and again
    checked = 0
    for _ in range(6):
        lead = limiter.lead
        asked = time.time()
        grant = limiter.reserve("slow", 0.000_001, horizon=1)
        answered = time.time()
        assert isinstance(grant, Grant)
        # Then the slot is no further ahead than the lead
        assert grant.slot_at <= asked + lead + 0.001
        # and, unless this write was slower than the slowest recent one (beyond the tolerance),
        # it has not passed when the answer arrives: the consumer can use it, where a slot
        # taken at the time of asking would be let go
        if answered - asked <= lead + LATE_SLOT_TOLERANCE_SECONDS:
            checked += 1
            assert grant.slot_at >= answered - LATE_SLOT_TOLERANCE_SECONDS
    assert checked >= 3


def test_the_lead_is_bounded(local_aws: LocalAws, table: str) -> None:
    # Given writes slower than any lead worth planning for
    limiter = DynamoLimiter(SlowWrites(local_aws.dynamodb(), 0.3), table)  # type: ignore[arg-type]
    assert limiter.lead == FIRST_LEAD_SECONDS
    limiter.reserve("slower", 0.000_001, horizon=1)
    # Then the lead stops at its bound, and a reservation within a short horizon stays in it
    assert limiter.lead == MAX_LEAD_SECONDS
    asked = time.time()
    grant = limiter.reserve("slower", 0.000_001, horizon=0.1)
    assert isinstance(grant, Grant)
    assert grant.slot_at <= asked + 0.1 + 0.001


def test_the_state_reads_back_what_reservations_and_closures_wrote(
    local_aws: LocalAws, table: str
) -> None:
    limiter = DynamoLimiter(local_aws.dynamodb(), table)
    # A scope never used has no slot and no closure, read with one strongly consistent read
    assert limiter.state("fresh") == ScopeState("fresh", None, None, None, None)
    assert limiter.reads == 1
    # After an idle reservation the slot is now (plus the lead), the next one an interval later
    lead = limiter.lead
    before = time.time()
    grant = limiter.reserve("s", 0.5, horizon=1)
    assert isinstance(grant, Grant)
    assert before + lead <= grant.slot_at <= time.time() + lead
    # After a closure of five seconds every field reads back, with one write and one read each
    until = time.time() + 5
    assert limiter.close("s", until, "auth") == until
    assert limiter.writes == 2
    state = limiter.state("s")
    assert limiter.reads == 2
    assert state.scope == "s"
    assert state.next_slot_at == pytest.approx(grant.slot_at + 0.5, abs=1e-6)
    assert state.closed_until == pytest.approx(until, abs=1e-6)
    assert state.reason == "auth"
    assert state.last_close_seconds is not None
    assert 4.5 <= state.last_close_seconds <= 5.0
    item = local_aws.dynamodb().get_item(TableName=table, Key={"pk": {"S": "scope#s"}})["Item"]
    assert item["closures"]["N"] == "1"
    # A closure shorter than a second is recorded as that long, not rounded up
    limiter.close("short", time.time() + 0.5, "throttled")
    short = limiter.state("short").last_close_seconds
    assert short is not None
    assert 0.3 <= short <= 0.5
    assert abs(int(item["expires_at"]["N"]) - (until + ITEM_TTL_SECONDS)) <= 1


def test_a_limiter_error_names_the_scope_and_the_operation(local_aws: LocalAws) -> None:
    limiter = DynamoLimiter(local_aws.dynamodb(), "no-such-table")
    with pytest.raises(LimiterError, match="limiter update failed for scope 'a'"):
        limiter.reserve("a", 1.0, horizon=1)
    with pytest.raises(LimiterError, match="gate close failed for scope 'b'"):
        limiter.close("b", time.time() + 1, "throttled")
    with pytest.raises(LimiterError, match="limiter read failed for scope 'c'"):
        limiter.state("c")


def item_of(local_aws: LocalAws, table: str, scope: str) -> dict[str, Any]:
    key = {"pk": {"S": f"scope#{scope}"}}
    item: dict[str, Any] = local_aws.dynamodb().get_item(TableName=table, Key=key)["Item"]
    return item


def test_an_adaptive_scope_is_reserved_at_the_rate_its_item_holds(
    local_aws: LocalAws, table: str
) -> None:
    # Given a scope whose quota is to be found: from 10/s, +10/s each second, halved on a 429
    spec = Adaptive(floor=10.0, cap=100.0, increase=10.0, cut=0.5, cooldown=2.0)
    now = [1_000.0]
    a = DynamoLimiter(local_aws.dynamodb(), table, clock=lambda: now[0])
    b = DynamoLimiter(local_aws.dynamodb(), table, clock=lambda: now[0])
    # When the first consumer reserves, the scope starts at the floor (the interval asked for
    # is not used), in one write
    first = a.reserve("found", 999.0, horizon=10, count=3, adaptive=spec)
    assert isinstance(first, Grant)
    assert (first.count, a.writes) == (3, 1)
    assert first.interval == pytest.approx(1 / 10)
    # and a second consumer, which has not seen the rate, learns it from its failed write
    second = b.reserve("found", 999.0, horizon=10, count=2, adaptive=spec)
    assert isinstance(second, Grant)
    assert second.interval == pytest.approx(1 / 10)
    assert b.writes == 2
    # When five seconds pass without a 429, the rate has risen to 60/s, and a 429 halves it
    now[0] += 5
    assert a.cut("found", spec) == pytest.approx(30.0)
    # Then the other consumer's next reservation is at 30/s: its write at the old rate fails
    third = b.reserve("found", 999.0, horizon=10, count=2, adaptive=spec)
    assert isinstance(third, Grant)
    assert third.interval == pytest.approx(1 / 30, abs=1e-6)
    assert b.writes == 4
    # and the other 429s of that overshoot do not cut it again within the cooldown
    assert b.cut("found", spec) == pytest.approx(30.0)
    assert int(item_of(local_aws, table, "found")["ar_v"]["N"]) == 2  # set once, cut once
    # but one after the cooldown does, from the rate reached meanwhile (30 + 3 x 10, halved)
    now[0] += 3
    assert b.cut("found", spec) == pytest.approx(30.0)
    assert int(item_of(local_aws, table, "found")["ar_v"]["N"]) == 3


def test_an_adaptive_rate_never_leaves_its_bounds_in_the_item(
    local_aws: LocalAws, table: str
) -> None:
    # Given a controller at its cap after a long quiet spell, then many 429s far apart
    spec = Adaptive(floor=5.0, cap=50.0, increase=50.0, cut=0.5, cooldown=1.0)
    now = [1_000.0]
    limiter = DynamoLimiter(local_aws.dynamodb(), table, clock=lambda: now[0])
    limiter.reserve("bounded", 1.0, horizon=600, adaptive=spec)
    now[0] += 3_600
    top = limiter.reserve("bounded", 1.0, horizon=600, count=2, adaptive=spec)
    assert isinstance(top, Grant)
    assert top.interval == pytest.approx(1 / 50, abs=1e-6)  # the cap, not beyond
    rates = []
    for _ in range(8):
        now[0] += 1.5
        rates.append(limiter.cut("bounded", spec))
    # Then each cut starts from at most the cap, and none goes below the floor
    assert rates[0] == pytest.approx(25.0)
    assert all(spec.floor <= r <= spec.cap for r in rates)

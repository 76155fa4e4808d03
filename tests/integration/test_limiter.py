"""The shared limiter and gate against DynamoDB (moto server), under real concurrency."""

from __future__ import annotations

import itertools
import random
import threading
import time
from typing import Any

import pytest

from sweeper.config import LATE_SLOT_TOLERANCE_SECONDS
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
    close_delay,
    recovery_seconds,
)
from sweeper.limiter.paired import Want
from sweeper_local.aws import LocalAws

pytestmark = pytest.mark.integration


def test_concurrent_consumers_never_get_slots_closer_than_the_interval(
    local_aws: LocalAws, table: str
) -> None:
    # Given eight consumers with their own clients, reserving one scope at 50/s for 1.5 s
    interval = 0.02
    slots: list[float] = []
    lock = threading.Lock()
    # (their clients made first: on a loaded machine eight made at once can take the 1.5 s)
    limiters = [DynamoLimiter(local_aws.dynamodb(), table) for _ in range(8)]
    barrier = threading.Barrier(8)
    stop_at = time.time() + 1.5

    def consumer(limiter: DynamoLimiter) -> None:
        barrier.wait()
        while time.time() < stop_at:
            decision = limiter.reserve("scope-a", interval, horizon=0.5)
            if isinstance(decision, Grant):
                with lock:
                    slots.append(decision.slot_at)
                time.sleep(max(0.0, decision.slot_at - time.time()))

    threads = [threading.Thread(target=consumer, args=(limiter,)) for limiter in limiters]
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
    until = time.time() + 1.5  # longer than a loaded machine takes for the two looks below
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


def test_a_limiter_that_last_found_a_scope_busy_tries_the_busy_path_first(
    local_aws: LocalAws, table: str
) -> None:
    # Given limiter a whose last write found the scope busy (its second slot was ahead of now)
    a = DynamoLimiter(local_aws.dynamodb(), table)
    assert isinstance(a.reserve("shared", 0.05, horizon=10), Grant)  # idle: the first slot
    assert isinstance(a.reserve("shared", 0.05, horizon=10), Grant)  # busy
    # and limiter b (another consumer) holding the next 8 s of slots, unknown to a (long
    # enough that a loaded machine's pause cannot let them pass before a reserves again)
    b = DynamoLimiter(local_aws.dynamodb(), table)
    assert isinstance(b.reserve("shared", 0.05, horizon=10, count=160), Grant)
    # When a reserves again after a's own last slot has passed
    time.sleep(0.2)
    writes = a.writes
    slot = a.reserve("shared", 0.05, horizon=10)
    # Then it takes one write: the busy path first, after b's slots
    assert a.writes - writes == 1
    assert isinstance(slot, Grant)
    assert slot.slot_at > time.time() + 1


@pytest.mark.parametrize("look", ["state", "states"])
def test_a_limiter_that_read_a_scope_busy_since_its_own_idle_write_tries_the_busy_path_first(
    local_aws: LocalAws, table: str, look: str
) -> None:
    # Given limiter a whose own last write found the scope idle, long enough ago that its
    # slot has passed
    a = DynamoLimiter(local_aws.dynamodb(), table)
    assert isinstance(a.reserve("shared", 0.05, horizon=10), Grant)
    time.sleep(0.2)
    # and limiter b (another consumer) holding the next 8 s of slots since
    b = DynamoLimiter(local_aws.dynamodb(), table)
    assert isinstance(b.reserve("shared", 0.05, horizon=10, count=160), Grant)
    # When a looks at the scope's gate (one scope, or several in one read), then reserves
    if look == "state":
        a.state("shared")
    else:
        a.states(["shared", "other"])
    writes = a.writes
    slot = a.reserve("shared", 0.05, horizon=10)
    # Then it takes one write: the busy path first, as its look saw, after b's slots
    assert a.writes - writes == 1
    assert isinstance(slot, Grant)
    assert slot.slot_at > time.time() + 1


def test_a_limiter_that_read_a_scope_idle_since_its_own_busy_write_tries_the_idle_path_first(
    local_aws: LocalAws, table: str
) -> None:
    # Given limiter a whose own last write found the scope busy
    a = DynamoLimiter(local_aws.dynamodb(), table)
    assert isinstance(a.reserve("shared", 0.05, horizon=10), Grant)  # idle: the first slot
    assert isinstance(a.reserve("shared", 0.05, horizon=10), Grant)  # busy
    # When its slots have passed, it looks at the scope's gate and reserves
    time.sleep(0.3)
    a.state("shared")
    writes = a.writes
    slot = a.reserve("shared", 0.05, horizon=10)
    # Then it takes one write: the idle path first, as its look saw
    assert a.writes - writes == 1
    assert isinstance(slot, Grant)


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
    # (the closure's write raises the latest closure's marker too: one write more)
    until = time.time() + 5
    assert limiter.close("s", until, "auth") == until
    assert limiter.writes == 3
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


def test_the_states_of_several_scopes_are_read_in_one_request_as_state_reads_each(
    local_aws: LocalAws, table: str
) -> None:
    # Given a scope with a slot taken, one closed, and one never used
    limiter = DynamoLimiter(local_aws.dynamodb(), table)
    limiter.reserve("open", 0.5, horizon=1)
    limiter.close("shut", time.time() + 5, "throttled")
    one_by_one = {scope: limiter.state(scope) for scope in ("open", "shut", "fresh")}
    reads = limiter.reads
    # When the three are read together
    together = limiter.states(["open", "shut", "fresh"])
    # Then it is one request, and each state is what a read of its own says
    assert limiter.reads == reads + 1
    assert together == one_by_one
    assert together["fresh"] == ScopeState("fresh", None, None, None, None)
    assert limiter.states([]) == {}
    assert limiter.reads == reads + 1  # nothing to read, no request


def test_every_paired_gate_is_read_in_one_read_of_the_wide_item_as_paired_state_reads_each(
    local_aws: LocalAws, table: str
) -> None:
    # Given stores paired on the app's item: one with a slot taken there, one closed there,
    # one closed on its own item only, and one never used
    limiter = DynamoLimiter(local_aws.dynamodb(), table)
    wide, step = "app:app", 500_000
    limiter.reserve_paired(wide, 0.01, [Want("taken", step, 1)], 5.0, 0.2, 1)
    limiter.close_narrow(wide, "shut", time.time() + 5)
    limiter.close("own-item", time.time() + 5, "throttled")
    keys = ["taken", "shut", "own-item", "fresh"]
    one_by_one = {key: limiter.paired_states(wide, [key])[key] for key in keys}
    reads = limiter.reads
    # When all are read together
    together = limiter.paired_states(wide, keys)
    # Then it is one request, each store's gate is what a read of its own says (the app's
    # item alone tells it: a closure on the store's own item is not seen), and the app's own
    # gate comes with them, open
    assert limiter.reads == reads + 1
    assert {key: together[key] for key in keys} == one_by_one
    assert [key for key in keys if together[key].closed(time.time())] == ["shut"]
    assert together[wide].scope == wide
    assert together[wide].closed_until is None
    assert together[wide].next_slot_at is not None
    # When the app's gate closes (a 429 the app's), for longer than the store's
    until = time.time() + 60
    limiter.close(wide, until, "throttled")
    after = limiter.paired_states(wide, keys)
    # Then the app's gate is read closed, and so is every store's, until the app reopens
    assert after[wide].closed_until == pytest.approx(until, abs=1e-6)
    assert after[wide].reason == "throttled"
    assert all(after[key].closed_until == after[wide].closed_until for key in keys)
    one_at_a_time = {key: limiter.paired_states(wide, [key])[key] for key in keys}
    assert after == {**one_at_a_time, wide: after[wide]}


class LeavesKeysUnprocessed:
    """A DynamoDB client whose BatchGetItem answers leave the keys of `unprocessed` scopes
    unread, as DynamoDB does when a table's throughput is exceeded."""

    def __init__(self, client: Any, unprocessed: set[str]) -> None:
        self._client = client
        self._unprocessed = {f"scope#{scope}" for scope in unprocessed}

    def batch_get_item(self, RequestItems: dict[str, Any]) -> dict[str, Any]:
        ((table, spec),) = RequestItems.items()
        keys = [key for key in spec["Keys"] if key["pk"]["S"] not in self._unprocessed]
        left = [key for key in spec["Keys"] if key["pk"]["S"] in self._unprocessed]
        answer = dict(self._client.batch_get_item(RequestItems={table: {**spec, "Keys": keys}}))
        answer["UnprocessedKeys"] = {table: {**spec, "Keys": left}} if left else {}
        return answer


def test_a_scope_left_unprocessed_by_a_batch_read_is_missing_from_its_answer_not_open(
    local_aws: LocalAws, table: str
) -> None:
    # Given two scopes never used (both open), one of which DynamoDB leaves unread
    client = LeavesKeysUnprocessed(local_aws.dynamodb(), {"unread"})
    limiter = DynamoLimiter(client, table)  # type: ignore[arg-type]
    # When both are read together
    states = limiter.states(["read", "unread"])
    # Then only the one read is answered for: the other is not taken for an open gate
    assert states == {"read": ScopeState("read", None, None, None, None)}


def test_a_bare_throttle_backs_off_while_refused_at_each_reopening_and_recovers_after(
    local_aws: LocalAws, table: str
) -> None:
    # Given a scope on the real limiter at 10/s, a fake clock, closures from 1 s up to 300 s
    # without jitter, and a consumer's way of closing on a bare 429: read the scope's last
    # closure, draw the delay from it and when the call went out, close
    clock = [1_800_000_000.0]
    limiter = DynamoLimiter(local_aws.dynamodb(), table, clock=lambda: clock[0])
    base, jitter = 1.0, 0.0

    def bare_429(sent_at: float) -> float:
        last = limiter.state("s")
        delay = close_delay(
            None,
            last.last_close_seconds,
            last.closed_until,
            sent_at,
            base=base,
            cap=300.0,
            jitter=jitter,
            rng=random.Random(0),
        )
        return limiter.close("s", clock[0] + delay, "throttled") - clock[0]

    def calls_until(end: float) -> int:
        made = 0
        while clock[0] < end:
            grant = limiter.reserve("s", 0.1, horizon=1.0)
            assert isinstance(grant, Grant)
            clock[0] = max(clock[0], grant.slot_at) + 0.01  # sent at the slot, answered 10 ms on
            made += 1
        return made

    # When a first call is refused with a bare 429, the scope closes for the base
    assert bare_429(sent_at=clock[0] - 0.01) == pytest.approx(base)
    first = limiter.state("s")
    assert first.last_close_seconds == pytest.approx(base)
    # and when the first call after the reopening is refused too, the closure doubles
    assert first.closed_until is not None
    clock[0] = first.closed_until + 0.05
    assert bare_429(sent_at=first.closed_until + 0.04) == pytest.approx(2 * base)
    second = limiter.state("s")
    assert second.last_close_seconds == pytest.approx(2 * base)
    assert second.closed_until is not None
    # and when the scope then stays open and calling past the recovery window, a bare 429
    # closes it for the base again
    writes = limiter.writes
    clock[0] = second.closed_until
    made = calls_until(second.closed_until + recovery_seconds(base, jitter) + 0.5)
    assert made >= 15
    assert bare_429(sent_at=clock[0] - 0.01) == pytest.approx(base)
    assert limiter.state("s").last_close_seconds == pytest.approx(base)
    # and the calls that succeeded in between wrote nothing beyond their reservations
    assert limiter.writes - writes <= made + 1 + 1  # an idle bucket's first reservation: two


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
    # but one after the cooldown does, from the rate reached meanwhile, halved: the climb back
    # slows near the peak the first cut kept in the item (60/s), which this consumer learned
    # from its failed write: 30 + 2.4 s x 10 to the band at 54/s, then 0.6 s x 1 in it
    now[0] += 3
    # (and the consumer that cut reserves at that rate too, from its own cut: 54.6/s, not 60)
    fourth = a.reserve("found", 999.0, horizon=10, count=2, adaptive=spec)
    assert isinstance(fourth, Grant)
    assert fourth.interval == pytest.approx(1 / 54.6, abs=1e-6)
    assert b.cut("found", spec) == pytest.approx(54.6 / 2)
    item = item_of(local_aws, table, "found")
    assert int(item["ar_v"]["N"]) == 3
    assert int(item["ar_peak"]["N"]) == 54_600  # the new peak, in thousandths


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


# -- blocks of slots, boundaries, races: each on a fake clock, so every slot time is exact ------
# A limiter that has not written yet plans with FIRST_LEAD_SECONDS (its first write's lead is
# known); later leads are measured, so these tests keep a margin above MAX_LEAD_SECONDS there.

T = 1_000.0  # epoch seconds of the fake clocks


def fake_clock(start: float = T) -> tuple[list[float], Any]:
    now = [start]
    return now, lambda: now[0]


def shape(decision: Grant | Denial) -> tuple[object, ...]:
    """A grant as (first slot, count, interval), a denial as (retry at, reason), to the µs."""
    if isinstance(decision, Grant):
        return round(decision.slot_at, 6), decision.count, round(decision.interval, 6)
    return round(decision.retry_at, 6), decision.reason


def test_a_block_of_slots_on_an_idle_scope_stops_at_the_horizon(
    local_aws: LocalAws, table: str
) -> None:
    # Given an idle scope at 1/s and a limiter that has not written yet
    now, clock = fake_clock()
    limiter = DynamoLimiter(local_aws.dynamodb(), table, clock=clock)
    # When it asks for five slots within 2.5 s
    block = limiter.reserve("blk", 1.0, horizon=2.5, count=5)
    # Then it gets the three that fit, from now plus the lead, one interval apart, in one write
    assert shape(block) == (T + FIRST_LEAD_SECONDS, 3, 1.0)
    assert isinstance(block, Grant)
    assert [round(s, 6) for s in block.slots] == [T + 0.05, T + 1.05, T + 2.05]
    assert limiter.writes == 1
    # and, a moment later, the next reservation knows the scope is busy: one write, next slot
    now[0] += 0.1
    assert shape(limiter.reserve("blk", 1.0, horizon=10)) == (T + 3.05, 1, 0.0)
    assert limiter.writes == 2


def test_a_block_asked_of_a_busy_scope_is_cut_short_at_the_horizon(
    local_aws: LocalAws, table: str
) -> None:
    # Given a scope at 1/s whose next slot is 1.05 s away, as this limiter knows
    _, clock = fake_clock()
    limiter = DynamoLimiter(local_aws.dynamodb(), table, clock=clock)
    assert shape(limiter.reserve("busy", 1.0, horizon=10)) == (T + FIRST_LEAD_SECONDS, 1, 0.0)
    # When it asks for three slots within 1.5 s
    block = limiter.reserve("busy", 1.0, horizon=1.5, count=3)
    # Then it gets the one slot before the horizon, not a slot beyond it
    assert shape(block) == (T + 1.05, 1, 0.0)
    assert limiter.state("busy").next_slot_at == pytest.approx(T + 2.05, abs=1e-6)


def test_a_block_asked_of_a_scope_busy_elsewhere_takes_what_fits_before_the_horizon(
    local_aws: LocalAws, table: str
) -> None:
    # Given a scope at 1/s made busy by another consumer: its next slot is 1.05 s away
    _, clock = fake_clock()
    other = DynamoLimiter(local_aws.dynamodb(), table, clock=clock)
    other.reserve("shared", 1.0, horizon=10)
    # When a consumer that has not seen it asks for four slots within 2.5 s
    limiter = DynamoLimiter(local_aws.dynamodb(), table, clock=clock)
    block = limiter.reserve("shared", 1.0, horizon=2.5, count=4)
    # Then its wrong guess (idle) costs one write, and it takes the two slots that fit
    assert shape(block) == (T + 1.05, 2, 1.0)
    assert limiter.writes == 2


def test_a_gate_closed_until_exactly_now_no_longer_refuses(local_aws: LocalAws, table: str) -> None:
    # Given a scope whose next slot is 10.05 s away and whose gate closes until exactly now
    _, clock = fake_clock()
    DynamoLimiter(local_aws.dynamodb(), table, clock=clock).reserve("g", 10.0, horizon=100)
    DynamoLimiter(local_aws.dynamodb(), table, clock=clock).close("g", T, "throttled")
    # When a consumer asks for a slot now (a horizon of zero: no lead either)
    refused = DynamoLimiter(local_aws.dynamodb(), table, clock=clock).reserve("g", 10.0, 0.0)
    # Then it is refused for the rate, until that slot, not for a closure
    assert shape(refused) == (T + 10.05, "rate")


def test_a_slot_exactly_at_the_horizon_is_granted(local_aws: LocalAws, table: str) -> None:
    # Given a scope at 1/s whose next slot is exactly 1.05 s away
    _, clock = fake_clock()
    DynamoLimiter(local_aws.dynamodb(), table, clock=clock).reserve("h", 1.0, horizon=10)
    # When consumers ask with a horizon of a microsecond less, then of exactly that
    short = DynamoLimiter(local_aws.dynamodb(), table, clock=clock).reserve("h", 1.0, 1.049_999)
    at_edge = DynamoLimiter(local_aws.dynamodb(), table, clock=clock).reserve("h", 1.0, 1.05)
    # Then the first is refused, the second gets the slot
    assert isinstance(short, Denial)
    assert short.reason == "rate"
    assert shape(at_edge) == (T + 1.05, 1, 0.0)


def delete_item(local_aws: LocalAws, table: str, scope: str) -> None:
    local_aws.dynamodb().delete_item(TableName=table, Key={"pk": {"S": f"scope#{scope}"}})


def test_a_scope_whose_item_is_gone_is_reserved_afresh(local_aws: LocalAws, table: str) -> None:
    # Given a limiter that saw a scope busy, and the scope's item then gone (expired, deleted)
    now, clock = fake_clock()
    limiter = DynamoLimiter(local_aws.dynamodb(), table, clock=clock)
    limiter.reserve("gone", 10.0, horizon=100, count=3)
    delete_item(local_aws, table, "gone")
    # When it reserves the scope again
    now[0] += 1
    again = limiter.reserve("gone", 10.0, horizon=100)
    # Then its wrong guess costs one write and it gets the idle scope's slot: now plus the lead
    assert isinstance(again, Grant)
    assert T + 1 <= again.slot_at <= T + 1 + MAX_LEAD_SECONDS
    assert limiter.writes == 3


def test_an_adaptive_scope_whose_item_is_gone_starts_again_at_the_floor(
    local_aws: LocalAws, table: str
) -> None:
    # Given a limiter that knows an adaptive scope's rate, and the scope's item then gone
    spec = Adaptive(floor=10.0, cap=100.0, increase=10.0, cut=0.5, cooldown=2.0)
    now, clock = fake_clock()
    limiter = DynamoLimiter(local_aws.dynamodb(), table, clock=clock)
    limiter.reserve("gone", 1.0, horizon=100, count=50, adaptive=spec)  # 5 s of slots: busy
    delete_item(local_aws, table, "gone")
    # When it reserves the scope again, later
    now[0] += 3
    again = limiter.reserve("gone", 1.0, horizon=100, count=2, adaptive=spec)
    # Then the stale version costs one write, and the scope starts again at the floor
    assert isinstance(again, Grant)
    assert again.interval == pytest.approx(1 / spec.floor)
    assert limiter.writes == 3
    assert int(item_of(local_aws, table, "gone")["ar_v"]["N"]) == 1


def test_a_consumer_with_a_stale_rate_on_a_busy_scope_reserves_at_the_cut_rate(
    local_aws: LocalAws, table: str
) -> None:
    # Given an adaptive scope with 10 s of slots reserved at the floor, and a second consumer
    # that learned that rate and that the scope is busy
    spec = Adaptive(floor=10.0, cap=100.0, increase=10.0, cut=0.5, cooldown=2.0)
    now, clock = fake_clock()
    a = DynamoLimiter(local_aws.dynamodb(), table, clock=clock)
    b = DynamoLimiter(local_aws.dynamodb(), table, clock=clock)
    a.reserve("ar", 1.0, horizon=600, count=100, adaptive=spec)
    assert isinstance(b.reserve("ar", 1.0, horizon=600, adaptive=spec), Grant)
    # When, five seconds on (the rate risen to 60/s), the first consumer's 429 cuts it to 30/s
    now[0] += 5
    assert a.cut("ar", spec) == pytest.approx(30.0)
    # Then the second consumer's write at its stale rate fails, and it reserves at 30/s
    writes = b.writes
    block = b.reserve("ar", 1.0, horizon=600, count=2, adaptive=spec)
    assert isinstance(block, Grant)
    assert block.interval == pytest.approx(1 / 30, abs=1e-6)
    assert block.slot_at == pytest.approx(T + 10.15, abs=1e-6)  # after the 101 slots before
    assert b.writes == writes + 2
    # and a consumer that learned the floor rate sees it risen a second later (from the floor)
    c = DynamoLimiter(local_aws.dynamodb(), table, clock=clock)
    c.reserve("fresh", 1.0, horizon=600, adaptive=spec)
    d = DynamoLimiter(local_aws.dynamodb(), table, clock=clock)
    d.reserve("fresh", 1.0, horizon=600, adaptive=spec)
    now[0] += 1
    later = d.reserve("fresh", 1.0, horizon=600, count=2, adaptive=spec)
    assert isinstance(later, Grant)
    assert later.interval == pytest.approx(1 / 20, abs=1e-6)


def test_a_busy_scope_that_turns_adaptive_starts_at_the_floor(
    local_aws: LocalAws, table: str
) -> None:
    # Given a scope made busy at a known quota (1/s)
    spec = Adaptive(floor=10.0, cap=100.0, increase=10.0, cut=0.5, cooldown=2.0)
    _, clock = fake_clock()
    DynamoLimiter(local_aws.dynamodb(), table, clock=clock).reserve("turn", 1.0, horizon=10)
    # When a consumer reserves it adaptively
    limiter = DynamoLimiter(local_aws.dynamodb(), table, clock=clock)
    block = limiter.reserve("turn", 1.0, horizon=10, count=2, adaptive=spec)
    # Then its slots follow the busy bucket at the floor rate (one wrong guess: two writes)
    assert shape(block) == (T + 1.05, 2, 1 / spec.floor)
    assert limiter.writes == 2
    # and it knows the rate it set: its next reservation is one write
    assert isinstance(limiter.reserve("turn", 1.0, horizon=10, adaptive=spec), Grant)
    assert limiter.writes == 3


def test_the_first_adaptive_reservation_teaches_its_consumer_the_rate(
    local_aws: LocalAws, table: str
) -> None:
    # Given a consumer that made an adaptive scope's first reservation (its rate at the floor)
    spec = Adaptive(floor=10.0, cap=100.0, increase=10.0, cut=0.5, cooldown=2.0)
    _, clock = fake_clock()
    limiter = DynamoLimiter(local_aws.dynamodb(), table, clock=clock)
    assert isinstance(limiter.reserve("first", 1.0, horizon=10, adaptive=spec), Grant)
    # Then it knows the rate's version: its next reservation is one write, at the floor
    block = limiter.reserve("first", 1.0, horizon=10, count=2, adaptive=spec)
    assert shape(block) == (T + 0.15, 2, 1 / spec.floor)
    assert limiter.writes == 2


def test_a_consumer_that_never_reserved_cuts_the_shared_rate(
    local_aws: LocalAws, table: str
) -> None:
    # Given an adaptive scope set at the floor five seconds ago (risen to 60/s since)
    spec = Adaptive(floor=10.0, cap=100.0, increase=10.0, cut=0.5, cooldown=2.0)
    now, clock = fake_clock()
    DynamoLimiter(local_aws.dynamodb(), table, clock=clock).reserve("cut", 1.0, 10, adaptive=spec)
    now[0] += 5
    # When a consumer that has not seen the scope meets a 429
    limiter = DynamoLimiter(local_aws.dynamodb(), table, clock=clock)
    rate = limiter.cut("cut", spec)
    # Then it learns the rate from its failed write and halves it, in two writes
    assert rate == pytest.approx(30.0)
    assert limiter.writes == 2
    item = item_of(local_aws, table, "cut")
    assert (item["ar_v"]["N"], item["ar"]["N"]) == ("2", "30000")
    assert int(item["expires_at"]["N"]) == int(T + 5) + ITEM_TTL_SECONDS
    # and its next reservation is at the rate it set, in one write
    block = limiter.reserve("cut", 1.0, horizon=10, count=2, adaptive=spec)
    assert isinstance(block, Grant)
    assert block.interval == pytest.approx(1 / 30, abs=1e-6)
    assert limiter.writes == 3


def test_a_429_on_a_scope_never_used_sets_the_rate_at_the_floor(
    local_aws: LocalAws, table: str
) -> None:
    spec = Adaptive(floor=10.0, cap=100.0, increase=10.0, cut=0.5, cooldown=2.0)
    _, clock = fake_clock()
    limiter = DynamoLimiter(local_aws.dynamodb(), table, clock=clock)
    assert limiter.cut("new", spec) == pytest.approx(spec.floor)
    assert limiter.writes == 1
    assert int(item_of(local_aws, table, "new")["ar_v"]["N"]) == 1


def test_the_other_429s_of_one_overshoot_follow_the_first_cut(
    local_aws: LocalAws, table: str
) -> None:
    # Given an adaptive scope at 60/s, known to a second consumer, cut to 30/s by a first one
    spec = Adaptive(floor=10.0, cap=100.0, increase=10.0, cut=0.5, cooldown=2.0)
    now, clock = fake_clock()
    first = DynamoLimiter(local_aws.dynamodb(), table, clock=clock)
    second = DynamoLimiter(local_aws.dynamodb(), table, clock=clock)
    first.reserve("o", 1.0, horizon=10, adaptive=spec)
    second.reserve("o", 1.0, horizon=10, adaptive=spec)
    now[0] += 5
    assert first.cut("o", spec) == pytest.approx(30.0)
    # When, half a second later (within the cooldown), the second and a third consumer meet 429s
    now[0] += 0.5
    second_writes = second.writes
    third = DynamoLimiter(local_aws.dynamodb(), table, clock=clock)
    # Then each follows the cut in one failed write: the rate stays 30/s, cut once
    assert second.cut("o", spec) == pytest.approx(30.0)
    assert third.cut("o", spec) == pytest.approx(30.0)
    assert (second.writes - second_writes, third.writes) == (1, 1)
    # and so does the first consumer's own next 429 (its version is current: the cooldown holds)
    first_writes = first.writes
    assert first.cut("o", spec) == pytest.approx(30.0)
    assert first.writes == first_writes + 1
    assert item_of(local_aws, table, "o")["ar_v"]["N"] == "2"


class RivalCutsFirst:
    """A DynamoDB client before each of whose writes another consumer cuts the scope's rate:
    a reservation or cut that loses every race (possible with a cooldown of zero)."""

    def __init__(self, client: Any, rival: DynamoLimiter, scope: str, spec: Adaptive) -> None:
        self._client = client
        self._rival = rival
        self._scope = scope
        self._spec = spec

    def update_item(self, **kwargs: Any) -> Any:
        self._rival.cut(self._scope, self._spec)
        return self._client.update_item(**kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)


def test_a_reservation_and_a_cut_that_lose_every_race_give_up_shortly(
    local_aws: LocalAws, table: str
) -> None:
    # Given an adaptive scope at 60/s whose rate another consumer cuts (no cooldown) before
    # each write of this one
    spec = Adaptive(floor=10.0, cap=100.0, increase=10.0, cut=0.99, cooldown=0.0)
    now, clock = fake_clock()
    rival = DynamoLimiter(local_aws.dynamodb(), table, clock=clock)
    rival.reserve("race", 1.0, horizon=10, adaptive=spec)
    now[0] += 5
    client = RivalCutsFirst(local_aws.dynamodb(), rival, "race", spec)
    limiter = DynamoLimiter(client, table, clock=clock)  # type: ignore[arg-type]
    # When it reserves
    refused = limiter.reserve("race", 0.25, horizon=10, adaptive=spec)
    # Then after eight lost races it is refused for a moment (one interval), not for long
    assert shape(refused) == (T + 5.25, "rate")
    assert limiter.writes == 8
    # and a cut that loses every race returns the rate it last saw in the item
    rate = limiter.cut("race", spec)
    assert limiter.writes == 16
    held = int(item_of(local_aws, table, "race")["ar"]["N"]) / 1000
    assert spec.floor < held < 60.0
    assert rate == held


class LaggingReads:
    """A DynamoDB client whose eventually consistent reads have not caught up with any write."""

    def __init__(self, client: Any) -> None:
        self._client = client

    def get_item(self, **kwargs: Any) -> Any:
        if kwargs.get("ConsistentRead") is True:
            return self._client.get_item(**kwargs)
        return {}

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)


def test_the_gate_is_read_strongly_consistent(local_aws: LocalAws, table: str) -> None:
    # Given a gate just closed, and reads that lag unless they ask for consistency
    limiter = DynamoLimiter(LaggingReads(local_aws.dynamodb()), table)  # type: ignore[arg-type]
    until = time.time() + 30
    limiter.close("s", until, "throttled")
    # Then the consumer's re-check sees the closure
    assert limiter.state("s").closed_until == pytest.approx(until, abs=1e-6)


class DelayedWrites:
    """A DynamoDB client whose writes take the next of `delays` longer (then no longer)."""

    def __init__(self, client: Any, delays: list[float]) -> None:
        self._client = client
        self._delays = delays

    def update_item(self, **kwargs: Any) -> Any:
        time.sleep(self._delays.pop(0) if self._delays else 0.0)
        return self._client.update_item(**kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)


def test_the_lead_forgets_a_slow_write_after_eight_faster_ones(
    local_aws: LocalAws, table: str
) -> None:
    # Given one write that took 0.2 s longer than the others
    client = DelayedWrites(local_aws.dynamodb(), [0.2])
    limiter = DynamoLimiter(client, table)  # type: ignore[arg-type]
    limiter.reserve("s", 0.000_001, horizon=1)
    assert limiter.lead >= 0.2
    # When eight faster writes follow
    for _ in range(8):
        limiter.reserve("s", 0.000_001, horizon=1)
    # Then the lead is theirs: the slowest of the last eight
    assert limiter.lead < 0.2


def test_a_refused_write_is_measured_for_the_lead_too(local_aws: LocalAws, table: str) -> None:
    # Given a closed gate, and writes that take longer than the lead before any write
    slow = FIRST_LEAD_SECONDS + 0.05
    DynamoLimiter(local_aws.dynamodb(), table).close("s", time.time() + 30, "throttled")
    limiter = DynamoLimiter(DelayedWrites(local_aws.dynamodb(), [slow]), table)  # type: ignore[arg-type]
    # When a reservation is refused (its write's condition failed)
    assert isinstance(limiter.reserve("s", 0.01, horizon=1), Denial)
    # Then that write's round trip is the lead (not the first lead, as with none measured)
    assert slow <= limiter.lead < MAX_LEAD_SECONDS


def test_an_interval_below_a_microsecond_still_spaces_slots_a_microsecond_apart(
    local_aws: LocalAws, table: str
) -> None:
    # Given a limiter on a fake clock (slots apart by the spacing, not by time passing)
    _, clock = fake_clock()
    limiter = DynamoLimiter(local_aws.dynamodb(), table, clock=clock)
    # When it reserves blocks at 10 million calls a second, known and adaptive
    known = limiter.reserve("fast", 1e-7, horizon=1, count=3)
    spec = Adaptive(floor=2e6, cap=4e6, increase=1.0, cut=0.5, cooldown=1.0)
    adaptive = limiter.reserve("fast-ar", 1.0, horizon=1, count=3, adaptive=spec)
    again = limiter.reserve("fast-ar", 1.0, horizon=1, count=3, adaptive=spec)
    # Then the slots are one microsecond apart: the finest spacing, never none
    for block in (known, adaptive, again):
        assert isinstance(block, Grant)
        assert block.interval == pytest.approx(1e-6)


def test_with_a_slack_of_the_longest_lead_a_gate_is_checked_at_the_time_of_asking(
    local_aws: LocalAws, table: str
) -> None:
    # A slack of the longest lead cuts the lead to nothing: no grant of such a rate lies before
    # the end of a closure that was still on when it was asked. Given writes 0.24 s slower than
    # usual (a lead of about that, MAX_LEAD_SECONDS at most), and two gates closed for 0.15 s
    limiter = DynamoLimiter(SlowWrites(local_aws.dynamodb(), 0.24), table)  # type: ignore[arg-type]
    limiter.reserve("lead", 0.000_001, horizon=1)
    assert 0.24 <= limiter.lead <= MAX_LEAD_SECONDS
    closer = DynamoLimiter(local_aws.dynamodb(), table)
    until = time.time() + 0.15
    for gate in ("with-slack", "without"):
        closer.close(gate, until, "throttled")
    # When each is asked for a slot at once, with a slack of the longest lead and without one
    slack = limiter.reserve("with-slack", 0.000_001, horizon=1, slack=MAX_LEAD_SECONDS)
    plain = limiter.reserve("without", 0.000_001, horizon=1)
    # Then with the slack the closure is still on as of the asking: no slot at all
    assert isinstance(slack, Denial)
    assert slack.reason == "throttled"
    assert slack.retry_at == pytest.approx(until, abs=1e-5)
    # While without one the gate is checked a lead ahead, past the closure's end, and its slot
    # comes after that end (a call on it never goes earlier than its time)
    assert isinstance(plain, Grant)
    assert plain.slot_at >= until


def test_a_slack_cuts_the_lead_so_an_idle_scopes_slot_is_at_the_time_of_asking(
    local_aws: LocalAws, table: str
) -> None:
    # Given writes 80 ms slower than usual: the lead is at least that
    limiter = DynamoLimiter(SlowWrites(local_aws.dynamodb(), 0.08), table)  # type: ignore[arg-type]
    limiter.reserve("lead", 0.000_001, horizon=1)
    assert limiter.lead >= 0.08
    # When an idle scope is reserved for a rate whose slots may be used 0.5 s late
    asked = time.time()
    grant = limiter.reserve("slack", 0.000_001, horizon=1, slack=0.5)
    answered = time.time()
    # Then its slot is at the time of asking, not a lead ahead: in the past when the answer
    # comes, and still within the slack
    assert isinstance(grant, Grant)
    assert asked <= grant.slot_at < asked + 0.02
    assert answered - grant.slot_at <= 0.5
    # And a slack shorter than the lead cuts it by the slack only
    lead = limiter.lead
    asked = time.time()
    short = limiter.reserve("short", 0.000_001, horizon=1, slack=0.05)
    assert isinstance(short, Grant)
    assert short.slot_at >= asked + lead - 0.05

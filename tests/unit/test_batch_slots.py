"""How many slots one limiter write reserves for a batch's threads (BatchSlots).

A block covers the threads that may ask within moments: neither calling nor already holding a
slot they wait for, and at least BLOCK_SHARE_OF_THREADS of the threads (calls end within the
block's span). Counting the holders too banked slots that nobody came for in time: measured at
100/s with batches of 50, 120 slots were let go late in 20 s.

Also which record a free thread takes (BankedFirst, BatchSlots.offer): one whose scope has a
banked slot no other thread is on its way to, before the next in line; and the batch processor
that runs the threads.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
from aws_lambda_powertools.utilities.batch import process_partial_response
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord

from sweeper.admission import (
    BLOCK_SPAN_SECONDS,
    GATE_RECHECK_LEAD_SECONDS,
    BankedFirst,
    BatchSlots,
    handoff,
)
from sweeper.admission import bank as slots_module
from sweeper.admission.pairing import PairedLimits
from sweeper.config import LATE_SLOT_TOLERANCE_SECONDS
from sweeper.consumer import InOrder, ParallelBatchProcessor
from sweeper.limiter import Adaptive, Denial, Grant, ScopeState
from sweeper.observability import Metric

INTERVAL = 0.01
NOW = 1_000.0


@dataclass
class RecordingLimiter:
    """Grants every request, `count` slots from the far future (or, for a scope in `starts`,
    from NOW + its start, its step apart); remembers each count."""

    counts: list[int] = field(default_factory=list)
    starts: dict[str, tuple[float, float]] = field(default_factory=dict)
    slacks: list[float] = field(default_factory=list)

    def reserve(
        self,
        scope: str,
        interval: float,
        horizon: float,
        count: int = 1,
        adaptive: Adaptive | None = None,
        *,
        slack: float = 0.0,
        tolerance: float = 0.0,
    ) -> Grant | Denial:
        self.counts.append(count)
        self.slacks.append(slack)
        if scope in self.starts:
            start, step = self.starts[scope]
            return Grant(NOW + start, count, step)
        return Grant(NOW + 10.0 + len(self.counts), count, interval)


class Sink:
    def add_metric(self, name: str, unit: str, value: float) -> None:
        return None


def batch_slots(parallel: int, records: int) -> tuple[BatchSlots, RecordingLimiter]:
    limiter = RecordingLimiter()
    slots = BatchSlots(limiter, parallel, {"s": records}, lambda: NOW, Sink())  # type: ignore[arg-type]
    return slots, limiter


def saw_open(slots: BatchSlots, scope: str, at: float) -> None:
    """A gate read asked at `at` found `scope` open, as a look notes each scope it read open
    (`BatchSlots.looked`), without the look."""
    with slots._lock:
        slots._saw_open(scope, at)


def test_the_first_write_reserves_a_slot_for_every_free_thread() -> None:
    slots, limiter = batch_slots(parallel=10, records=50)
    records = [object() for _ in range(10)]

    for record in records:
        _, grant = slots.reserve("s", INTERVAL, 60, record)
        assert isinstance(grant, Grant)

    assert limiter.counts == [10]  # one write; the other nine came from the bank


def test_threads_already_holding_a_slot_are_not_reserved_for_again() -> None:
    # Given 10 threads: 6 calling, 4 holding a slot they wait for
    slots, limiter = batch_slots(parallel=10, records=50)
    records = [object() for _ in range(10)]
    for record in records:
        slots.reserve("s", INTERVAL, 60, record)
    for record in records[:6]:
        slots.calling("s", record)
    # When a calling thread finishes and asks for its next record's slot (the bank is empty)
    finished = records[0]
    slots.done("s", True, finished)
    slots.reserve("s", INTERVAL, 60, object())
    # Then the write covers the one free thread plus the share of threads, not the 4 holders
    # (10 - 5 calling = 5 would count them)
    assert limiter.counts[-1] == 3


def test_a_thread_asking_again_lets_its_held_slot_go() -> None:
    # A slot let go (late, or the gate closed meanwhile) is not held any more: its thread is
    # free again and counted as one that may ask.
    slots, limiter = batch_slots(parallel=10, records=50)
    records = [object() for _ in range(10)]
    for record in records:
        slots.reserve("s", INTERVAL, 60, record)
    for record in records[:3]:  # three called and finished: free
        slots.calling("s", record)
        slots.done("s", True, record)
    slots.reserve("s", INTERVAL, 60, records[3])  # a holder asks again, the bank empty
    # 3 finished + the asker = 4 free (6 still hold theirs); keeping it a holder would say 3
    assert limiter.counts == [10, 4]


def test_one_thread_reserves_one_slot_at_a_time() -> None:
    slots, limiter = batch_slots(parallel=1, records=10)
    for _ in range(3):
        record = object()
        slots.reserve("s", INTERVAL, 60, record)
        slots.calling("s", record)
        slots.done("s", True, record)
    assert limiter.counts == [1, 1, 1]


def test_a_block_never_exceeds_the_records_left() -> None:
    slots, limiter = batch_slots(parallel=10, records=2)
    slots.reserve("s", INTERVAL, 60, object())
    slots.reserve("s", INTERVAL, 60, object())  # the second slot of the block, from the bank
    assert limiter.counts == [2]


class RecordingSink:
    def __init__(self) -> None:
        self.metrics: list[tuple[str, str, float]] = []

    def add_metric(self, name: str, unit: str, value: float) -> None:
        self.metrics.append((name, unit, value))


def test_a_banked_slot_past_its_time_is_let_go_and_counted_never_used_late() -> None:
    # Given a block of three slots, one interval apart from its first
    limiter = RecordingLimiter()
    sink = RecordingSink()
    clock = [NOW]
    slots = BatchSlots(limiter, 10, {"s": 10}, lambda: clock[0], sink)  # type: ignore[arg-type]
    for record in (object(), object(), object()):  # 10 free threads: a block of 10
        slots.reserve("s", INTERVAL, 60, record)
    first_slot = NOW + 10.0 + 1  # RecordingLimiter's first grant
    # When the next banked slot (first + 3 intervals) is exactly at the late tolerance
    clock[0] = first_slot + 3 * INTERVAL + LATE_SLOT_TOLERANCE_SECONDS
    _, kept = slots.reserve("s", INTERVAL, 60, object())
    # Then it is still used
    assert isinstance(kept, Grant)
    assert kept.slot_at == first_slot + 3 * INTERVAL
    assert sink.metrics == []
    # When the bank's next two slots are past the tolerance
    clock[0] = first_slot + 5 * INTERVAL + LATE_SLOT_TOLERANCE_SECONDS + 0.001
    _, fresh = slots.reserve("s", INTERVAL, 60, object())
    # Then each is let go and counted once, and the slot given is the first one still ahead
    assert sink.metrics == [(Metric.LATE_SLOTS, "Count", 1)] * 2
    assert isinstance(fresh, Grant)
    assert fresh.slot_at == first_slot + 6 * INTERVAL


def test_a_record_finished_without_a_call_leaves_one_record_fewer_to_reserve_for() -> None:
    slots, limiter = batch_slots(parallel=10, records=5)
    deferred = object()
    slots.done("s", False, deferred)  # deferred before it took a slot
    slots.reserve("s", INTERVAL, 60, object())
    assert limiter.counts == [4]


def test_a_record_calling_is_no_longer_a_record_to_reserve_for() -> None:
    # Given five records: the first write reserves five slots
    limiter = RecordingLimiter()
    clock = [NOW]
    slots = BatchSlots(limiter, 10, {"s": 5}, lambda: clock[0], RecordingSink())  # type: ignore[arg-type]
    a, b, c = object(), object(), object()
    for record in (a, b, c):
        slots.reserve("s", INTERVAL, 60, record)
    slots.calling("s", a)
    slots.calling("s", b)
    # When the banked slots have passed and the third asks again
    clock[0] = NOW + 60
    slots.reserve("s", INTERVAL, 60, c)
    # Then three are reserved: the records not yet calling
    assert limiter.counts == [5, 3]


def test_a_record_given_up_after_taking_a_slot_no_longer_holds_it() -> None:
    # Given ten threads with slots, five of which give their record up (a gate closed meanwhile)
    slots, limiter = batch_slots(parallel=10, records=50)
    records = [object() for _ in range(10)]
    for record in records:
        slots.reserve("s", INTERVAL, 60, record)
    for record in records[:5]:
        slots.done("s", False, record)
    # When another record asks, the bank empty
    slots.reserve("s", INTERVAL, 60, object())
    # Then the five threads that gave up are free: 10 - 5 still holding
    assert limiter.counts == [10, 5]


def test_a_record_calling_no_longer_holds_its_slot() -> None:
    # Given ten threads with slots: five called and finished, one calling
    slots, limiter = batch_slots(parallel=10, records=50)
    records = [object() for _ in range(10)]
    for record in records:
        slots.reserve("s", INTERVAL, 60, record)
    for record in records[:5]:
        slots.calling("s", record)
        slots.done("s", True, record)
    slots.calling("s", records[5])
    # When a holder asks again with the bank empty
    slots.reserve("s", INTERVAL, 60, records[6])
    # Then the free threads are the five finished and the asker: 10 - 1 calling - 3 holding
    assert limiter.counts == [10, 6]


class WriteOut:
    """A limiter whose write for scope `slow` stays out until `release` is set (at most 5 s)."""

    def __init__(self, slow: str) -> None:
        self.slow = slow
        self.writing = threading.Event()
        self.release = threading.Event()
        self.counts: list[tuple[str, int]] = []
        self.released_in_time: bool | None = None

    def reserve(
        self,
        scope: str,
        interval: float,
        horizon: float,
        count: int = 1,
        adaptive: Adaptive | None = None,
        *,
        slack: float = 0.0,
        tolerance: float = 0.0,
    ) -> Grant | Denial:
        self.counts.append((scope, count))
        if scope == self.slow:
            self.writing.set()
            self.released_in_time = self.release.wait(5.0)
        return Grant(NOW, count, interval)


def test_a_write_out_for_one_scope_does_not_hold_up_another_scopes_call() -> None:
    # Given a batch of scopes a and b whose write for b is out on the network
    limiter = WriteOut(slow="b")
    slots = BatchSlots(limiter, 2, {"a": 1, "b": 1}, lambda: NOW, Sink())  # type: ignore[arg-type]
    b_record, a_record = object(), object()
    waiting = threading.Thread(target=slots.reserve, args=("b", INTERVAL, 60, b_record))
    waiting.start()
    assert limiter.writing.wait(5.0)
    # When a's record reserves and calls meanwhile
    _, granted = slots.reserve("a", INTERVAL, 60, a_record)
    slots.calling("a", a_record)
    limiter.release.set()
    waiting.join(5.0)
    # Then it did so while b's write was still out: the batch's lock is not held across it
    assert isinstance(granted, Grant)
    assert limiter.released_in_time is True


def first_write_out(
    *, closed_before: bool = False
) -> tuple[BatchSlots, WriteOut, threading.Thread]:
    """Two threads of scope s: the first one's write, for a block of two, out on the network
    (after an earlier closure of the scope, with `closed_before`)."""
    limiter = WriteOut(slow="s")
    slots = BatchSlots(limiter, 2, {"s": 2}, lambda: NOW, Sink())  # type: ignore[arg-type]
    if closed_before:
        slots.forget("s")
    first = threading.Thread(target=slots.reserve, args=("s", INTERVAL, 60, object()))
    first.start()
    assert limiter.writing.wait(5.0)
    return slots, limiter, first


def close_during_the_write(slots: BatchSlots, limiter: WriteOut, first: threading.Thread) -> None:
    """The gate closes while the first thread's write is out; then the write answers."""
    slots.forget("s")
    limiter.release.set()
    first.join(5.0)


def test_a_thread_asking_while_its_scopes_write_is_out_takes_a_slot_of_that_block() -> None:
    # Given two threads of one scope, the first one's write out on the network
    slots, limiter, first = first_write_out()
    second_grant: list[Grant | Denial] = []
    second = threading.Thread(
        target=lambda: second_grant.append(slots.reserve("s", INTERVAL, 60, object())[1])
    )
    second.start()
    time.sleep(0.05)  # the second thread is now waiting for the first one's write
    limiter.release.set()
    first.join(5.0)
    second.join(5.0)
    # Then one write reserved for both, and the second took its second slot
    assert limiter.counts == [("s", 2)]
    assert second_grant == [Grant(NOW + INTERVAL)]


def test_a_block_granted_while_the_gate_closed_banks_nothing() -> None:
    # Given a write for a block of two out on the network, and the gate closing meanwhile (after
    # an earlier closure: each one counts, not only the first)
    slots, limiter, first = first_write_out(closed_before=True)
    close_during_the_write(slots, limiter, first)
    # When another record of the scope asks, then its slot is not the block's second
    limiter.slow = ""
    _, granted = slots.reserve("s", INTERVAL, 60, object())
    assert [scope for scope, _ in limiter.counts] == ["s", "s"]
    assert isinstance(granted, Grant)
    assert granted.slot_at == NOW


def test_a_block_granted_while_the_gate_closed_is_no_look_at_an_open_gate() -> None:
    # Given the same write out on the network, and the gate closing meanwhile
    slots, limiter, first = first_write_out()
    close_during_the_write(slots, limiter, first)
    # Then the grant does not count as having seen the gate open, even for a slot right now
    assert not slots.covers("s", NOW)


# -- looks at the gate, shared by a batch's threads ----------------------------------------------


def test_a_granted_reservation_covers_slots_up_to_the_lead_after_it() -> None:
    clock = [NOW]
    slots = BatchSlots(RecordingLimiter(), 2, {"s": 4}, lambda: clock[0], Sink())  # type: ignore[arg-type]
    assert not slots.covers("s", NOW)  # nothing seen yet
    slots.reserve("s", INTERVAL, 60, object())  # asked at NOW
    assert slots.covers("s", NOW + GATE_RECHECK_LEAD_SECONDS - 1e-6)
    assert not slots.covers("s", NOW + GATE_RECHECK_LEAD_SECONDS + 0.001)
    assert not slots.covers("other", NOW)  # per scope


def test_a_look_covers_a_slot_exactly_the_lead_after_it(monkeypatch: pytest.MonkeyPatch) -> None:
    # On a lead that is a binary fraction, so that NOW + lead - NOW is the lead exactly
    monkeypatch.setattr(slots_module, "GATE_RECHECK_LEAD_SECONDS", 0.125)
    slots, _ = batch_slots(parallel=2, records=4)
    saw_open(slots, "s", NOW)
    assert slots.covers("s", NOW + 0.125)
    assert not slots.covers("s", NOW + 0.125 + 2**-20)


def test_the_latest_look_at_an_open_gate_counts_never_an_older_one() -> None:
    slots, _ = batch_slots(parallel=2, records=4)
    saw_open(slots, "s", NOW + 1.0)
    saw_open(slots, "s", NOW + 0.5)  # answered later, asked earlier
    assert slots.covers("s", NOW + 1.0 + GATE_RECHECK_LEAD_SECONDS - 1e-6)
    assert not slots.covers("s", NOW + 1.0 + GATE_RECHECK_LEAD_SECONDS + 0.001)


def test_a_closure_takes_back_every_look_at_an_open_gate() -> None:
    slots, _ = batch_slots(parallel=2, records=4)
    saw_open(slots, "s", NOW)
    slots.forget("s")
    assert not slots.covers("s", NOW)
    saw_open(slots, "s", NOW + 2.0)  # a look after the closure counts again
    assert slots.covers("s", NOW + 2.0)


# -- one look at the gates of several scopes ----------------------------------------------------


OPEN = None  # a gate's closed_until when open


def gate(scope: str, closed_until: float | None = OPEN) -> ScopeState:
    return ScopeState(
        scope, None, closed_until, None if closed_until is None else "throttled", None
    )


def slots_for_a_look() -> tuple[BatchSlots, list[float]]:
    """A batch whose scopes, reserved a second before NOW (no look since), have slots from
    NOW: `held` a thread's at NOW + 0.08; `banked` the first held at NOW + 0.05, the second
    banked at NOW + 0.09; `far` at NOW + 0.15, past a look at NOW's lead; `seen` at NOW + 0.09,
    covered by a look just before NOW; and `asker`, the scope of the thread about to look."""
    clock = [NOW - 1.0]
    limiter = RecordingLimiter(
        starts={
            "held": (0.08, 0.0),
            "banked": (0.05, 0.04),
            "far": (0.15, 0.0),
            "seen": (0.09, 0.0),
        }
    )
    pending = {"asker": 1, "held": 1, "banked": 2, "far": 1, "seen": 1}
    slots = BatchSlots(limiter, 10, pending, lambda: clock[0], Sink())  # type: ignore[arg-type]
    for scope in ("held", "banked", "far", "seen"):
        slots.reserve(scope, INTERVAL, 60, object())
    clock[0] = NOW
    saw_open(slots, "seen", NOW - 0.005)
    return slots, clock


def test_a_look_reads_the_gates_of_the_scopes_whose_slots_it_will_cover() -> None:
    slots, _ = slots_for_a_look()
    # When the asker's thread looks at NOW
    look = slots.gates_to_read("asker", NOW, most=100)
    # Then it reads its own gate first, then those of the scopes with a slot held or banked
    # within the lead after NOW, the earliest first, not those covered or beyond the lead
    assert look.scopes == ["asker", "banked", "held"]
    assert look.at == NOW


def test_a_look_reads_at_most_as_many_gates_as_its_limiter_takes_at_once() -> None:
    slots, _ = slots_for_a_look()
    assert slots.gates_to_read("asker", NOW, most=2).scopes == ["asker", "banked"]
    assert slots.gates_to_read("asker", NOW).scopes == ["asker"]  # one gate a read


def test_a_slot_past_use_needs_no_look() -> None:
    # Given the batch above, a second later
    slots, clock = slots_for_a_look()
    clock[0] = NOW + 1.0
    # Then a look then reads none of the slots of the past (the banked one let go, late)
    assert slots.gates_to_read("asker", NOW + 1.0, most=100).scopes == ["asker"]


def test_a_look_covers_each_scope_it_read_open_as_of_when_it_was_asked() -> None:
    slots, _ = slots_for_a_look()
    look = slots.gates_to_read("asker", NOW, most=100)
    # When every gate read is open
    slots.looked(look, {scope: gate(scope) for scope in look.scopes}, NOW + 0.01)
    # Then the slots of each are covered up to the lead after NOW, whichever thread has them
    for scope, slot in (("asker", NOW + 0.05), ("banked", NOW + 0.09), ("held", NOW + 0.08)):
        assert slots.covers(scope, slot)
    assert not slots.covers("banked", NOW + GATE_RECHECK_LEAD_SECONDS + 0.001)
    assert not slots.covers("far", NOW + 0.15)  # not read: it looks itself


def test_a_scope_a_look_found_closed_loses_its_banked_slots_and_every_earlier_look() -> None:
    slots, _ = slots_for_a_look()
    look = slots.gates_to_read("asker", NOW, most=100)
    saw_open(slots, "held", NOW - 0.5)  # an older look
    # When the look finds `banked` and `held` closed
    closed = {"banked": gate("banked", NOW + 5.0), "held": gate("held", NOW + 5.0)}
    slots.looked(look, {"asker": gate("asker"), **closed}, NOW + 0.01)
    # Then no thread takes a banked slot of `banked`, nor calls on an earlier look at either
    assert slots.offer(always) is None
    assert not slots.covers("held", NOW - 0.5)
    assert not slots.covers("banked", NOW + 0.09)
    assert slots.covers("asker", NOW + 0.05)


def test_a_scope_left_unread_by_a_look_is_not_covered_by_it() -> None:
    slots, _ = slots_for_a_look()
    look = slots.gates_to_read("asker", NOW, most=100)
    # When the answer leaves `held` out (DynamoDB's UnprocessedKeys)
    slots.looked(look, {"asker": gate("asker"), "banked": gate("banked")}, NOW + 0.01)
    # Then its thread is not covered: it looks itself
    assert not slots.covers("held", NOW + 0.08)
    assert slots.covers("banked", NOW + 0.09)


def test_a_scope_closed_by_the_batch_while_a_look_was_out_is_not_covered_by_it() -> None:
    slots, _ = slots_for_a_look()
    look = slots.gates_to_read("asker", NOW, most=100)
    # When a call of `held` draws a 429 while the read is out, which DynamoDB answered before
    slots.forget("held")
    slots.looked(look, {scope: gate(scope) for scope in look.scopes}, NOW + 0.01)
    # Then the open gate the read saw does not count for `held`, and does for the others
    assert not slots.covers("held", NOW + 0.08)
    assert slots.covers("banked", NOW + 0.09)


# -- one look at the wide limit's item for a paired batch ----------------------------------------


WIDE = "app:app"


@dataclass
class BlockPaired:
    """A paired limiter whose one write gives the block `slots` (slot times per key)."""

    slots: dict[str, list[float]]

    def reserve_paired(
        self,
        wide: str,
        wide_interval: float,
        wants: list[Any],
        horizon: float,
        span: float,
        most: int,
    ) -> tuple[dict[str, list[float]], Denial | None]:
        return {key: list(at) for key, at in self.slots.items()}, None

    def close_narrow(self, wide: str, key: str, until: float) -> None:
        raise AssertionError("not called here")

    def paired_states(self, wide: str, keys: Any) -> dict[str, ScopeState]:
        raise AssertionError("not called here")


def paired_slots_for_a_look() -> tuple[BatchSlots, list[float]]:
    """The batch of `slots_for_a_look`, its scopes under a wide limit too (PairedLimits): one
    paired write a second before NOW gave `held` its slot (held by its thread) and banked the
    others'; a thread of `banked` holds its first."""
    clock = [NOW - 1.0]
    limiter = BlockPaired(
        {
            "held": [NOW + 0.08],
            "banked": [NOW + 0.05, NOW + 0.09],
            "far": [NOW + 0.15],
            "seen": [NOW + 0.09],
        }
    )
    pending = {"asker": 1, "held": 1, "banked": 2, "far": 1, "seen": 1}
    slots = BatchSlots(
        limiter,  # type: ignore[arg-type]
        10,
        pending,
        lambda: clock[0],
        Sink(),
        paired=PairedLimits(WIDE, 0.01),
    )
    slots.reserve("held", 0.5, 60, object())
    slots.reserve("banked", 0.5, 60, object())
    clock[0] = NOW
    saw_open(slots, "seen", NOW - 0.005)
    return slots, clock


def test_a_paired_look_reads_every_scope_it_covers_in_its_one_read() -> None:
    slots, _ = paired_slots_for_a_look()
    # When the asker's thread looks at NOW, with no bound on the gates (one item holds them)
    look = slots.gates_to_read("asker", NOW, most=None)
    # Then it reads the scopes whose slots it will cover, as a batched look does
    assert look.scopes == ["asker", "banked", "held"]
    # When the item says every gate is open, the wide limit's too
    slots.looked(look, {WIDE: gate(WIDE), **{k: gate(k) for k in look.scopes}}, NOW + 0.01)
    # Then each is covered as of the asking
    for scope, slot in (("asker", NOW + 0.05), ("banked", NOW + 0.09), ("held", NOW + 0.08)):
        assert slots.covers(scope, slot)
    assert not slots.covers("far", NOW + 0.15)


def test_a_paired_look_that_finds_the_wide_limit_closed_takes_back_every_scopes_slots() -> None:
    slots, _ = paired_slots_for_a_look()
    look = slots.gates_to_read("asker", NOW, most=None)
    # When the item says the wide limit is closed (so is every narrow key it tells)
    until = NOW + 5.0
    closed = {WIDE: gate(WIDE, until), **{k: gate(k, until) for k in look.scopes}}
    slots.looked(look, closed, NOW + 0.01)
    # Then no scope is covered, not even one an earlier look covered but this one did not read,
    # and no banked slot of any scope is taken
    assert not slots.covers("seen", NOW + 0.09)
    assert not slots.covers("asker", NOW + 0.05)
    assert slots.offer(always) is None


def test_a_paired_look_during_which_the_wide_limit_closed_covers_no_scope() -> None:
    slots, _ = paired_slots_for_a_look()
    look = slots.gates_to_read("asker", NOW, most=None)
    # When a call draws a 429 of the wide limit while the read is out (answered before it)
    slots.forget(WIDE)
    slots.looked(look, {WIDE: gate(WIDE), **{k: gate(k) for k in look.scopes}}, NOW + 0.01)
    # Then the open gates the read saw count for no scope
    for scope, slot in (("asker", NOW + 0.05), ("banked", NOW + 0.09), ("held", NOW + 0.08)):
        assert not slots.covers(scope, slot)


def test_a_scope_a_paired_look_found_closed_alone_is_forgotten_and_the_others_covered() -> None:
    slots, _ = paired_slots_for_a_look()
    look = slots.gates_to_read("asker", NOW, most=None)
    # When the item holds a closure of `held` only
    states = {WIDE: gate(WIDE), **{k: gate(k) for k in look.scopes}}
    states["held"] = gate("held", NOW + 5.0)
    slots.looked(look, states, NOW + 0.01)
    # Then `held` is not covered; the others are, and keep their banked slots
    assert not slots.covers("held", NOW + 0.08)
    assert slots.covers("banked", NOW + 0.09)
    assert slots.covers("seen", NOW + 0.09)
    assert slots.offer(always) is not None


# -- banked slots offered to free threads (BankedFirst) ------------------------------------------


def offered_slots(
    pending: dict[str, int], clock: list[float] | None = None, sink: Any = None
) -> tuple[BatchSlots, RecordingLimiter]:
    limiter = RecordingLimiter()
    now = clock or [NOW]
    slots = BatchSlots(limiter, 10, pending, lambda: now[0], sink or Sink())  # type: ignore[arg-type]
    return slots, limiter


def in_another_thread[T](function: Callable[[], T]) -> T:
    """What `function` returns when another thread runs it (offers are per thread)."""
    results: list[T] = []
    thread = threading.Thread(target=lambda: results.append(function()))
    thread.start()
    thread.join(5.0)
    (result,) = results
    return result


def always(scope: str) -> bool:
    return True


def test_a_free_thread_is_offered_the_scope_of_the_earliest_banked_slot() -> None:
    # Given banks for b (slots from NOW + 11) and then a (from NOW + 12)
    slots, limiter = offered_slots({"a": 3, "b": 3})
    slots.reserve("b", INTERVAL, 60, object())
    slots.reserve("a", INTERVAL, 60, object())
    assert limiter.counts == [3, 3]
    # When a free thread asks which record to take, then it is b's: its slot comes first
    assert slots.offer(always) == "b"


def test_a_banked_slot_a_thread_is_on_its_way_to_is_not_offered_to_another() -> None:
    # Given one banked slot of a (a block of two, one granted)
    slots, _ = offered_slots({"a": 2})
    slots.reserve("a", INTERVAL, 60, object())
    # When this thread is offered it, then another thread is not
    assert slots.offer(always) == "a"
    assert in_another_thread(lambda: slots.offer(always)) is None
    # When this thread finishes its record without asking for a slot, then the slot is free
    # for another thread again
    slots.done("a", False, object())
    assert in_another_thread(lambda: slots.offer(always)) == "a"


def test_a_thread_offered_again_gives_up_the_slot_it_was_offered_before() -> None:
    slots, _ = offered_slots({"a": 2})
    slots.reserve("a", INTERVAL, 60, object())
    assert slots.offer(always) == "a"
    assert slots.offer(always) == "a"  # not counted twice: the one slot is still its own
    assert in_another_thread(lambda: slots.offer(always)) is None


def test_a_thread_asking_for_its_slot_is_no_longer_on_its_way() -> None:
    # Given two banked slots of a, this thread on its way to one of them
    slots, _ = offered_slots({"a": 3})
    slots.reserve("a", INTERVAL, 60, object())
    assert slots.offer(always) == "a"
    # When it asks for its slot (and takes one of the two)
    slots.reserve("a", INTERVAL, 60, object())
    # Then the other banked slot is offered to another thread
    assert in_another_thread(lambda: slots.offer(always)) == "a"


def test_banked_slots_already_past_are_not_offered_but_let_go_and_counted() -> None:
    clock = [NOW]
    sink = RecordingSink()
    slots, _ = offered_slots({"a": 3}, clock, sink)
    slots.reserve("a", INTERVAL, 60, object())  # slots NOW + 11, + 11.01, + 11.02
    clock[0] = NOW + 11 + 2 * INTERVAL + LATE_SLOT_TOLERANCE_SECONDS + 0.001
    assert slots.offer(always) is None
    assert sink.metrics == [(Metric.LATE_SLOTS, "Count", 1)] * 2


def test_a_scope_with_no_record_left_to_take_is_not_offered() -> None:
    # Given banks for a (first) and b
    slots, _ = offered_slots({"a": 3, "b": 3})
    slots.reserve("a", INTERVAL, 60, object())
    slots.reserve("b", INTERVAL, 60, object())
    # When every record of a is taken already, then b is offered
    assert slots.offer(lambda scope: scope != "a") == "b"
    assert slots.offer(lambda scope: False) is None


def test_a_block_is_not_cut_to_its_scopes_share_of_the_records() -> None:
    # Given a batch of 50 records over 10 scopes and 10 free threads (cut to s0's share of the
    # records, 5 of 50, the block would be one slot)
    slots, limiter = offered_slots({f"s{i}": 5 for i in range(10)})
    # When the first thread asks for s0, then the block is every record of s0: free threads
    # come for banked slots whatever scope the batch's next record has
    slots.reserve("s0", INTERVAL, 60, object())
    assert limiter.counts == [5]


def test_a_block_spans_at_most_the_block_span() -> None:
    # Given slots 0.1 s apart and 50 records of the scope for 10 free threads
    slots, limiter = offered_slots({"s": 50})
    slots.reserve("s", 0.1, 60, object())
    # Then the block is three slots: its first and the two within BLOCK_SPAN_SECONDS after it
    assert BLOCK_SPAN_SECONDS == 0.2
    assert limiter.counts == [3]


def test_a_block_spans_exactly_the_block_span_when_the_interval_divides_it() -> None:
    slots, limiter = offered_slots({"s": 50})
    slots.reserve("s", BLOCK_SPAN_SECONDS / 4, 60, object())
    assert limiter.counts == [5]


# -- the order a batch's threads take its records in ---------------------------------------------


def records_of(*scopes: str) -> tuple[list[dict[str, Any]], dict[str, str]]:
    records = [{"messageId": f"m-{i}"} for i in range(len(scopes))]
    return records, {f"m-{i}": scope for i, scope in enumerate(scopes) if scope}


def test_without_banked_slots_records_are_taken_in_the_order_received() -> None:
    slots, _ = offered_slots({"a": 2, "b": 2})
    records, scopes = records_of("a", "b", "a", "b")
    order = BankedFirst(records, scopes, slots)
    assert [order.take() for _ in range(5)] == [0, 1, 2, 3, None]


def test_a_record_of_a_scope_with_a_banked_slot_is_taken_first() -> None:
    # Given records a, b, c, a, c and a bank of c's slots (a block of two: one banked)
    slots, _ = offered_slots({"a": 2, "b": 1, "c": 2})
    records, scopes = records_of("a", "b", "c", "a", "c")
    order = BankedFirst(records, scopes, slots)
    slots.reserve("c", INTERVAL, 60, object())
    # When a thread takes its next record, then it is the first record of c
    assert order.take() == 2
    # When it has asked for its slot (the bank is empty), the others come in order, each once
    slots.reserve("c", INTERVAL, 60, object())
    assert [order.take() for _ in range(5)] == [0, 1, 3, 4, None]


def test_a_batch_holding_the_leases_it_waits_for_looks_in_the_table_seldom() -> None:
    clock = [NOW]
    slots = BatchSlots(RecordingLimiter(), 4, {"s": 4}, lambda: clock[0], Sink())  # type: ignore[arg-type]
    # A batch whose calls will hand on the lease its thread misses looks once per the longer
    # interval: not after the shorter one
    assert slots.may_poll_leases(holding=True)
    clock[0] = NOW + handoff.LEASE_POLL_SECONDS
    assert not slots.may_poll_leases(holding=True)
    clock[0] = NOW + handoff.LEASE_POLL_HOLDING_SECONDS
    assert slots.may_poll_leases(holding=True)
    # A thread whose batch holds none of the leases it misses looks once per the shorter one
    clock[0] += handoff.LEASE_POLL_SECONDS
    assert slots.may_poll_leases()


def test_the_batch_knows_while_some_record_is_taken_by_no_thread() -> None:
    # Given a batch of three records taken in order (one with no scope: it is taken too)
    slots, _ = offered_slots({"a": 2})
    records, scopes = records_of("a", "", "a")
    # Before the order counts them, nothing is known to be left
    assert not slots.records_untaken()
    order = BankedFirst(records, scopes, slots)
    # When threads take them one by one, then records are left until the last is taken
    left = []
    while order.take() is not None:
        left.append(slots.records_untaken())
    assert left == [True, True, False]


def test_records_without_a_scope_are_taken_in_order_too() -> None:
    # A record that will ask for no slot (malformed, orphan, settled) has no scope here
    slots, _ = offered_slots({"a": 2})
    records, scopes = records_of("", "a", "")
    order = BankedFirst(records, scopes, slots)
    assert [order.take() for _ in range(4)] == [0, 1, 2, None]


def test_in_order_hands_out_each_record_once_to_many_threads() -> None:
    order = InOrder(list(range(500)))
    taken: list[int] = []
    lock = threading.Lock()

    def drain() -> None:
        while (index := order.take()) is not None:
            with lock:
                taken.append(index)

    threads = [threading.Thread(target=drain) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(5.0)
    assert sorted(taken) == list(range(500))
    assert order.take() is None  # and says so, once none is left, to every thread that asks


def test_a_bank_whose_records_are_all_taken_does_not_stop_a_thread() -> None:
    # Given records a and c, and slots of c banked beyond c's one record (a record given up
    # before it took its slot leaves them)
    slots, _ = offered_slots({"a": 1, "c": 3})
    records, scopes = records_of("a", "c")
    order = BankedFirst(records, scopes, slots)
    slots.reserve("c", INTERVAL, 60, object())
    assert order.take() == 1  # c's record, for the bank
    slots.reserve("c", INTERVAL, 60, object())  # it takes one of the two banked slots
    # When the thread takes its next record, one of c's slots still banked
    # Then it is a's, the next in line: a worker that got no record would stop for good
    assert order.take() == 0
    assert order.take() is None


def test_the_earliest_bank_is_found_by_its_first_slot_whatever_the_order_banked() -> None:
    # Given a bank of a (slots 12.01, 12.02) and then one of b (11.9, 12.8): b's first slot is
    # the earliest, its second is not
    limiter = RecordingLimiter(starts={"a": (12.0, 0.01), "b": (11.0, 0.9)})
    slots = BatchSlots(limiter, 10, {"a": 3, "b": 3}, lambda: NOW, Sink())  # type: ignore[arg-type]
    slots.reserve("a", INTERVAL, 60, object())
    slots.reserve("b", INTERVAL, 60, object())
    assert slots.offer(always) == "b"


def test_a_parallel_processor_used_on_its_own_takes_every_record_in_the_order_received() -> None:
    # Given Powertools' partial batch response over five records, one of which fails, handled
    # three at a time without process_batch's order
    event = {
        "Records": [
            {"messageId": f"m-{i}", "body": str(i), "receiptHandle": f"r-{i}"} for i in range(5)
        ]
    }
    handled: list[str] = []

    def handle(record: SQSRecord) -> None:
        handled.append(record.body)
        if record.body == "3":
            raise ValueError("record 3 fails")

    response = process_partial_response(event, handle, ParallelBatchProcessor(3), None)
    # Then each record was handled once, and only the failed one comes back
    assert sorted(handled) == ["0", "1", "2", "3", "4"]
    assert response == {"batchItemFailures": [{"itemIdentifier": "m-3"}]}


def test_a_parallel_processor_needs_at_least_one_call_at_a_time() -> None:
    with pytest.raises(ValueError, match=r"^parallel_calls must be at least 1$"):
        ParallelBatchProcessor(0)


@dataclass
class PairedRecorder:
    """Plans every paired block with the real arithmetic (sweeper.limiter.paired) on an item
    kept here, as DynamoLimiter would on the wide limit's item; remembers each block."""

    blocks: list[dict[str, list[float]]] = field(default_factory=list)
    item: Any = None

    def reserve_paired(
        self,
        wide: str,
        wide_interval: float,
        wants: list[Any],
        horizon: float,
        span: float,
        most: int,
    ) -> tuple[dict[str, list[float]], Denial | None]:
        from sweeper.limiter.paired import US, Block, SharedItem, plan_block

        item = self.item or SharedItem()
        real = int(NOW * US)
        plan = plan_block(
            item,
            round(wide_interval * US),
            wants,
            real=real,
            now=real,
            horizon=int(horizon * US),
            span=int(span * US),
            most=most,
        )
        if not isinstance(plan, Block):
            return {}, plan
        self.item = SharedItem(
            version=item.version + 1, tat=plan.tat, next_free={**item.next_free, **plan.next_free}
        )
        by_key: dict[str, list[float]] = {}
        for key, at in plan.slots:
            by_key.setdefault(key, []).append(at / US)
        self.blocks.append({key: list(at) for key, at in by_key.items()})
        return by_key, plan.asker

    def close_narrow(self, wide: str, key: str, until: float) -> None:
        raise AssertionError("not called here")

    def paired_states(self, wide: str, keys: Any) -> Any:
        raise AssertionError("not called here")

    def reserve(self, *args: Any, **kwargs: Any) -> Grant | Denial:
        raise AssertionError("a paired batch reserves its scopes on the wide limit's item")


def test_a_paired_write_banks_a_slot_for_each_scope_whose_turn_has_come() -> None:
    # Given a batch holding records of three stores (2/s each) under an app limit (100/s),
    # ten threads, and the stores' limits reserved on the app's item
    limiter = PairedRecorder()
    paired = PairedLimits("app:app", 0.01)
    slots = BatchSlots(
        limiter,  # type: ignore[arg-type]
        10,
        {"s0": 2, "s1": 2, "s2": 2},
        lambda: NOW,
        Sink(),
        paired=paired,
    )
    # When a record of s1 asks
    _, first = slots.reserve("s1", 0.5, 5.0, object())
    # Then one write gave s1 the first app slot and s0 and s2 the next two (each store's
    # second record must wait its own half second, beyond the block's span), banked
    assert limiter.blocks == [{"s1": [NOW], "s0": [NOW + 0.01], "s2": [NOW + 0.02]}]
    assert first == Grant(NOW)
    # and records of s0 and s2 take their banked slots without a write
    assert slots.reserve("s0", 0.5, 5.0, object())[1] == Grant(NOW + 0.01)
    assert slots.reserve("s2", 0.5, 5.0, object())[1] == Grant(NOW + 0.02)
    assert len(limiter.blocks) == 1


def test_a_closed_wide_limit_takes_back_every_scopes_banked_slots() -> None:
    limiter = PairedRecorder()
    paired = PairedLimits("app:app", 0.01)
    slots = BatchSlots(
        limiter,  # type: ignore[arg-type]
        10,
        {"s0": 2, "s1": 2},
        lambda: NOW,
        Sink(),
        paired=paired,
    )
    slots.reserve("s0", 0.5, 5.0, object())
    assert limiter.blocks == [{"s0": [NOW], "s1": [NOW + 0.01]}]
    # When the app's gate closes (a 429 the app's)
    slots.forget("app:app")
    # Then s1's banked slot is not used: its record asks the limiter again, and is told to
    # wait for its store's next turn
    _requested, decision = slots.reserve("s1", 0.5, 5.0, object())
    assert isinstance(decision, Denial)
    assert decision.reason == "rate"
    assert not slots.covers("s1", NOW + 0.01)


def test_a_lease_is_handed_on_to_a_waiting_thread_of_the_batch_without_a_write() -> None:
    slots, _ = batch_slots(parallel=4, records=4)
    # With no thread waiting, an ending call's lease goes back to the table
    assert not slots.hand_off("vendor", 3, "holder-a")
    # With one waiting, it is handed on as it is (index and the holder its item names)
    got: list[tuple[int, str] | None] = []
    waiter = threading.Thread(target=lambda: got.append(slots.wait_for_lease("vendor", 2.0)))
    waiter.start()
    deadline = time.monotonic() + 2.0
    while not slots.hand_off("vendor", 3, "holder-a"):
        assert time.monotonic() < deadline, "the waiter never waited"
        time.sleep(0.005)
    waiter.join()
    assert got == [(3, "holder-a")]
    assert slots.leftover_leases() == []


def test_a_lease_handed_on_that_nobody_took_is_released_at_the_end() -> None:
    slots, _ = batch_slots(parallel=4, records=4)
    # A waiter that timed out before taking it: none waits now
    assert slots.wait_for_lease("vendor", 0.01) is None
    assert not slots.hand_off("vendor", 1, "holder-b")
    assert slots.leftover_leases() == []
    # and while the cap is full, the batch looks in the table once per poll interval
    assert slots.may_poll_leases()
    assert not slots.may_poll_leases()
    slots.lease_found()
    assert slots.may_poll_leases()


def test_a_look_takes_a_lease_for_each_waiting_thread_and_hands_the_others_on() -> None:
    slots, _ = batch_slots(parallel=4, records=4)
    # Given three threads of the batch waiting for a lease, one already handed on to them
    slots.waiting_for_leases(3)
    assert slots.hand_off("vendor", 0, "holder-a")
    # Then a look takes two more (one each for those not yet served)
    assert slots.leases_wanted("vendor") == 2
    # And what it took beyond its own reaches the others without a write
    slots.took_leases("vendor", 2, [(4, "holder-b")])
    assert slots.leases_wanted("vendor") == 1
    assert slots.take_handed("vendor") == (0, "holder-a")
    assert slots.take_handed("vendor") == (4, "holder-b")


def test_a_banked_slot_of_a_rate_with_slack_is_used_within_its_slack_at_once() -> None:
    # Given a rate with a slack of 0.5 s, and a block of three slots banked
    limiter = RecordingLimiter()
    sink = RecordingSink()
    clock = [NOW]
    slots = BatchSlots(limiter, 3, {"s": 10}, lambda: clock[0], sink, slack_seconds=0.5)  # type: ignore[arg-type]
    # RecordingLimiter's first grant, as the batch keeps it
    first_slot = NOW + 10.0 + 1
    slots.reserve("s", INTERVAL, 60, object())
    assert limiter.counts == [3]
    # When a thread asks 0.4 s after the second slot's time (long past the late tolerance)
    clock[0] = first_slot + INTERVAL + 0.4
    _, kept = slots.reserve("s", INTERVAL, 60, object())
    # Then it takes that slot from the bank, with no write, and nothing is let go
    assert kept == Grant(first_slot + INTERVAL)
    assert limiter.counts == [3]
    assert sink.metrics == []
    # (the write told the limiter the slack: it need not plan its slots a lead ahead)
    assert limiter.slacks == [0.5]
    # And a slot is usable up to its slack and the late tolerance after its time, not later
    assert slots.usable_for == pytest.approx(0.5 + LATE_SLOT_TOLERANCE_SECONDS)
    clock[0] = first_slot + 2 * INTERVAL + slots.usable_for + 0.001
    _, fresh = slots.reserve("s", INTERVAL, 60, object())
    assert sink.metrics == [(Metric.LATE_SLOTS, "Count", 1)]
    assert len(limiter.counts) == 2  # a new write
    assert isinstance(fresh, Grant)
    assert fresh.slot_at == NOW + 10.0 + 2


def test_a_banked_slot_is_used_exactly_its_slack_and_tolerance_after_its_time() -> None:
    limiter = RecordingLimiter()
    clock = [NOW]
    slots = BatchSlots(limiter, 3, {"s": 10}, lambda: clock[0], Sink(), slack_seconds=0.25)  # type: ignore[arg-type]
    slots.reserve("s", INTERVAL, 60, object())
    second = NOW + 10.0 + 1 + INTERVAL
    clock[0] = second + slots.usable_for
    assert slots.reserve("s", INTERVAL, 60, object())[1] == Grant(second)
    assert limiter.counts == [3]


def test_a_closure_takes_back_the_banked_slots_of_a_rate_with_slack() -> None:
    # Given slots banked within their slack
    limiter = RecordingLimiter()
    clock = [NOW]
    slots = BatchSlots(limiter, 3, {"s": 10}, lambda: clock[0], Sink(), slack_seconds=0.5)  # type: ignore[arg-type]
    slots.reserve("s", INTERVAL, 60, object())
    clock[0] = NOW + 10.0 + 1 + 0.2
    # When the gate closes
    slots.forget("s")
    # Then none of them is used: the next record asks the limiter again
    slots.reserve("s", INTERVAL, 60, object())
    assert len(limiter.counts) == 2


def test_a_paired_batch_uses_the_smaller_of_the_two_slacks() -> None:
    # A paired slot is both limits' slot: it may be used late only as far as both allow
    wide = PairedLimits("app:app", 0.01, wide_slack=0.2)
    narrow_more = BatchSlots(
        PairedRecorder(),  # type: ignore[arg-type]
        10,
        {"s0": 2},
        lambda: NOW,
        Sink(),
        paired=wide,
        slack_seconds=0.5,
    )
    assert narrow_more.usable_for == pytest.approx(0.2 + LATE_SLOT_TOLERANCE_SECONDS)
    no_wide_slack = BatchSlots(
        PairedRecorder(),  # type: ignore[arg-type]
        10,
        {"s0": 2},
        lambda: NOW,
        Sink(),
        paired=PairedLimits("app:app", 0.01),
        slack_seconds=0.5,
    )
    assert no_wide_slack.usable_for == LATE_SLOT_TOLERANCE_SECONDS


@pytest.mark.parametrize(("slack", "block"), [(0.5, 8), (0.0, 3)])
def test_a_block_of_a_rate_with_slack_covers_the_calls_expected_within_the_slack(
    slack: float, block: int
) -> None:
    # Given ten threads, seven of them waiting for a concurrency lease, and the scope's last
    # eight calls started one every 62.5 ms (16 a second, as leases came back)
    limiter = RecordingLimiter()
    clock = [NOW]
    slots = BatchSlots(limiter, 10, {"s": 100}, lambda: clock[0], Sink(), slack_seconds=slack)  # type: ignore[arg-type]
    slots.waiting_for_leases(7)
    for i in range(8):
        clock[0] = NOW + 0.0625 * i
        record = object()
        slots.reserve("s", INTERVAL, 60, record)
        slots.calling("s", record)
        slots.done("s", True, record)
    slots.forget("s")  # nothing banked left
    # When the next write is made
    slots.reserve("s", INTERVAL, 60, object())
    # Then with a slack of 0.5 s it reserves the eight calls expected within it; without a
    # slack, the share of the threads (3 of 10), as before
    assert limiter.counts[-1] == block


def test_a_lease_handed_on_wakes_the_thread_waiting_for_its_cap_not_another_caps() -> None:
    slots, _ = batch_slots(parallel=4, records=4)
    got: dict[str, tuple[int, str] | None] = {}
    took_at: dict[str, float] = {}

    def wait(key: str) -> None:
        got[key] = slots.wait_for_lease(key, 3.0)
        took_at[key] = time.monotonic()

    # Given a thread waiting for the tenant cap "cap:a", and after it one waiting for "cap:b"
    first = threading.Thread(target=wait, args=("cap:a",))
    first.start()
    deadline = time.monotonic() + 2.0
    while slots._lease_waiters < 1:
        assert time.monotonic() < deadline, "the first waiter never waited"
        time.sleep(0.005)
    second = threading.Thread(target=wait, args=("cap:b",))
    second.start()
    while slots._lease_waiters < 2:
        assert time.monotonic() < deadline, "the second waiter never waited"
        time.sleep(0.005)
    # When a call of the batch ends holding a lease of "cap:b"
    handed_at = time.monotonic()
    assert slots.hand_off("cap:b", 2, "holder-b")
    second.join()
    # Then the thread waiting for "cap:b" has it at once, not at the end of its 3 s wait
    assert got["cap:b"] == (2, "holder-b")
    assert took_at["cap:b"] - handed_at < 1.0
    # And the other still waits for its own cap's lease
    assert first.is_alive()
    assert slots.hand_off("cap:a", 5, "holder-a")
    first.join()
    assert got["cap:a"] == (5, "holder-a")


def test_a_slot_spent_without_a_call_is_a_banked_one_when_the_batch_has_one() -> None:
    # Given a batch whose first write banked slots of scope "s" (NOW + 1 s onwards)
    limiter = RecordingLimiter(starts={"s": (1.0, INTERVAL)})
    slots = BatchSlots(limiter, 10, {"s": 50}, lambda: NOW, Sink())  # type: ignore[arg-type]
    _, first = slots.reserve("s", INTERVAL, 60, object())
    assert limiter.counts == [10]
    # When a late send spends one slot of the scope
    assert slots.spend_one("s", INTERVAL, 1.0) is True
    # Then it was the next banked one, with no write: the next record gets the one after it
    assert limiter.counts == [10]
    _, next_grant = slots.reserve("s", INTERVAL, 60, object())
    assert isinstance(first, Grant)
    assert isinstance(next_grant, Grant)
    assert next_grant.slot_at == pytest.approx(first.slot_at + 2 * INTERVAL)


def test_a_slot_spent_without_a_call_is_reserved_when_none_is_banked() -> None:
    # Given a batch with nothing banked
    slots, limiter = batch_slots(parallel=10, records=50)
    # When a late send spends one slot: one write of one slot, within the horizon given
    assert slots.spend_one("s", INTERVAL, 1.0) is True
    assert limiter.counts == [1]


def test_a_paired_slot_spent_without_a_call_is_one_slot_of_both_limits() -> None:
    # Given stores (2/s) under an app limit (100/s), their limits paired on the app's item, and
    # a batch with nothing banked for s1 (its one record's slot was taken and called on)
    limiter = PairedRecorder()
    slots = BatchSlots(
        limiter,  # type: ignore[arg-type]
        10,
        {"s1": 1},
        lambda: NOW,
        Sink(),
        paired=PairedLimits("app:app", 0.01),
    )
    slots.reserve("s1", 0.5, 5.0, object())
    # When a late send of s1 spends one of its slots
    assert slots.spend_one("s1", 0.5, 1.0) is True
    # Then one paired write took s1's next slot (its own half second on) and with it an app slot
    assert limiter.blocks == [{"s1": [NOW]}, {"s1": [NOW + 0.5]}]
    assert limiter.item.tat == round((NOW + 0.5 + 0.01) * 1_000_000)


@pytest.mark.parametrize(
    ("slack", "paired"),
    [
        (0.0, None),
        (0.2, None),
        # a slack of at least the limiter's longest lead: still called on from the slot's time
        (0.5, None),
        (0.5, PairedLimits("app:all", 0.02, 0.5)),
    ],
)
def test_a_batchs_slots_keep_the_limiters_time_whatever_its_slack(
    slack: float, paired: PairedLimits | None
) -> None:
    limiter = RecordingLimiter(starts={"s": (0.05, INTERVAL)})
    slots = BatchSlots(
        limiter,  # type: ignore[arg-type]
        3,
        {"s": 10},
        lambda: NOW,
        Sink(),
        paired=paired,
        slack_seconds=slack,
    )
    if paired is None:
        _, got = slots.reserve("s", INTERVAL, 60, object())
        assert got == Grant(NOW + 0.05)

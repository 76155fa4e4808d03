"""How many slots one limiter write reserves for a batch's threads (BatchSlots).

A block covers the threads that may ask within moments: neither calling nor already holding a
slot they wait for, and at least BLOCK_SHARE_OF_THREADS of the threads (calls end within the
block's span). Counting the holders too banked slots that nobody came for in time: measured at
100/s with batches of 50, 120 slots were let go late in 20 s.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sweeper.consumer import BatchSlots
from sweeper.limiter import Adaptive, Denial, Grant

INTERVAL = 0.01
NOW = 1_000.0


@dataclass
class RecordingLimiter:
    """Grants every request, `count` slots from the far future; remembers each count."""

    counts: list[int] = field(default_factory=list)

    def reserve(
        self,
        scope: str,
        interval: float,
        horizon: float,
        count: int = 1,
        adaptive: Adaptive | None = None,
    ) -> Grant | Denial:
        self.counts.append(count)
        return Grant(NOW + 10.0 + len(self.counts), count, interval)


class Sink:
    def add_metric(self, name: str, unit: str, value: float) -> None:
        return None


def batch_slots(parallel: int, records: int) -> tuple[BatchSlots, RecordingLimiter]:
    limiter = RecordingLimiter()
    slots = BatchSlots(limiter, parallel, {"s": records}, lambda: NOW, Sink())  # type: ignore[arg-type]
    return slots, limiter


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
    assert limiter.counts == [2]


def test_a_batch_of_several_scopes_reserves_each_scope_its_share() -> None:
    # Given a batch of 50 records over 10 scopes and 10 free threads
    limiter = RecordingLimiter()
    pending = {f"s{i}": 5 for i in range(10)}
    slots = BatchSlots(limiter, 10, pending, lambda: NOW, Sink())  # type: ignore[arg-type]
    # When the first thread asks for scope s0
    slots.reserve("s0", INTERVAL, 60, object())
    # Then the block covers s0's share of the free threads (10 x 5/50 = 1), not all ten: the
    # next records of the batch belong to other scopes, and their slots would pass unused
    assert limiter.counts == [1]

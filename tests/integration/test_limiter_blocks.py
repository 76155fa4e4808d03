"""Several slots in one conditional write, against DynamoDB (moto server), under contention."""

from __future__ import annotations

import itertools
import math
import multiprocessing
import random
import threading
import time
from concurrent.futures import ProcessPoolExecutor
from typing import Any

import pytest

from sweeper.config import Policy
from sweeper.limiter import Denial, DynamoLimiter, Grant
from sweeper_local.aws import LocalAws, provision

pytestmark = pytest.mark.integration

INTERVAL = 0.02  # 50 calls/s in one scope
HORIZON = 0.5
RUN_SECONDS = 1.5
MIN_GRANTS = 3
SLOW_MACHINE_SECONDS = 30.0


@pytest.fixture
def table(local_aws: LocalAws, unique_name: str) -> str:
    return provision(
        local_aws.sqs(), local_aws.dynamodb(), Policy(name="p"), prefix=unique_name
    ).limiter_table


def take_blocks(limiter: DynamoLimiter, start: Any, seed: int) -> tuple[list[float], int, int]:
    """Once every consumer is ready (`start`, a barrier), reserve blocks of 1-6 slots for
    RUN_SECONDS (longer until it has MIN_GRANTS, on a slow machine), using each slot at its
    time. Returns the slots, the grants and the writes.
    """
    rng = random.Random(seed)
    limiter.state("warm-up")  # the client's first request loads its model: not in the race
    start.wait()
    stop_at = time.time() + RUN_SECONDS
    deadline = stop_at + SLOW_MACHINE_SECONDS
    slots: list[float] = []
    grants = 0
    while time.time() < stop_at or (grants < MIN_GRANTS and time.time() < deadline):
        decision = limiter.reserve("hot", INTERVAL, HORIZON, rng.randint(1, 6))
        if isinstance(decision, Grant):
            grants += 1
            slots.extend(decision.slots)
            time.sleep(max(0.0, decision.slots[-1] - time.time()))
        else:
            time.sleep(max(0.0, decision.retry_at - time.time()))
    return slots, grants, limiter.writes


def process_consumer(
    ports: tuple[int, int], table: str, start: Any, seed: int
) -> tuple[list[float], int, int]:
    """One consumer in a process of its own, with its own client."""
    aws = LocalAws(port=ports[0], lite_port=ports[1])  # lite_port 0: DynamoDB is moto's
    return take_blocks(DynamoLimiter(aws.dynamodb(), table), start, seed)


def most_in_any_window(slots: list[float], window: float) -> int:
    ordered = sorted(slots)
    most, start = 0, 0
    for end, at in enumerate(ordered):
        while ordered[start] <= at - window:
            start += 1
        most = max(most, end - start + 1)
    return most


def test_blocks_of_slots_under_contention_never_exceed_the_rate(
    local_aws: LocalAws, table: str
) -> None:
    # Given four threads and two processes, each with its own client, reserving blocks of
    # one to six slots of one scope at 50/s for 1.5 s
    results: list[tuple[list[float], int, int]] = []
    lock = threading.Lock()
    spawn = multiprocessing.get_context("spawn")
    manager = spawn.Manager()
    start = manager.Barrier(6)  # all six start together, however slow a process is to start

    def thread_consumer(seed: int) -> None:
        got = take_blocks(DynamoLimiter(local_aws.dynamodb(), table), start, seed)
        with lock:
            results.append(got)

    with manager, ProcessPoolExecutor(max_workers=2, mp_context=spawn) as pool:
        futures = [
            pool.submit(
                process_consumer, (local_aws.port, local_aws.lite_port), table, start, 100 + i
            )
            for i in range(2)
        ]
        threads = [threading.Thread(target=thread_consumer, args=(i,)) for i in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        results.extend(f.result() for f in futures)
    slots = [slot for got, _, _ in results for slot in got]
    grants = sum(g for _, g, _ in results)
    writes = sum(w for _, _, w in results)
    # Then every consumer, threads and processes alike, took slots
    assert all(got for got, _, _ in results), [(len(s), g, w) for s, g, w in results]
    assert len(slots) >= 40
    # and the slots, whoever took them and however many at once, are an interval apart
    slots.sort()
    gaps = [b - a for a, b in itertools.pairwise(slots)]
    assert min(gaps) >= INTERVAL - 1e-6
    # so no one-second window holds more than the rate allows (a zero-burst GCRA's bound)
    assert most_in_any_window(slots, 1.0) <= math.floor(1.0 / INTERVAL) + 1
    # and blocks made the writes fewer than the slots
    assert grants < len(slots)
    assert writes < len(slots)


def test_one_write_reserves_a_block_of_exactly_spaced_slots(
    local_aws: LocalAws, table: str
) -> None:
    # Given an idle scope at 1/s
    limiter = DynamoLimiter(local_aws.dynamodb(), table)
    lead = limiter.lead  # what the reservation plans with
    before = time.time()
    # When four slots are asked for at once
    block = limiter.reserve("s", 1.0, horizon=10, count=4)
    # Then one write grants them: the first now (plus the limiter's lead: the time its answer
    # takes), the others one interval apart
    assert isinstance(block, Grant)
    assert limiter.writes == 1
    assert block.count == 4
    assert before + lead <= block.slot_at <= time.time() + lead
    assert [round(b - a, 6) for a, b in itertools.pairwise(block.slots)] == [1.0, 1.0, 1.0]
    # and the next reservation, a block again (busy now), starts one interval after the last
    more = limiter.reserve("s", 1.0, horizon=10, count=2)
    assert isinstance(more, Grant)
    assert limiter.writes == 2
    assert more.slots == pytest.approx((block.slots[-1] + 1.0, block.slots[-1] + 2.0), abs=1e-6)


def test_a_block_takes_only_the_slots_within_the_horizon(local_aws: LocalAws, table: str) -> None:
    limiter = DynamoLimiter(local_aws.dynamodb(), table)
    # Given an idle scope at 1/s and a horizon of 2.5 s: ten asked, three fit (now, +1, +2)
    first = limiter.reserve("s", 1.0, horizon=2.5, count=10)
    assert isinstance(first, Grant)
    assert first.count == 3
    # When the scope is busy (next slot 3 s away) and five are asked within 3.5 s
    second = limiter.reserve("s", 1.0, horizon=3.5, count=5)
    # Then the one slot that fits is granted, at its exact time
    assert isinstance(second, Grant)
    assert second.count == 1
    assert second.slot_at == pytest.approx(first.slots[-1] + 1.0, abs=1e-6)
    # and when even the first slot is beyond the horizon, the block is refused
    refused = limiter.reserve("s", 1.0, horizon=0.5, count=5)
    assert isinstance(refused, Denial)
    assert refused.reason == "rate"
    assert refused.retry_at == pytest.approx(second.slot_at + 1.0 - 0.5, abs=1e-6)

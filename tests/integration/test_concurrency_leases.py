"""Fleet-wide concurrency caps as leases in DynamoDB (moto server), under real concurrency."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from sweeper.config import Policy
from sweeper.limiter.leases import LeaseCap
from sweeper_local.aws import LocalAws, provision

pytestmark = pytest.mark.integration

REPO_ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def table(local_aws: LocalAws, unique_name: str) -> str:
    return provision(
        local_aws.sqs(), local_aws.dynamodb(), Policy(name="p"), prefix=unique_name
    ).limiter_table


def test_never_more_than_the_cap_in_flight_whoever_holds_them(
    local_aws: LocalAws, table: str
) -> None:
    # Given a cap of 3 and eight consumers, each with its own client, calling until 24 calls
    # were made (the count, not the clock, ends the run: a busy machine only makes it longer)
    cap = 3
    in_flight = [0]
    most = [0]
    calls = [0]
    lock = threading.Lock()
    stop_at = time.time() + 60.0  # a deadline only
    barrier = threading.Barrier(8)

    def consumer(n: int) -> None:
        leases = LeaseCap(local_aws.dynamodb(), table)
        barrier.wait()
        while time.time() < stop_at and calls[0] < 24:
            index = leases.acquire("vendor", cap, f"c{n}", lease_seconds=30)
            if index is None:
                time.sleep(0.01)
                continue
            with lock:
                in_flight[0] += 1
                calls[0] += 1
                most[0] = max(most[0], in_flight[0])
            time.sleep(0.05)  # the call
            with lock:
                in_flight[0] -= 1
            assert leases.release("vendor", index, f"c{n}")

    threads = [threading.Thread(target=consumer, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    # Then the consumers called side by side, up to the cap and never beyond it
    assert calls[0] >= 24
    assert most[0] == cap


def test_a_lease_of_a_killed_environment_frees_itself_when_it_expires(
    local_aws: LocalAws, table: str
) -> None:
    # Given an environment holding both leases of a cap of 2 for 3 s, killed mid call
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tests.integration.leases_process",
            f"{local_aws.port}:{local_aws.lite_port}",  # moto, and the stand-in if any
            table,
            "vendor",
            "2",
            "3",
            "2",
        ],
        cwd=REPO_ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "held"
    proc.kill()
    proc.wait(timeout=10)
    leases = LeaseCap(local_aws.dynamodb(), table)
    # Then while its leases last nobody else gets one ...
    assert leases.live("vendor", 2) == 2
    assert leases.acquire("vendor", 2, "survivor", lease_seconds=3) is None
    # ... and once they have expired, another environment takes them, without any release
    deadline = time.time() + 10
    got = None
    while got is None and time.time() < deadline:
        got = leases.acquire("vendor", 2, "survivor", lease_seconds=3)
        if got is None:
            time.sleep(0.1)
    assert got is not None
    assert not leases.release("vendor", 1 - got, "survivor")  # the other is not its to release


def test_a_look_at_a_full_cap_is_one_read_and_no_write(local_aws: LocalAws, table: str) -> None:
    # Given a cap of 3 whose leases one consumer took in a single write
    first = LeaseCap(local_aws.dynamodb(), table)
    assert sorted(first.acquire_some("vendor", 3, "a", lease_seconds=30, count=3)) == [0, 1, 2]
    assert first.writes == 1
    # When another consumer looks for one
    other = LeaseCap(local_aws.dynamodb(), table)
    got = other.acquire("vendor", 3, "b", lease_seconds=30)
    # Then it finds the cap full by reading it, without writing
    assert got is None
    assert (other.reads, other.writes) == (1, 0)
    # And once one is given back, the next look takes exactly that one, in one write
    assert first.release("vendor", 1, "a")
    assert other.acquire_some("vendor", 3, "b", lease_seconds=30, count=2) == [1]
    assert other.writes == 1
    assert first.live("vendor", 3) == 3

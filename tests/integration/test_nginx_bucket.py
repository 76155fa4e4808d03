"""The limiter against a bucket sweeper did not write: nginx's `limit_req`.

nginx is started on a loopback port with a configuration of its own (its setup installs nginx
when the machine has none, as `.ci/ensure-postgres.sh` does PostgreSQL). Four consumers, each
with its own limiter client, take slots of the policy's quota from DynamoDB (moto), wait for
them, and call nginx, which counts every arrival in its bucket; its access log says which it
let through.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import urllib3

from sweeper.config import LATE_SLOT_TOLERANCE_SECONDS, Policy, Quota
from sweeper.limiter import DynamoLimiter, Grant
from sweeper_local.aws import LocalAws, provision
from sweeper_local.nginx import NginxVendor, nginx_binary

pytestmark = pytest.mark.integration

CALLS = 40
CONSUMERS = 4


@pytest.fixture(scope="module")
def binary() -> str:
    return nginx_binary()


@pytest.fixture
def table(local_aws: LocalAws, unique_name: str) -> str:
    return provision(
        local_aws.sqs(), local_aws.dynamodb(), Policy(name="p"), prefix=unique_name
    ).limiter_table


@pytest.fixture
def nginx(binary: str, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[NginxVendor]:
    with NginxVendor(binary, tmp_path / "nginx", burst=request.param) as server:
        yield server


def _call_at_slots(local_aws: LocalAws, table: str, quota: Quota, url: str) -> int:
    """CALLS calls by CONSUMERS consumers at the quota's slots; returns how many were sent."""
    sent = [0]
    lock = threading.Lock()
    barrier = threading.Barrier(CONSUMERS)

    def consumer() -> None:
        limiter = DynamoLimiter(local_aws.dynamodb(), table)
        http = urllib3.PoolManager(retries=False, timeout=5)
        barrier.wait()
        while True:
            with lock:
                if sent[0] >= CALLS:
                    return
            decision = limiter.reserve("nginx", quota.interval_seconds, horizon=2.0)
            if not isinstance(decision, Grant):
                time.sleep(max(0.0, decision.retry_at - time.time()))
                continue
            time.sleep(max(0.0, decision.slot_at - time.time()))
            if time.time() - decision.slot_at > LATE_SLOT_TOLERANCE_SECONDS:
                continue  # woken too late: let the slot go, as a consumer does
            with lock:
                if sent[0] >= CALLS:
                    return
                sent[0] += 1
            http.request("DELETE", url)

    threads = [threading.Thread(target=consumer) for _ in range(CONSUMERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return sent[0]


@pytest.mark.parametrize(
    ("nginx", "rate"),
    [(0, "15/1s bucket"), (5, "15/1s bucket:6")],
    indirect=["nginx"],
    ids=["no-burst", "burst-5"],
)
def test_told_nginxs_bucket_the_limiter_draws_no_429_from_it(
    local_aws: LocalAws, table: str, nginx: NginxVendor, rate: str
) -> None:
    # Given nginx's limit_req at 15/s (without burst, and with burst=5), and a policy told so
    quota = Quota.parse(rate)
    # When four consumers call it 40 times at the slots of the shared limiter
    sent = _call_at_slots(local_aws, table, quota, f"http://127.0.0.1:{nginx.port}/v1/objects/x")
    # Then nginx let every call through: none arrived earlier than its bucket allows
    statuses = nginx.statuses()
    assert sent == CALLS
    assert len(statuses) == CALLS
    assert statuses.count("429") == 0, statuses

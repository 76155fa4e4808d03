"""Hold leases of a concurrency cap in a process of its own, to be killed mid call.

`python -m tests.integration.leases_process MOTO[:LITE] TABLE KEY CAP LEASE_SECONDS COUNT` takes
COUNT leases of KEY, prints "held" and then sleeps until killed (a call that never ends).
"""

from __future__ import annotations

import sys
import time
import uuid

from sweeper.limiter.leases import LeaseCap
from sweeper_local.aws import LocalAws


def main(port: str, table: str, key: str, cap: str, lease_seconds: str, count: str) -> None:
    moto, _, lite = port.partition(":")  # "MOTO:LITE": DynamoDB is on the stand-in if LITE
    leases = LeaseCap(LocalAws(port=int(moto), lite_port=int(lite or 0)).dynamodb(), table)
    holder = f"env-{uuid.uuid4().hex[:8]}"
    for _ in range(int(count)):
        assert leases.acquire(key, int(cap), holder, float(lease_seconds)) is not None
    print("held", flush=True)
    time.sleep(3600)


if __name__ == "__main__":
    main(*sys.argv[1:7])

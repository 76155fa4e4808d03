"""Calls held by two limits, taken from the shared limiter in a process of its own.

`python -m tests.integration.limits_process PORT TABLE SECONDS START_AT TENANTS...` waits for
START_AT (epoch seconds, so that every process begins together), then for SECONDS takes, for a
tenant after another, a slot in the tenant's limit and in the app's (`reserve_all`), waits for
the call's time and "calls" there, printing one JSON line per call (when it was sent, the slot
it held in each limit) and one per slot spent without a call. With `paired` as the first
tenant, the slots are taken in blocks on the app's item (`DynamoLimiter.reserve_paired`), each
slot both limits' at once, and the last line gives the process's writes.
"""

from __future__ import annotations

import itertools
import json
import sys
import time

from sweeper.config import LATE_SLOT_TOLERANCE_SECONDS
from sweeper.limiter import DynamoLimiter
from sweeper.limiter.paired import Want
from sweeper.limiter.several import CallSlots, LimitAsk, Spent, reserve_all
from sweeper_local.aws import LocalAws

#: The two limits of the test: 2 calls/s per tenant, 10 calls/s for the app.
TENANT_INTERVAL_SECONDS = 0.5
APP_INTERVAL_SECONDS = 0.1
SPREAD_SECONDS = 0.015


def main(port: str, table: str, seconds: str, start_at: str, *tenants: str) -> None:
    moto, _, lite = port.partition(":")  # "MOTO:LITE": DynamoDB is on the stand-in if LITE
    limiter = DynamoLimiter(LocalAws(port=int(moto), lite_port=int(lite or 0)).dynamodb(), table)
    time.sleep(max(0.0, float(start_at) - time.time()))
    stop_at = time.time() + float(seconds)
    if tenants and tenants[0] == "paired":
        paired(limiter, stop_at, tenants[1:])
        return
    for tenant in itertools.cycle(tenants):
        if time.time() >= stop_at:
            break
        spent: list[Spent] = []
        asks = [
            LimitAsk(f"store:{tenant}", TENANT_INTERVAL_SECONDS),
            LimitAsk("app", APP_INTERVAL_SECONDS),
        ]
        decision = reserve_all(
            limiter, asks, horizon=2.0, spread=SPREAD_SECONDS, now=time.time(), spent=spent
        )
        for slot in spent:
            print(json.dumps({"spent": slot.key, "at": slot.slot_at, "back": slot.given_back}))
        if not isinstance(decision, CallSlots):
            print(json.dumps({"refused": decision.reason, "retry_at": decision.retry_at}))
            time.sleep(max(0.0, min(0.2, decision.retry_at - time.time())))
            continue
        time.sleep(max(0.0, decision.send_at - time.time()))
        sent = time.time()
        if sent > decision.earliest + LATE_SLOT_TOLERANCE_SECONDS:
            # woken too late (a loaded machine): the slots are let go, as a consumer does
            print(json.dumps({"late": sent, "slots": decision.slots}), flush=True)
            continue
        print(json.dumps({"sent": sent, "slots": decision.slots}), flush=True)


#: The paired blocks: at most this many slots, within this span of the first.
PAIRED_MOST = 3
PAIRED_SPAN_SECONDS = 0.3


def paired(limiter: DynamoLimiter, stop_at: float, tenants: tuple[str, ...]) -> None:
    """Blocks of app slots, each given to a tenant whose turn has come, the cycled one asking."""
    step = round(TENANT_INTERVAL_SECONDS * 1_000_000)
    calls = 0
    for tenant in itertools.cycle(tenants):
        if time.time() >= stop_at:
            break
        wants = [Want(f"store:{t}", step, 1) for t in (tenant, *tenants) if t != tenant]
        wants.insert(0, Want(f"store:{tenant}", step, 1))
        by_key, denial = limiter.reserve_paired(
            "app", APP_INTERVAL_SECONDS, wants, 2.0, PAIRED_SPAN_SECONDS, PAIRED_MOST
        )
        block = sorted((slot, key) for key, slots in by_key.items() for slot in slots)
        if not block:
            assert denial is not None
            print(json.dumps({"refused": denial.reason, "retry_at": denial.retry_at}))
            time.sleep(max(0.0, min(0.2, denial.retry_at - time.time())))
            continue
        for slot, key in block:
            time.sleep(max(0.0, slot - time.time()))
            sent = time.time()
            if sent > slot + LATE_SLOT_TOLERANCE_SECONDS:
                print(json.dumps({"late": sent, "slots": {key: slot, "app": slot}}), flush=True)
                continue
            calls += 1
            print(json.dumps({"sent": sent, "slots": {key: slot, "app": slot}}), flush=True)
    print(json.dumps({"writes": limiter.writes, "calls": calls}), flush=True)


if __name__ == "__main__":
    main(*sys.argv[1:])

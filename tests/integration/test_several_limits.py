"""Several limits on one call, against the shared limiter on DynamoDB (moto server)."""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from sweeper.config import LATE_SLOT_TOLERANCE_SECONDS, Policy
from sweeper.limiter import DynamoLimiter, Grant
from sweeper_local.aws import LocalAws, provision
from tests.integration.limits_process import (
    APP_INTERVAL_SECONDS,
    SPREAD_SECONDS,
    TENANT_INTERVAL_SECONDS,
)

pytestmark = pytest.mark.integration

REPO_ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def table(local_aws: LocalAws, unique_name: str) -> str:
    return provision(
        local_aws.sqs(), local_aws.dynamodb(), Policy(name="p"), prefix=unique_name
    ).limiter_table


def _run_processes(
    local_aws: LocalAws, table: str, groups: list[list[str]], seconds: float
) -> list[list[dict[str, Any]]]:
    start_at = time.time() + 3.0  # every process imported and connected by then
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tests.integration.limits_process",
                f"{local_aws.port}:{local_aws.lite_port}",  # moto, and the stand-in if any
                table,
                str(seconds),
                str(start_at),
                *tenants,
            ],
            cwd=REPO_ROOT,
            stdout=subprocess.PIPE,
            text=True,
        )
        for tenants in groups
    ]
    lines = []
    for proc in procs:
        out, _ = proc.communicate(timeout=seconds + 60)
        assert proc.returncode == 0
        lines.append([json.loads(line) for line in out.splitlines() if line.strip()])
    return lines


def _check_spacing(outputs: list[list[dict[str, Any]]]) -> dict[str, list[float]]:
    """Every call sent within the tolerance after each of its slots, at most the spread apart;
    in every limit no slot used twice and the slots used a limit's spacing apart."""
    calls = [line for lines in outputs for line in lines if "sent" in line]
    # the processes called side by side (every process made calls) ...
    per_process = [sum("sent" in line for line in lines) for lines in outputs]
    assert min(per_process) > 0, per_process
    assert len(calls) >= 6  # enough to judge the spacing (moto is slow on a loaded machine)
    used: dict[str, list[float]] = defaultdict(list)
    for call in calls:
        # ... every call was sent at or after each of its slots, and at most the spread after
        for slot in call["slots"].values():
            assert slot - 1e-3 <= call["sent"] <= slot + LATE_SLOT_TOLERANCE_SECONDS
        for key, slot in call["slots"].items():
            used[key].append(slot)
        assert max(call["slots"].values()) - min(call["slots"].values()) <= SPREAD_SECONDS
    # And in every limit no slot was used twice, and the slots used keep the limit's spacing
    for key, slots in used.items():
        interval = APP_INTERVAL_SECONDS if key == "app" else TENANT_INTERVAL_SECONDS
        slots.sort()
        gaps = [b - a for a, b in itertools.pairwise(slots)]
        assert not gaps or min(gaps) >= interval - 1e-6, key
    return used


def test_two_limits_under_contention_from_several_processes_each_keep_their_spacing(
    local_aws: LocalAws, table: str
) -> None:
    # Given three processes calling for six tenants (two each, and two tenants shared by
    # two processes), each call held by its tenant's limit (2/s) and the app's (10/s)
    groups = [["t1", "t2", "t3"], ["t3", "t4", "t5"], ["t5", "t6", "t1"]]
    outputs = _run_processes(local_aws, table, groups, seconds=5.0)
    # Then the processes called side by side, each call within its slots, each limit spaced
    used = _check_spacing(outputs)
    # And a slot spent without a call was never also used by a call
    spent = [line for lines in outputs for line in lines if "spent" in line]
    for line in spent:
        if not line["back"]:
            assert line["at"] not in used[line["spent"]]


def test_two_limits_paired_on_the_app_item_keep_both_spacings_in_fewer_writes(
    local_aws: LocalAws, table: str
) -> None:
    # Given the same three processes and six tenants, now taking blocks of up to three app
    # slots in one write each, every slot given to a tenant whose own turn has come
    groups = [
        ["paired", "t1", "t2", "t3"],
        ["paired", "t3", "t4", "t5"],
        ["paired", "t5", "t6", "t1"],
    ]
    outputs = _run_processes(local_aws, table, groups, seconds=5.0)
    # Then every call is within its slot in both limits, and each limit keeps its spacing
    _check_spacing(outputs)
    # And the limiter wrote less than once per call: one write for both limits and several
    # calls, a stale view of the item costing one failed write now and then (reserving each
    # limit apart costs at least two per call)
    totals = [line for lines in outputs for line in lines if "writes" in line]
    writes = sum(line["writes"] for line in totals)
    calls = sum(line["calls"] for line in totals)
    assert calls >= 6
    assert writes / calls < 1.0, (writes, calls)


def test_a_reservation_not_before_a_time_takes_the_first_free_slot_from_then(
    local_aws: LocalAws, table: str
) -> None:
    limiter = DynamoLimiter(local_aws.dynamodb(), table)
    later = time.time() + 5.0
    # An idle scope: the slot is exactly the time asked for
    first = limiter.reserve("s", 0.5, horizon=10.0, not_before=later)
    assert isinstance(first, Grant)
    assert first.slot_at == pytest.approx(later, abs=1e-6)
    # A scope busy beyond it: its next free slot
    second = limiter.reserve("s", 0.5, horizon=10.0, not_before=later)
    assert isinstance(second, Grant)
    assert second.slot_at == pytest.approx(later + 0.5, abs=1e-6)


def test_an_unused_slot_goes_back_only_while_it_is_the_last_one_taken(
    local_aws: LocalAws, table: str
) -> None:
    mine = DynamoLimiter(local_aws.dynamodb(), table)
    other = DynamoLimiter(local_aws.dynamodb(), table)
    at = time.time() + 3.0
    # Given a slot taken and no other after it: it goes back, and the next call gets it
    slot = mine.reserve("s", 0.5, horizon=10.0, not_before=at)
    assert isinstance(slot, Grant)
    assert mine.give_back("s", slot.slot_at, 0.5)
    again = other.reserve("s", 0.5, horizon=10.0, not_before=at)
    assert isinstance(again, Grant)
    assert again.slot_at == pytest.approx(slot.slot_at, abs=1e-6)
    # Given a slot another consumer took one after: it is spent, never handed out twice
    spent = mine.reserve("s", 0.5, horizon=10.0)
    assert isinstance(spent, Grant)
    after = other.reserve("s", 0.5, horizon=10.0)
    assert isinstance(after, Grant)
    assert not mine.give_back("s", spent.slot_at, 0.5)
    next_one = other.reserve("s", 0.5, horizon=10.0)
    assert isinstance(next_one, Grant)
    assert next_one.slot_at == pytest.approx(after.slot_at + 0.5, abs=1e-6)

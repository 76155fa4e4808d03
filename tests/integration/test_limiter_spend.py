"""Sweeper's own calls under a scope, counted fleet-wide on its limiter item (limiter/spend.py):
every environment counts every environment's written calls, within the window only."""

from __future__ import annotations

import pytest

from sweeper.limiter import DynamoLimiter
from sweeper.limiter.base import ShareSeen
from sweeper.limiter.spend import flush_seconds
from sweeper_local.aws import LocalAws

pytestmark = pytest.mark.integration

WINDOW = 10.0  # seconds: each environment writes at most every half second
T0 = 1_000_000.0


def test_each_environment_counts_the_fleets_calls_in_the_window(
    local_aws: LocalAws, table: str
) -> None:
    # Given two environments on one scope
    one, other = (DynamoLimiter(local_aws.dynamodb(), table).spend() for _ in range(2))
    step = flush_seconds(WINDOW)
    # When the first writes 3 calls, the second 5 a moment later, then the first 2 more
    assert one.add("s", 3, T0, WINDOW) is None  # written, with no split yet
    other.add("s", 5, T0 + 0.1, WINDOW)
    one.add("s", 2, T0 + step, WINDOW)
    # Then the first counts the 5 the second wrote between its own writes, besides its own
    assert one.own_in("s", WINDOW, T0 + step) == 3 + 5 + 2
    # And a call not written yet (within the flush time) is counted where it was made
    one.add("s", 1, T0 + step + 0.01, WINDOW)
    assert one.own_in("s", WINDOW, T0 + step + 0.01) == 3 + 5 + 2 + 1
    assert other.own_in("s", WINDOW, T0 + step) == 5  # it has not written since
    # And a window later, writes older than the window are no longer counted
    one.add("s", 4, T0 + WINDOW + 2 * step, WINDOW)
    assert one.own_in("s", WINDOW, T0 + WINDOW + 2 * step) == 1 + 4


def test_the_split_last_seen_is_written_with_the_calls_and_read_with_the_gate(
    local_aws: LocalAws, table: str
) -> None:
    # Given an environment that worked out a split of a shared quota
    limiter = DynamoLimiter(local_aws.dynamodb(), table)
    tally = limiter.spend()
    seen = ShareSeen(quota=600, own=300, others=180, seen_at=T0)
    tally.seen("s", seen)
    # When it writes its calls
    assert tally.add("s", 1, T0, WINDOW) == seen
    # Then the scope's state carries the split, for `sweeper status` and the console
    state = DynamoLimiter(local_aws.dynamodb(), table).state("s")
    assert state.share == seen
    assert (state.share.own_percent, state.share.others_percent) == (50, 30)

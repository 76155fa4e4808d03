"""The dlq scenario holds a gate closed for as long as the operator's commands take."""

from __future__ import annotations

import time

import pytest

from sweeper.limiter import DynamoLimiter
from sweeper_local.aws import LocalAws
from sweeper_local.poller import run_until
from sweeper_local.scenarios import hold_gate

pytestmark = pytest.mark.integration

HOLD_SECONDS = 1.0


def test_a_held_gate_stays_closed_past_one_closure_and_reopens_soon_after(
    local_aws: LocalAws, table: str
) -> None:
    # Given a limiter table and a gate held closed, a closure HOLD_SECONDS long renewed often
    limiter = DynamoLimiter(local_aws.dynamodb(), table)
    with hold_gate(limiter, "exports", hold_seconds=HOLD_SECONDS, renew_seconds=0.1):
        # When the block outlasts three closures
        assert run_until(lambda: limiter.state("exports").closed(time.time()), timeout_seconds=5)
        ends = time.monotonic() + 3 * HOLD_SECONDS
        # Then the gate is closed all along
        while time.monotonic() < ends:
            assert limiter.state("exports").closed(time.time())
            time.sleep(0.1)
    # And once the block has run it reopens, one closure after the last renewal
    assert run_until(
        lambda: not limiter.state("exports").closed(time.time()), timeout_seconds=HOLD_SECONDS + 5
    )

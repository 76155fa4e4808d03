"""What one batch needs of the consumer timeout, and what the turnovers between batches cost.

Part of the plan (planning.plan's docstring states the model): a batch's p95 duration is its
calls, its slots and its ledger read, summed; the timeout that covers it leaves half the usable
time spare and lets one call run its whole connect and read timeout after the ledger read.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from sweeper.config import Policy
from sweeper.limits import (
    MAX_BATCH_SIZE,
    MAX_BATCH_SIZE_WITHOUT_WINDOW,
    recommended_visibility_timeout_seconds,
)

#: A batch's p95 duration fills at most this share of the time the consumer may use.
TIMEOUT_SHARE = 0.5
#: The last seconds of an invocation the consumer never uses (runtime.LAMBDA_SAFETY_MARGIN_SECONDS;
#: a unit test checks the two agree).
UNUSED_LAMBDA_SECONDS = 5.0
#: The batch's one ledger read (every row of the batch in one query), with room for a cold
#: start's connection: the second MIN_CONSUMER_TIMEOUT_SECONDS allots it.
BATCH_LEDGER_READ_SECONDS = 1.0
#: A batch's turnover: how long an environment asks for no slot between two batches. Its
#: batch's last calls (about a mean service time), then this: the event source's delete and
#: receive, the new invocation's ledger read, its first idempotency record and reservation
#: (measured on the local stack at 0.1-0.4 s: docs/decisions.md, 2026-12-02, "every
#: environment turns over at once").
TURNOVER_FIXED_SECONDS = 0.25
#: Environments that share a rate turn over together: while one turns over, the others take
#: its share of the slots and catch up with it, so they fall in step, and the slots of every
#: turnover go unused by all of them (docs/decisions.md, 2026-12-03, "Batches long enough that
#: their turnovers cost little"). The batch size recommended keeps a turnover at most this
#: share of a batch's time.
TURNOVER_SHARE = 0.03
#: The longest batch recommended for that, in seconds of an environment's share of the rate:
#: a longer one lengthens the timeout and a killed environment's delay for little more.
MAX_TURNOVER_BATCH_SECONDS = 60.0


@dataclass(frozen=True, slots=True)
class BatchNeed:
    """What one batch needs of the consumer timeout (see the module docstring)."""

    batch_size: int
    calls_seconds: float  # ceil(batch_size / parallel) rounds of the p95 service time
    slots_seconds: float  # batch_size slots at the environment's share of the rate
    call_seconds: float  # one call at its whole connect and read timeout
    batch_window_seconds: int

    @property
    def seconds(self) -> float:
        """The batch's p95 duration: its calls, its slots and its ledger read, summed."""
        return self.calls_seconds + self.slots_seconds + BATCH_LEDGER_READ_SECONDS

    @property
    def timeout_seconds(self) -> int:
        """The shortest consumer timeout that covers the batch with its margin."""
        used = max(self.seconds / TIMEOUT_SHARE, BATCH_LEDGER_READ_SECONDS + self.call_seconds)
        # Rounded first, so that float noise (13.000000000000002) never costs a whole second.
        # Never below MIN_CONSUMER_TIMEOUT_SECONDS: the ledger read alone, doubled, and the
        # unused seconds come to 7.
        return math.ceil(round(used + UNUSED_LAMBDA_SECONDS, 6))

    @property
    def visibility_timeout_seconds(self) -> int:
        """The queue's visibility timeout at that consumer timeout."""
        return recommended_visibility_timeout_seconds(
            self.timeout_seconds, self.batch_window_seconds
        )


def batch_need(policy: Policy, parallel: int, p95_service: float, rate: float) -> BatchNeed:
    """One batch of this policy at `parallel` calls at once, p95 service time and total rate."""
    consumer = policy.consumer
    action = policy.action
    return BatchNeed(
        batch_size=consumer.batch_size,
        calls_seconds=math.ceil(consumer.batch_size / parallel) * p95_service,
        slots_seconds=consumer.batch_size * consumer.environments / rate,
        call_seconds=action.call_seconds,
        batch_window_seconds=consumer.batch_window_seconds,
    )


@dataclass(frozen=True, slots=True)
class Turnover:
    """What the turnovers between an environment's batches cost (see TURNOVER_SHARE)."""

    seconds: float  # one turnover: the batch's last calls and TURNOVER_FIXED_SECONDS
    batch_seconds: float  # one batch at an environment's share of the throughput
    recommended_batch_size: int  # the smallest keeping the share within TURNOVER_SHARE

    @property
    def share(self) -> float:
        """Of the rate: a turnover's part of a batch's time and its own (0 with no rate)."""
        return self.seconds / (self.batch_seconds + self.seconds)

    @classmethod
    def of(
        cls, batch_size: int, parallel: int, environments: int, throughput: float, mean: float
    ) -> Turnover:
        """At `throughput` jobs/s over `environments`, a mean service time of `mean` seconds,
        and at least `parallel` records a batch."""
        seconds = mean + TURNOVER_FIXED_SECONDS
        per_environment = throughput / environments
        if per_environment <= 0:
            return cls(seconds, math.inf, batch_size)
        batch_seconds = batch_size / per_environment
        need = per_environment * seconds * (1 - TURNOVER_SHARE) / TURNOVER_SHARE
        longest = per_environment * MAX_TURNOVER_BATCH_SECONDS
        size = math.ceil(round(min(need, longest), 6))
        if size > MAX_BATCH_SIZE_WITHOUT_WINDOW:
            size = math.ceil(size / 10) * 10  # a round figure for a file a person edits
        size = max(parallel, min(MAX_BATCH_SIZE, size))
        return cls(seconds, batch_seconds, size)

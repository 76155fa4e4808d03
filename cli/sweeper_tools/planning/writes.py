"""DynamoDB write units a job costs, from the rules the consumer follows (not a guess).

Idempotency: Powertools saves the record in progress (a conditional PutItem) and then completes
it (an UpdateItem); a write unit is 1 KB of the item (an update bills the larger of the item
before and after), and the record holds the key, its status, two expiry times and the settled
`ActionResult` (a class, a status, a short code), far under 1 KB: two units a job
(tests/unit/test_plan_writes.py measures the item Powertools writes).

Limiter: the consumer reserves a block of slots of a scope in one write and hands them out one
per call (sweeper.consumer.slots): at least BLOCK_SHARE_OF_THREADS of the batch's threads, at
most the slots that fit in BLOCK_SPAN_SECONDS of the scope's spacing. At its smallest block a
job costs 1 / block writes, plus the conditional writes that fail when another environment
wrote the bucket first (measured, docs/benchmarks.md). A policy with `[[limits]]` (paired
limits, concurrency caps) is billed one write a job, an upper bound its measured runs keep
(0.4-0.7 with two limits) but no rule yet: its writes are the pairs' and the leases'.
"""

from __future__ import annotations

import math

from sweeper.admission.base import BLOCK_SHARE_OF_THREADS, BLOCK_SPAN_SECONDS
from sweeper.config import Policy

#: The idempotency record's PutItem (in progress) and UpdateItem (completed), each under 1 KB.
IDEMPOTENCY_WRITES_PER_JOB = 2.0
#: Measured failed conditional writes per job where environments share a scope: 0.06-0.10
#: (docs/benchmarks.md, "At real rates" and "Several limits"); the highest is taken.
FAILED_LIMITER_WRITES_PER_JOB = 0.10
#: Limiter writes a job of a policy with `[[limits]]` costs: one (measured 0.4-0.7 with two
#: limits, docs/benchmarks.md "Several limits"; no rule yet).
LIMITS_WRITES_PER_JOB = 1.0


def limiter_block(policy: Policy, parallel_calls: int) -> int:
    """The fewest slots one limiter write reserves for a scope (sweeper.consumer.slots'
    `_block_size` with no thread free beyond the share and a scope with records to spare)."""
    share = math.ceil(parallel_calls * BLOCK_SHARE_OF_THREADS - 1e-9)
    span = 1 + math.floor(BLOCK_SPAN_SECONDS / policy.quota.interval_seconds + 1e-9)
    return max(1, min(share, span))


def limiter_writes_per_job(policy: Policy, parallel_calls: int) -> float:
    """Limiter write units a job costs at most, by the block rule (see the module docstring)."""
    if policy.limits:
        return LIMITS_WRITES_PER_JOB
    return 1 / limiter_block(policy, parallel_calls) + FAILED_LIMITER_WRITES_PER_JOB


def dynamodb_writes_per_job(policy: Policy, parallel_calls: int) -> float:
    """Write units a job costs: its idempotency record and its limiter slots."""
    return IDEMPOTENCY_WRITES_PER_JOB + limiter_writes_per_job(policy, parallel_calls)

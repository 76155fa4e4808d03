"""A learned quota shared with another client: sweeper paces to what the other leaves, less the
reserve it keeps for it, through the consumer as on AWS; the split is on the scope's item."""

from __future__ import annotations

import time
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from sweeper import runtime
from sweeper.config import Policy
from sweeper.limiter import DynamoLimiter
from sweeper.limiter.keys import SCOPE_KEY_PREFIX
from sweeper.models import JobStatus, NewJob
from sweeper.scheduling import schedule_jobs
from sweeper_local.vendor import VendorSimulator
from tests.conftest import Pipeline
from tests.integration.test_consumer import publish_all
from tests.integration.test_learned_limits import held_rate, learning, scope_item
from tests.integration.test_parallel_calls import invoke

pytestmark = pytest.mark.integration

#: 40 calls per 4 s, another client spending 30 % of them (12 a window), 4 kept in reserve.
QUOTA, WINDOW, OTHERS, RESERVE = 40, 4.0, 12, 4


def drain(p: Pipeline, jobs: int, within_seconds: float) -> int:
    """Schedule `jobs` due jobs and hand them to the consumer until all succeeded or the
    deadline passed; the successes."""
    now = datetime.now(UTC)
    new = [NewJob("tenant-0", f"obj-{i:05d}", now - timedelta(seconds=1)) for i in range(jobs)]
    schedule_jobs(p.ledger, p.policy, new, now)
    deadline = time.monotonic() + within_seconds
    done = 0
    while done < jobs and time.monotonic() < deadline:
        invoke(p, publish_all(p))
        done = p.ledger.counts(p.policy.name).get(JobStatus.SUCCEEDED, 0)
    return done


def test_with_another_client_spending_30_percent_sweeper_draws_no_429_and_keeps_the_reserve(
    pipeline: Pipeline, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a vendor allowing 40 calls per 4 s, 30 % of them spent by another client, and a
    # policy learning the quota from the IETF fields, told 40 per 4 s, keeping 4 in reserve
    with VendorSimulator(
        quota=(QUOTA, WINDOW),
        quota_scope="global",
        limit_dialect="ratelimit",
        other_client_share=0.3,
    ) as vendor:
        p = learning(
            pipeline, monkeypatch, vendor, "ratelimit", told=(QUOTA, WINDOW), parallel_calls=4
        )
        data = p.policy.model_dump()
        data["limits"][0]["learn"] = {"source": "ratelimit", "reserve": RESERVE}
        policy = Policy.model_validate(data)
        monkeypatch.setenv("SWEEPER_POLICY", policy.model_dump_json())
        runtime.reset()
        p = replace(p, policy=policy)
        # When 40 jobs are called, four at a time
        done = drain(p, 40, within_seconds=60)
        audit = vendor.audit()
    # Then they all went, the vendor refused none of sweeper's calls nor the other client's,
    # and no call of sweeper's left less than the reserve remaining
    assert done == 40
    assert audit.quota_rejections == 0
    assert audit.other_rejections == 0
    assert audit.other_calls >= OTHERS
    assert audit.least_remaining is not None
    assert audit.least_remaining >= RESERVE
    # And the rate held is what the other client leaves less the reserve (headroom applied)
    headroom = p.policy.quota.effective_headroom
    left = (QUOTA - OTHERS - RESERVE) / WINDOW
    assert held_rate(p) == pytest.approx(left * headroom, rel=0.15)
    # And the scope's item holds the split, as `sweeper status` shows it
    scope = scope_item(p)["pk"]["S"].removeprefix(SCOPE_KEY_PREFIX)
    seen = DynamoLimiter(p.aws.dynamodb(), p.resources.limiter_table).state(scope).share
    assert seen is not None
    assert seen.quota == QUOTA
    assert OTHERS - 2 <= seen.others <= OTHERS + 4
    assert seen.own > 0

"""A 429 that names a limit with no rate (a concurrency cap, a budget) closes that limit's gate,
and the calls under it respect the closure: as a rate's gate, whatever the limit's regimes.

The vendor here is a small HTTP server (test_throttle_routing's) answering its first call 429
with a Retry-After and `X-RateLimit-Scope: concurrency` (the policy maps it to its limit
`vendor`), every later one 204, and recording when each call arrived; the limiter is the real
one on moto (which enforces no IAM: the consumer's grant of the gate is tests/unit's
test_limiter_keys).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest

from sweeper import runtime
from sweeper.admission import GATE_RECHECK_LEAD_SECONDS
from sweeper.config import LimitConfig, Policy, Quota
from sweeper.config.budget import BudgetConfig
from sweeper.limiter import DynamoLimiter
from sweeper.models import JobStatus
from tests.conftest import Pipeline
from tests.integration.test_consumer import failed_ids, publish_all
from tests.integration.test_parallel_calls import invoke
from tests.integration.test_throttle_routing import Refusing

pytestmark = pytest.mark.integration

#: The cap's rendered limiter key (limit `vendor`, key `v`).
CAP_KEY = "vendor:v"
#: The limit a 429 names, with no rate: a fleet-wide cap of 4 calls in flight, or a budget
#: too large to pace these tests' calls.
NO_RATE: dict[str, dict[str, Any]] = {
    "cap": {"max_in_flight": 4},
    "budget": {"budget": BudgetConfig(limit=100_000, period_seconds=60)},
}


@pytest.fixture
def vendor() -> Iterator[Refusing]:
    """The first call refused 429 naming the concurrency limit, Retry-After 60; others 204."""
    refusing = Refusing()
    refusing.scope = "concurrency"
    refusing.retry_after = 60
    refusing.refusals = 1
    try:
        yield refusing
    finally:
        refusing.close()


def capped(
    p: Pipeline,
    monkeypatch: pytest.MonkeyPatch,
    url: str,
    *,
    named: bool = True,
    max_wait_seconds: float | None = None,
    regime: str = "cap",
) -> Pipeline:
    """A store limit (50/s per tenant) and a further limit `vendor` with no rate (NO_RATE,
    `regime`), which a 429's `X-RateLimit-Scope: concurrency` names when `named`; one call at
    a time."""
    data = p.policy.model_dump(exclude={"quota", "scope"})
    data["limits"] = [
        LimitConfig(
            name="store", key="{policy}:{tenant_id}", rate=Quota(limit=50, period_seconds=1)
        ),
        LimitConfig(name="vendor", key="v", **NO_RATE[regime]),
    ]
    data["consumer"]["parallel_calls"] = 1
    if max_wait_seconds is not None:
        data["throttle"]["max_wait_seconds"] = max_wait_seconds
    data["action"].update(
        api_url=url,
        allow_plain_http=True,
        limit_header="X-RateLimit-Scope",
        limit_header_values={"concurrency": "vendor"} if named else {},
    )
    policy = Policy.model_validate(data)
    monkeypatch.setenv("SWEEPER_POLICY", policy.model_dump_json())
    runtime.reset()
    return replace(p, policy=policy)


@pytest.mark.parametrize("regime", sorted(NO_RATE))
def test_a_429_naming_a_limit_without_rate_holds_the_batchs_next_call_until_the_reopening(
    pipeline: Pipeline, vendor: Refusing, monkeypatch: pytest.MonkeyPatch, regime: str
) -> None:
    # Given two stores' jobs under one fleet-wide limit with no rate (a cap, or a budget), a
    # 429 naming it with Retry-After 60
    p = capped(pipeline, monkeypatch, vendor.url, regime=regime)
    p.seed(2, tenants=2)
    records = publish_all(p)
    # When one batch calls them one after the other
    response = invoke(p, records)
    # Then the first call's 429 closed the limit's gate, and the second (another store: its rate
    # is open) was not sent into it: it went back until the reopening
    limiter = DynamoLimiter(p.aws.dynamodb(), p.resources.limiter_table)
    assert limiter.state(CAP_KEY).closed(time.time())
    assert len(vendor.arrivals) == 1
    assert failed_ids(response) == {r["messageId"] for r in records}


def test_a_cap_closed_by_another_consumer_holds_a_later_batchs_call(
    pipeline: Pipeline, vendor: Refusing, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a batch whose one call drew a 429 naming the cap (Retry-After 60)
    p = capped(pipeline, monkeypatch, vendor.url)
    p.seed(2, tenants=2)
    first, second = publish_all(p)
    invoke(p, [first])
    assert len(vendor.arrivals) == 1
    # When another batch (as another consumer: it knows the closure only from the table) calls
    # another store's job under the same cap
    response = invoke(p, [second])
    # Then that call is not sent: the cap's gate holds it back until the reopening
    assert len(vendor.arrivals) == 1
    assert failed_ids(response) == {second["messageId"]}


def test_a_call_under_a_cap_closed_briefly_waits_in_place_for_the_reopening(
    pipeline: Pipeline, vendor: Refusing, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a 429 naming the cap with Retry-After 1, within the longest wait in place (3 s)
    p = capped(pipeline, monkeypatch, vendor.url, max_wait_seconds=3.0)
    vendor.retry_after = 1
    p.seed(2, tenants=2)
    records = publish_all(p)
    # When one batch calls both jobs one after the other
    response = invoke(p, records)
    # Then the second call waited in place for the cap to reopen and was sent after it
    assert len(vendor.arrivals) == 2
    assert vendor.arrivals[1] - vendor.arrivals[0] >= 1.0
    assert len(failed_ids(response)) == 1  # the refused one only
    assert p.ledger.counts(p.policy.name)[JobStatus.SUCCEEDED] == 1


def _gate_reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every limiter key whose gate the consumer reads from now on (GetItem or BatchGetItem)."""
    read: list[str] = []
    state, states = DynamoLimiter.state, DynamoLimiter.states

    def one(self: DynamoLimiter, scope: str) -> Any:
        read.append(scope)
        return state(self, scope)

    def several(self: DynamoLimiter, scopes: Any) -> Any:
        read.extend(scopes)
        return states(self, scopes)

    monkeypatch.setattr(DynamoLimiter, "state", one)
    monkeypatch.setattr(DynamoLimiter, "states", several)
    return read


@pytest.mark.parametrize("named", [True, False])
def test_the_gate_of_a_cap_is_read_only_when_a_429_can_name_it_and_seldom(
    pipeline: Pipeline, vendor: Refusing, monkeypatch: pytest.MonkeyPatch, named: bool
) -> None:
    # Given ten jobs of one store under the cap, a vendor refusing none, one batch
    p = capped(pipeline, monkeypatch, vendor.url, named=named)
    vendor.refusals = 0
    p.seed(10, tenants=1)
    records = publish_all(p)
    reads = _gate_reads(monkeypatch)
    # When the batch calls them one after the other
    started = time.monotonic()
    response = invoke(p, records)
    took = time.monotonic() - started
    assert failed_ids(response) == set()
    # Then a cap no 429 names has no gate read; one a 429 names is read at most once per
    # look's lead (a look covers the batch's calls for that long) and never twice for a call
    cap_reads = reads.count(CAP_KEY)
    if named:  # measured: 2 or 3 reads for the ten jobs
        assert 1 <= cap_reads <= min(len(records), 1 + took / GATE_RECHECK_LEAD_SECONDS)
    else:
        assert cap_reads == 0

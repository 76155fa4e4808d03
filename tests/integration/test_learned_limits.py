"""A limit the vendor states in its answers, learned through the consumer as on AWS.

The vendor simulator states its quota in each dialect (sweeper_local.limit_dialects); the
policy's one limit has `learn`. What is learned is read back from the limiter's item (the rate
every consumer reserves at) and from the vendor's audit (what arrived, what it refused).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import urllib3

from sweeper import runtime
from sweeper.config import Policy
from sweeper.limiter import Denial, DynamoLimiter
from sweeper.limiter.keys import SCOPE_KEY_PREFIX
from sweeper.models import JobStatus, NewJob
from sweeper.scheduling import schedule_jobs
from sweeper.vendor_reading import MAX_WAIT_SECONDS
from sweeper_local.graphql_cost import GRAPHQL_PATH, PointsApi
from sweeper_local.limit_dialects import Dialect
from sweeper_local.vendor import VendorSimulator, max_calls_in_window
from tests.conftest import Pipeline
from tests.integration.test_consumer import publish_all
from tests.integration.test_learned_answers import GRAPHQL_THROTTLED, PRODUCT_DELETE
from tests.integration.test_parallel_calls import invoke

pytestmark = pytest.mark.integration

#: How each dialect's limit is configured (`learn`), as the docs show it.
LEARN: dict[Dialect, Any] = {
    "ratelimit": "ratelimit",
    "x-ratelimit": {"source": "x-ratelimit", "reset": "epoch"},
    "sforce": {"header": "Sforce-Limit-Info", "pattern": r"api-usage=(?P<used>\d+)/(?P<quota>\d+)"},
}
DIALECTS = list(LEARN)


def learning(
    p: Pipeline,
    monkeypatch: pytest.MonkeyPatch,
    vendor: VendorSimulator,
    dialect: Dialect,
    *,
    told: tuple[int, float] = (50, 1.0),
    parallel_calls: int = 1,
) -> Pipeline:
    """The pipeline with one limit, told `told` (a ceiling), learning in `dialect`."""
    data = p.policy.model_dump(exclude={"quota", "scope"})
    data["limits"] = [
        {
            "name": "quota",
            "key": "{policy}",
            "rate": {"limit": told[0], "period_seconds": told[1]},
            "learn": LEARN[dialect],
        }
    ]
    data["consumer"]["parallel_calls"] = parallel_calls
    data["action"].update(api_url=vendor.url, allow_plain_http=True)
    policy = Policy.model_validate(data)
    monkeypatch.setenv("SWEEPER_POLICY", policy.model_dump_json())
    runtime.reset()
    return replace(p, policy=policy, vendor=vendor)


@pytest.fixture
def vendor_in(request: pytest.FixtureRequest) -> Iterator[Any]:
    """Builds a vendor simulator stating its global quota in a dialect; stops them after."""
    started: list[VendorSimulator] = []

    def start(dialect: Dialect, quota: tuple[int, float]) -> VendorSimulator:
        sim = VendorSimulator(quota=quota, quota_scope="global", limit_dialect=dialect)
        started.append(sim.start())
        return sim

    yield start
    for sim in started:
        sim.stop()


def paying_points(p: Pipeline, monkeypatch: pytest.MonkeyPatch, cost: Any) -> Pipeline:
    """The learning pipeline's limit counting points (`learn.cost`), its action a GraphQL
    `productDelete` whose throttled answers (HTTP 200) are classed by an outcome rule."""
    data = p.policy.model_dump(exclude={"quota", "scope"})
    data["limits"][0]["learn"] = {"cost": cost}
    data["action"].update(
        method="POST",
        url_template=f"{{api_url}}{GRAPHQL_PATH}",
        body={"query": PRODUCT_DELETE, "variables": {"id": "{object_id}"}},
        outcome_rules=[GRAPHQL_THROTTLED],
    )
    policy = Policy.model_validate(data)
    monkeypatch.setenv("SWEEPER_POLICY", policy.model_dump_json())
    runtime.reset()
    return replace(p, policy=policy)


def held_rate(p: Pipeline) -> float:
    """The rate the policy's scope item holds (calls per second)."""
    item = scope_item(p)
    return int(item["ar"]["N"]) / 1000


def scope_item(p: Pipeline) -> dict[str, Any]:
    scan = p.aws.dynamodb().scan(TableName=p.resources.limiter_table)
    items = [i for i in scan["Items"] if i["pk"]["S"].startswith(SCOPE_KEY_PREFIX)]
    assert len(items) == 1, [i["pk"] for i in items]
    return items[0]


def run(p: Pipeline, jobs: int) -> int:
    """Schedule `jobs` new due jobs, hand them to the consumer in one batch; the ledger's
    successes so far."""
    now = datetime.now(UTC)
    done = sum(p.ledger.counts(p.policy.name).values())
    due = now - timedelta(seconds=1)
    new = [NewJob("tenant-0", f"obj-{done + i:05d}", due) for i in range(jobs)]
    schedule_jobs(p.ledger, p.policy, new, now)
    invoke(p, publish_all(p))
    return p.ledger.counts(p.policy.name)[JobStatus.SUCCEEDED]


@pytest.mark.parametrize("dialect", DIALECTS)
def test_a_quota_is_learned_from_the_first_answer(
    pipeline: Pipeline, monkeypatch: pytest.MonkeyPatch, vendor_in: Any, dialect: Dialect
) -> None:
    # Given a vendor allowing 5 calls a second, and a policy told 50 (a ceiling only)
    vendor = vendor_in(dialect, (5, 1.0))
    p = learning(pipeline, monkeypatch, vendor, dialect)
    # When one job is called
    assert run(p, 1) == 1
    # Then its answer set the rate every consumer reserves at: the vendor's, less the headroom
    assert held_rate(p) == pytest.approx(5 * p.policy.quota.effective_headroom, abs=0.002)


@pytest.mark.parametrize("dialect", DIALECTS)
def test_the_told_quota_is_a_ceiling_a_larger_stated_one_never_passes(
    pipeline: Pipeline, monkeypatch: pytest.MonkeyPatch, vendor_in: Any, dialect: Dialect
) -> None:
    # Given a vendor stating 100 calls a second, and a policy told 5
    vendor = vendor_in(dialect, (100, 1.0))
    p = learning(pipeline, monkeypatch, vendor, dialect, told=(5, 1.0))
    # When jobs are called
    run(p, 6)
    # Then the rate held is the told one, and no second held more than 5 calls
    assert held_rate(p) == pytest.approx(p.policy.quota.rate_per_second, abs=0.002)
    assert max_calls_in_window(list(vendor.audit().arrivals), 1.0) <= 5


@pytest.mark.parametrize("dialect", DIALECTS)
def test_a_lowering_is_followed_from_the_next_answer(
    pipeline: Pipeline, monkeypatch: pytest.MonkeyPatch, vendor_in: Any, dialect: Dialect
) -> None:
    # Given a rate learned from a vendor allowing 10 calls a second
    vendor = vendor_in(dialect, (10, 1.0))
    p = learning(pipeline, monkeypatch, vendor, dialect)
    run(p, 1)
    headroom = p.policy.quota.effective_headroom
    assert held_rate(p) == pytest.approx(10 * headroom, abs=0.002)
    # When the vendor lowers its quota to 4 and answers one more call
    vendor.set_quota(4, 1.0)
    run(p, 1)
    # Then the rate held is the new one
    assert held_rate(p) == pytest.approx(4 * headroom, abs=0.002)


@pytest.mark.parametrize("dialect", DIALECTS)
def test_once_learned_sweepers_own_pace_draws_no_429(
    pipeline: Pipeline, monkeypatch: pytest.MonkeyPatch, vendor_in: Any, dialect: Dialect
) -> None:
    # Given a rate learned from a vendor allowing 4 calls a second (told 50)
    vendor = vendor_in(dialect, (4, 1.0))
    p = learning(pipeline, monkeypatch, vendor, dialect, parallel_calls=4)
    run(p, 1)
    # When a batch of eight jobs is called, four at a time
    settled = run(p, 8)
    # Then calls went out, the vendor refused none, and no second held more than its quota
    audit = vendor.audit()
    assert settled >= 4
    assert audit.quota_rejections == 0
    assert max_calls_in_window(list(audit.arrivals), 1.0) <= 4


@pytest.mark.parametrize("dialect", ["ratelimit", "x-ratelimit"])  # Salesforce states no reset
def test_nothing_remaining_closes_the_gate_for_every_consumer_until_the_reset(
    pipeline: Pipeline, monkeypatch: pytest.MonkeyPatch, vendor_in: Any, dialect: Dialect
) -> None:
    # Given a vendor allowing 3 calls a minute, two of them spent by another client
    vendor = vendor_in(dialect, (3, 60.0))
    p = learning(pipeline, monkeypatch, vendor, dialect, told=(50, 60.0))
    http = urllib3.PoolManager(retries=False)
    for n in range(2):
        http.request("DELETE", f"{vendor.url}/v1/tenants/other/objects/o{n}")
    # When sweeper's call is answered with none remaining
    before = time.time()
    assert run(p, 1) == 1
    # Then the scope's gate is closed until the window turns, for a consumer that made no call
    other = DynamoLimiter(p.aws.dynamodb(), p.resources.limiter_table)
    scope = scope_item(p)["pk"]["S"].removeprefix(SCOPE_KEY_PREFIX)
    state = other.state(scope)
    assert state.closed_until is not None
    assert before + 55 <= state.closed_until <= time.time() + 61
    assert isinstance(other.reserve(scope, 0.1, 1.0), Denial)
    # And the vendor refused nothing
    assert vendor.audit().quota_rejections == 0


def test_a_call_takes_its_cost_in_points_and_the_bucket_never_throttles(
    pipeline: Pipeline, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a GraphQL API whose bucket holds 60 points, restores 20 a second and needs 15 in
    # it for a call (each costing 5 to 15), and a policy told 20 points a second, each call
    # reserving 15 and corrected by the cost the answer states
    points = PointsApi(maximum=60, restore_rate=20, cost_range=(5, 15), requested_cost=15)
    with VendorSimulator(graphql=points) as vendor:
        p = learning(pipeline, monkeypatch, vendor, "ratelimit", told=(20, 1.0))
        cost = {"reserve": 15, "actual": {"json_path": "extensions.cost.actualQueryCost"}}
        p = paying_points(p, monkeypatch, {**cost, "bucket": "shopify"})
        # When twelve jobs are called, four at a time, in three batches
        for _ in range(3):
            run(p, 4)
        audit = points.audit()
    # Then calls went out, and the bucket never refused one
    assert sum(audit.effects_by_id.values()) >= 4
    assert audit.throttled_total == 0


def test_a_stated_reset_closes_the_gate_for_an_hour_at_most(
    pipeline: Pipeline, monkeypatch: pytest.MonkeyPatch, vendor_in: Any
) -> None:
    # Given a vendor allowing 2 calls in two hours, one spent by another client
    vendor = vendor_in("x-ratelimit", (2, 7200.0))
    p = learning(pipeline, monkeypatch, vendor, "x-ratelimit", told=(50, 7200.0))
    urllib3.PoolManager(retries=False).request("DELETE", f"{vendor.url}/v1/tenants/o/objects/o")
    # When sweeper's call is answered with none remaining until the window turns in two hours
    assert run(p, 1) == 1
    # Then the gate is closed for an hour, not two (a wrong clock must not hold a scope longer)
    scope = scope_item(p)["pk"]["S"].removeprefix(SCOPE_KEY_PREFIX)
    closed_until = DynamoLimiter(p.aws.dynamodb(), p.resources.limiter_table).state(scope)
    assert closed_until.closed_until is not None
    assert closed_until.closed_until <= time.time() + MAX_WAIT_SECONDS
    assert closed_until.closed_until >= time.time() + MAX_WAIT_SECONDS - 60

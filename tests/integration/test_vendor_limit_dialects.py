"""The vendor simulator states its limits as real vendors do, and sweeper's reader reads back
the limits the simulator was configured with."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import pytest
import urllib3

from sweeper.actions.answer_match import Answer, JsonPathEquals, parse_json_path
from sweeper.vendor_limits import (
    SHOPIFY_COST,
    BucketReading,
    PatternSource,
    RateLimitSource,
    Source,
    XRateLimitSource,
    compile_pattern,
)
from sweeper_local.graphql_cost import GRAPHQL_PATH, PointsApi
from sweeper_local.limit_dialects import POLICY_NAME, RESOURCE_NAME, Dialect
from sweeper_local.vendor import VendorProcess, VendorSimulator

pytestmark = pytest.mark.integration

LIMIT, PERIOD = 5, 60.0
SOURCES: dict[Dialect, tuple[Source, str]] = {
    "ratelimit": (RateLimitSource(), POLICY_NAME),
    "x-ratelimit": (XRateLimitSource(reset_as="epoch"), RESOURCE_NAME),
    "sforce": (
        PatternSource(
            "Sforce-Limit-Info",
            compile_pattern(r"api-usage=(?P<used>\d+)/(?P<quota>\d+)"),
            name="api",
        ),
        "api",
    ),
}


@pytest.fixture
def http() -> Iterator[urllib3.PoolManager]:
    pool = urllib3.PoolManager(retries=False, timeout=urllib3.Timeout(total=5.0))
    yield pool
    pool.clear()


def _delete(http: urllib3.PoolManager, url: str, n: int) -> Answer:
    response = http.request(
        "DELETE", f"{url}/v1/tenants/t1/objects/o{n}", headers={"Idempotency-Key": f"k{n}"}
    )
    return Answer.of(response.status, dict(response.headers), response.data)


@pytest.mark.parametrize("dialect", list(SOURCES))
def test_each_dialects_headers_read_back_as_the_configured_quota(
    http: urllib3.PoolManager, dialect: Dialect
) -> None:
    source, name = SOURCES[dialect]
    with VendorSimulator(quota=(LIMIT, PERIOD), limit_dialect=dialect) as sim:
        # Given three calls made of a quota of 5 per minute
        answers = [_delete(http, sim.url, n) for n in range(3)]
        # When the third answer is read
        reading = source.read(answers[-1], time.time())
        # Then it states the quota, and that two calls remain
        limit = reading.limit(name)
        assert limit is not None, reading.diagnostics
        assert (limit.quota, limit.remaining) == (LIMIT, LIMIT - 3)
        if dialect == "ratelimit":
            assert limit.window_seconds == PERIOD
        if dialect != "sforce":  # Salesforce states no reset
            assert limit.reset_seconds is not None
            assert 0 < limit.reset_seconds <= PERIOD + 1


@pytest.mark.parametrize("dialect", ["ratelimit", "x-ratelimit"])
def test_a_refused_call_states_nothing_remains_until_the_next_admission(
    http: urllib3.PoolManager, dialect: Dialect
) -> None:
    source, name = SOURCES[dialect]
    with VendorSimulator(quota=(LIMIT, PERIOD), limit_dialect=dialect) as sim:
        answers = [_delete(http, sim.url, n) for n in range(LIMIT + 1)]
        assert answers[-1].status == 429
        limit = source.read(answers[-1], time.time()).limit(name)
        assert limit is not None
        assert limit.remaining == 0
        assert limit.reset_seconds is not None
        assert 0 < limit.reset_seconds <= PERIOD + 1


def test_the_plain_simulator_states_no_quota(http: urllib3.PoolManager) -> None:
    with VendorSimulator(quota=(LIMIT, PERIOD)) as sim:
        answer = _delete(http, sim.url, 0)
    reading = SOURCES["ratelimit"][0].read(answer, time.time())
    assert not reading.learned
    assert answer.header("x-ratelimit-limit") is None


def test_the_ietf_dialect_refuses_a_window_of_part_seconds() -> None:
    with pytest.raises(ValueError, match="whole seconds"):
        VendorSimulator(quota=(5, 0.5), limit_dialect="ratelimit")


def test_the_simulator_process_takes_its_dialect_and_bucket_from_the_command_line(
    http: urllib3.PoolManager,
) -> None:
    process = VendorProcess(
        *("--rate", "7/10s", "--scope", "global", "--limit-dialect", "x-ratelimit"),
        *("--graphql-bucket", "300:5", "--graphql-costs", "2-2"),
    )
    try:
        answer = _delete(http, process.url, 0)
        points = _mutate(http, process.url, "gid://shopify/Product/1")
    finally:
        process.stop()
    limit = SOURCES["x-ratelimit"][0].read(answer, time.time()).limit(RESOURCE_NAME)
    assert limit is not None
    assert (limit.quota, limit.remaining) == (7, 6)
    cost = SHOPIFY_COST.read(points, time.time()).cost
    assert cost is not None
    assert cost.actual == 2
    assert cost.bucket is not None
    assert (cost.bucket.maximum, cost.bucket.restore_rate) == (300, 5)


# --- the GraphQL API charged in points ------------------------------------------------------

THROTTLED = JsonPathEquals(parse_json_path("errors[0].extensions.code"), "THROTTLED")


def _mutate(http: urllib3.PoolManager, url: str, product: str) -> Answer:
    body = {
        "query": "mutation($id: ID!) { productDelete(input: {id: $id}) { deletedProductId } }",
        "variables": {"id": product},
    }
    response = http.request(
        "POST",
        f"{url}{GRAPHQL_PATH}",
        body=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    return Answer.of(response.status, dict(response.headers), response.data)


def test_graphql_answers_state_the_configured_bucket_and_the_cost_charged(
    http: urllib3.PoolManager,
) -> None:
    points = PointsApi(maximum=100, restore_rate=0.001, cost_range=(10, 10))
    with VendorSimulator(graphql=points) as sim:
        first, second = (_mutate(http, sim.url, f"gid://shopify/Product/{n}") for n in (1, 2))
    reading = SHOPIFY_COST.read(second, time.time())
    assert reading.cost is not None
    assert (reading.cost.requested, reading.cost.actual) == (10, 10)
    assert reading.cost.bucket == BucketReading(level=80, maximum=100, restore_rate=0.001)
    assert first.status == second.status == 200
    assert not THROTTLED.holds(second)


def test_an_empty_bucket_throttles_with_200_and_the_throttled_code_and_no_effect(
    http: urllib3.PoolManager,
) -> None:
    # Given a bucket that pays for two calls and barely restores
    points = PointsApi(maximum=20, restore_rate=0.001, cost_range=(10, 10))
    with VendorSimulator(graphql=points) as sim:
        answers = [_mutate(http, sim.url, f"gid://shopify/Product/{n}") for n in range(3)]
        audit = points.audit()
    # Then the third is throttled, as Shopify does: 200, THROTTLED, no actual cost, no effect
    assert [a.status for a in answers] == [200, 200, 200]
    assert [THROTTLED.holds(a) for a in answers] == [False, False, True]
    cost = SHOPIFY_COST.read(answers[-1], time.time()).cost
    assert cost is not None
    assert cost.actual is None
    assert audit.throttled_total == 1
    assert audit.effects_by_id == {"gid://shopify/Product/0": 1, "gid://shopify/Product/1": 1}


def test_a_product_deleted_twice_answers_a_user_error_without_a_second_effect(
    http: urllib3.PoolManager,
) -> None:
    points = PointsApi(maximum=100, restore_rate=50, cost_range=(1, 1))
    with VendorSimulator(graphql=points) as sim:
        _mutate(http, sim.url, "gid://shopify/Product/9")
        again = _mutate(http, sim.url, "gid://shopify/Product/9")
    assert again.document()["data"]["productDelete"]["userErrors"]
    assert points.audit().effects_by_id == {"gid://shopify/Product/9": 1}


def test_the_simulator_process_takes_a_vendors_name_for_its_dialect(
    http: urllib3.PoolManager,
) -> None:
    # Given the simulator run as its own process, its dialect named as a vendor's
    ietf = VendorProcess("--rate", "7/10s", "--scope", "global", "--dialect", "ietf")
    github = VendorProcess("--dialect", "github", "--github-core", "60/3600s")
    try:
        stated = _delete(http, ietf.url, 0)
        artifact = http.request(
            "DELETE",
            f"{github.url}/repos/octo-org/ci/actions/artifacts/42",
            headers={"Authorization": "Bearer ghs_x"},
        )
        delete = Answer.of(artifact.status, dict(artifact.headers), artifact.data)
    finally:
        ietf.stop()
        github.stop()
    # Then "ietf" states the IETF fields, and GitHub's API the owner's primary limit as GitHub
    # does (an epoch reset, turned into a wait by the reader)
    ietf_limit = SOURCES["ratelimit"][0].read(stated, time.time()).limit(POLICY_NAME)
    assert ietf_limit is not None
    assert (ietf_limit.quota, ietf_limit.remaining) == (7, 6)
    assert delete.status == 204
    core = SOURCES["x-ratelimit"][0].read(delete, time.time()).limit(RESOURCE_NAME)
    assert core is not None
    assert (core.quota, core.remaining) == (60, 59)
    assert core.reset_seconds is not None
    assert 3590 <= core.reset_seconds <= 3601

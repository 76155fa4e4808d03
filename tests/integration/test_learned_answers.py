"""The http action reads what an answer states of the vendor's limits and hands it out on its
result, and classes a GraphQL call throttled with HTTP 200 from its body (Shopify's points
bucket, served by the vendor simulator)."""

from __future__ import annotations

import pytest

from sweeper.actions.http import HttpActionConfig
from sweeper.actions.http_action import HttpAction
from sweeper.config.learn import LearnConfig
from sweeper.models import OutcomeClass
from sweeper_local.graphql_cost import GRAPHQL_PATH, PointsApi
from sweeper_local.vendor import VendorSimulator
from tests.integration.test_http_action import job_for

pytestmark = pytest.mark.integration

#: Shopify throttles a GraphQL call with HTTP 200 and this error code.
GRAPHQL_THROTTLED = {
    "status": 200,
    "json_path": {"path": "errors[0].extensions.code", "equals": "THROTTLED"},
    "outcome": "throttled",
    "code": "graphql_throttled",
}
PRODUCT_DELETE = "mutation($id: ID!) { productDelete(input: {id: $id}) { deletedProductId } }"
SHOPIFY_LEARN = {
    "cost": {
        "reserve": 10,
        "actual": {"json_path": "extensions.cost.actualQueryCost"},
        "bucket": "shopify",
    }
}


def product_delete(url: str) -> HttpAction:
    """A `productDelete` mutation per job: the query a constant, its variables filled."""
    config = HttpActionConfig(
        api_url=url,
        allow_plain_http=True,
        method="POST",
        url_template=f"{{api_url}}{GRAPHQL_PATH}",
        body={
            "query": PRODUCT_DELETE,
            "variables": {"id": "{object_id}"},
        },
        outcome_rules=[GRAPHQL_THROTTLED],
    )
    learn = LearnConfig.model_validate(SHOPIFY_LEARN)
    return HttpAction(config, reader=learn.reader("points"))


def test_a_graphql_answer_hands_out_its_cost_and_bucket_and_nothing_of_its_body() -> None:
    # Given a points bucket of 100 restoring 1 a second, each call costing 7 (requesting 20)
    points = PointsApi(maximum=100, restore_rate=1, cost_range=(7, 7), requested_cost=20)
    with VendorSimulator(graphql=points) as sim:
        action = product_delete(sim.url)
        # When one product is deleted
        result = action.perform(job_for(object_id="p1"))
    # Then it was accepted, and its result carries the cost charged and the bucket's level
    assert result.outcome is OutcomeClass.ACCEPTED
    assert result.reading is not None
    cost = result.reading.cost
    assert cost is not None
    assert (cost.requested, cost.actual) == (20, 7)
    assert cost.bucket is not None
    assert (cost.bucket.level, cost.bucket.maximum, cost.bucket.restore_rate) == (93, 100, 1)
    # And nothing of the answer's text is kept on it (never stored: a replay read nothing)
    assert "reading" not in result.model_dump()


def test_a_graphql_call_throttled_with_200_is_classed_throttled_from_its_body() -> None:
    # Given a bucket that holds less than a call requests
    points = PointsApi(maximum=30, restore_rate=1, cost_range=(15, 15), requested_cost=20)
    with VendorSimulator(graphql=points) as sim:
        action = product_delete(sim.url)
        assert action.perform(job_for(object_id="p1")).outcome is OutcomeClass.ACCEPTED
        # When the next call finds 15 points where it requests 20
        result = action.perform(job_for(object_id="p2"))
        audit = points.audit()
    # Then its HTTP 200 is throttled by the rule on the body's error code, with no effect
    assert (result.status_code, result.outcome, result.code) == (
        200,
        OutcomeClass.THROTTLED,
        "graphql_throttled",
    )
    assert audit.throttled_total == 1
    assert audit.effects_by_id == {"p1": 1}
    # And its reading says what the bucket holds, and that nothing was charged
    assert result.reading is not None
    assert result.reading.cost is not None
    assert result.reading.cost.actual is None
    assert result.reading.cost.bucket is not None
    assert result.reading.cost.bucket.level == 15

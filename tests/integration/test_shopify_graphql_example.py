"""docs/examples/shopify-graphql.toml end to end on the local stack (issue 43, point 7).

The policy file as shipped, on the stack `sweeper local up --config
docs/examples/shopify-graphql.toml --api-url URL` runs: Shopify is the vendor simulator as a
process of its own (`python -m sweeper_local.vendor --dialect shopify-graphql`), keeping a
bucket of points per store (the store's host, as the rehearsal names it) and answering every
call HTTP 200 with `extensions.cost`. Each store's access token is given for its secret's ARN.
The stores' plan is not told: the bucket restores 50 points a second, a quarter of the
example's told ceiling (200), and holds 200; each productDelete costs 10. The rule these tests
hold: no THROTTLED answer at all, and every product deleted exactly once.
"""

from __future__ import annotations

import itertools
import json
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import partial
from pathlib import Path

import pytest

from sweeper.config import Policy
from sweeper.ledger.store import Ledger
from sweeper.limiter.keys import SCOPE_KEY_PREFIX
from sweeper.models import Job, JobStatus, NewJob, OutcomeClass, operation_key
from sweeper.scheduling import schedule_jobs
from sweeper_local.background import LocalConsoleStack
from sweeper_local.graphql_cost import GRAPHQL_PATH
from sweeper_local.vendor import VendorProcess
from sweeper_tools.policy_file import load_config
from tests.conftest import PgServer
from tests.integration.examples import example_against, tenant_secrets, wait_for
from tests.integration.examples import final_jobs as _final

pytestmark = pytest.mark.integration

EXAMPLE = Path(__file__).parents[2] / "docs" / "examples" / "shopify-graphql.toml"
DEADLINE_SECONDS = 60.0
#: Each store's bucket: 200 points, restoring 50 a second (a quarter of the told 200/s); a
#: productDelete costs 10, as the example reserves.
BUCKET, RESTORE, COST = 200, 50, 10
STORES = ("acme", "globex", "initech")
PRODUCTS_PER_STORE = 12
_databases = itertools.count()


@dataclass
class Shopify:
    stack: LocalConsoleStack
    api: VendorProcess

    @property
    def policy(self) -> Policy:
        return self.stack.policies["shopify-graphql"].policy

    def learned_rates(self) -> dict[str, float]:
        """The rate (points a second) each store's limit holds in its limiter item."""
        table = self.stack.policies["shopify-graphql"].resources.limiter_table
        scan = self.stack.stack.aws.dynamodb().scan(TableName=table)
        prefix = f"{SCOPE_KEY_PREFIX}shopify:"
        return {
            i["pk"]["S"].removeprefix(prefix): int(i["ar"]["N"]) / 1000
            for i in scan["Items"]
            if "ar" in i and i["pk"]["S"].startswith(prefix)
        }

    def delete_directly(self, product: str) -> None:
        """The store's own admin deletes a product (sweeper's call then finds it gone)."""
        body = {"query": "mutation { productDelete }", "variables": {"input": {"id": product}}}
        request = urllib.request.Request(
            f"{self.api.url}{GRAPHQL_PATH}", data=json.dumps(body).encode(), method="POST"
        )
        with urllib.request.urlopen(request, timeout=10):
            pass


@pytest.fixture(scope="module")
def shopify(pg_server: PgServer, pg_template: str) -> Iterator[Shopify]:
    config = load_config(EXAMPLE)
    tokens = tenant_secrets(config.policies[0], STORES, "shpat_")  # a token per store
    api = VendorProcess(
        *("--dialect", "shopify-graphql", "--graphql-bucket", f"{BUCKET}:{RESTORE}"),
        *("--graphql-costs", f"{COST}-{COST}"),
    )
    name = f"sweeper_shopify_{next(_databases)}"
    databases = (pg_server, pg_template, name)
    with example_against(EXAMPLE, api, tokens, databases) as stack:
        yield Shopify(stack, api)


@pytest.fixture
def ledger(shopify: Shopify) -> Iterator[Ledger]:
    store = Ledger(shopify.stack.database_url)
    yield store
    store.close()


_wait = partial(wait_for, deadline_seconds=DEADLINE_SECONDS)


def _run(ledger: Ledger, policy: Policy, rows: list[tuple[str, str]]) -> dict[str, Job]:
    now = datetime.now(UTC)
    schedule_jobs(ledger, policy, [NewJob(store, product, now) for store, product in rows], now)
    keys = [operation_key(policy.name, s, p, policy.version) for s, p in rows]
    _wait("every product final", lambda: len(_final(ledger, keys)) == len(keys))
    return _final(ledger, keys)


def test_the_shopify_example_deletes_every_product_at_the_rate_each_bucket_restores(
    shopify: Shopify, ledger: Ledger
) -> None:
    # Given the example's policy on the local stack, three stores' products (one of each
    # store's already deleted by the store itself), and a bucket per store restoring 50
    # points a second, which the policy is not told
    shopify.api.reset()
    rows = [
        (store, f"gid://shopify/Product/{store}-{n}")
        for store in STORES
        for n in range(PRODUCTS_PER_STORE)
    ]
    gone = set(rows[::PRODUCTS_PER_STORE])
    for _, product in gone:
        shopify.delete_directly(product)
    # When the producer and the consumers run them
    jobs = _run(ledger, shopify.policy, rows)
    audit = shopify.api.graphql_audit()

    # Then every obligation is final: deleted, or found already gone (a userErrors answer)
    outcomes = {(j.tenant_id, j.object_id): (j.status, j.last_outcome) for j in jobs.values()}
    assert outcomes == {
        row: (JobStatus.SUCCEEDED, OutcomeClass.ABSENT if row in gone else OutcomeClass.ACCEPTED)
        for row in rows
    }
    # And each product was deleted once, and no call of sweeper's was THROTTLED
    assert audit.effects_by_id == {product: 1 for _, product in rows}
    assert audit.throttled_total == 0
    assert audit.calls_total == len(gone) + len(rows)
    # And each store's limit holds the rate its bucket restores (headroom applied), not the
    # told 200 points a second
    stated = RESTORE * shopify.policy.quota.effective_headroom
    rates = shopify.learned_rates()
    assert sorted(rates) == sorted(STORES)
    assert all(rate == pytest.approx(stated, rel=0.02) for rate in rates.values()), rates

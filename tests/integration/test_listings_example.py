"""docs/examples/listings.toml end to end on the local stack (issue 25, item 5).

The policy file as shipped, on the stack `sweeper local up --config docs/examples/listings.toml
--api-url URL` runs: the outside marketplace is the vendor simulator as a process of its own
(its arrival times not delayed by this interpreter), knowing one API key; the local stack is
given that key for the policy's secret ARN, as `local up` takes it from SWEEPER_LOCAL_SECRETS,
and makes it in the local Secrets Manager. The marketplace enforces 2 calls per second per
store and 40 for the app (sliding windows, every arriving call counted) and names the limit in
its 429s. The producer ticks; consumers (worker processes, as Lambda runs them) call
`DELETE /v1/stores/{store}/listings/{listing}`. One stack serves the module's tests, each with
stores of its own. (Against the stack's own simulator the key is made up and registered with
it: tests/integration/test_vendor_listings.py.)
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import partial
from pathlib import Path

import pytest

from sweeper.actions.http import HttpActionConfig
from sweeper.actions.http_auth import HeaderAuth
from sweeper.config import Policy
from sweeper.ledger.store import Ledger
from sweeper.models import Job, JobStatus, NewJob, OutcomeClass, operation_key
from sweeper.scheduling import schedule_jobs
from sweeper_local.background import LocalConsoleStack
from sweeper_local.marketplace import ListingsAudit
from sweeper_local.vendor import LISTINGS_API_KEYS_ENV, VendorProcess
from sweeper_tools.policy_file import load_config
from tests.conftest import PgServer
from tests.integration.examples import final_jobs as _final
from tests.integration.examples import wait_for

pytestmark = pytest.mark.integration

EXAMPLE = Path(__file__).parents[2] / "docs" / "examples" / "listings.toml"
TICK_SECONDS = 0.5
DEADLINE_SECONDS = 60.0
#: 24 stores could take 48 calls/s, more than the app's 40/s: every call holds both limits (the
#: app's binds where the stack runs fast enough; on a busy machine the stores' do).
STORES, LISTINGS_PER_STORE = 24, 3
#: The Retry-After of an injected 429, and the part of it in which nothing may arrive: from
#: well after the calls already in flight when it was answered (and the closure written, on a
#: busy machine), to a margin before it ends.
RETRY_AFTER_SECONDS = 3
QUIET = (1.0, RETRY_AFTER_SECONDS - 0.4)
API_KEY = "the-users-key"
_databases = itertools.count()


@dataclass
class Listings:
    stack: LocalConsoleStack
    marketplace: VendorProcess

    @property
    def policy(self) -> Policy:
        return self.stack.policies["listings"].policy


@pytest.fixture(scope="module")
def listings(pg_server: PgServer, pg_template: str) -> Iterator[Listings]:
    config = load_config(EXAMPLE)
    action = config.policies[0].action
    assert isinstance(action, HttpActionConfig)
    assert isinstance(action.auth, HeaderAuth)
    with pytest.MonkeyPatch.context() as env:
        env.setenv(LISTINGS_API_KEYS_ENV, f'["{API_KEY}"]')  # the marketplace's, not ours
        marketplace = VendorProcess()
    name = f"sweeper_listings_{next(_databases)}"
    url = pg_server.create_database(name, template=pg_template)
    stack = LocalConsoleStack(
        config,
        config_path=str(EXAMPLE),
        database_url=url,
        api_url=marketplace.url,
        tick_seconds=TICK_SECONDS,
        secret_values={action.auth.secret_arn: API_KEY},
    )
    try:
        stack.start()
        assert stack.stack.vendor is None  # no simulator of the stack's own
        yield Listings(stack, marketplace)
    finally:
        stack.stop()
        marketplace.stop()
        pg_server.drop_database(name)


@pytest.fixture
def ledger(listings: Listings) -> Iterator[Ledger]:
    store = Ledger(listings.stack.database_url)
    yield store
    store.close()


def _schedule(ledger: Ledger, policy: Policy, rows: list[tuple[str, str]]) -> list[str]:
    now = datetime.now(UTC)
    schedule_jobs(ledger, policy, [NewJob(store, listing, now) for store, listing in rows], now)
    return [operation_key(policy.name, store, listing, policy.version) for store, listing in rows]


_wait = partial(wait_for, deadline_seconds=DEADLINE_SECONDS)


def _run(ledger: Ledger, policy: Policy, rows: list[tuple[str, str]]) -> dict[str, Job]:
    keys = _schedule(ledger, policy, rows)
    _wait("every listing final", lambda: len(_final(ledger, keys)) == len(keys))
    return _final(ledger, keys)


def _rows(prefix: str, stores: int, per_store: int) -> list[tuple[str, str]]:
    # Store by store in turn, as a backlog would be scheduled: the producer interleaves them.
    return [(f"{prefix}{s}", f"l{n}") for s in range(stores) for n in range(per_store)]


def test_the_listings_example_deletes_every_listing_within_both_limits(
    listings: Listings, ledger: Ledger
) -> None:
    # Given the example's policy on the local stack, 24 stores' listings (one in three stores
    # has one already absent), and the marketplace's two windows
    marketplace = listings.marketplace
    marketplace.reset()
    rows = _rows("store-", STORES, LISTINGS_PER_STORE)
    absent = set(rows[::9])
    for store, listing in absent:
        marketplace.add_absent_listing(store, listing)
    # When the producer and the consumers run them
    jobs = _run(ledger, listings.policy, rows)
    audit = marketplace.listings_audit()

    # Then every obligation is final: deleted, or found already absent
    outcomes = {(j.tenant_id, j.object_id): (j.status, j.last_outcome) for j in jobs.values()}
    assert outcomes == {
        row: (JobStatus.SUCCEEDED, OutcomeClass.ABSENT if row in absent else OutcomeClass.ACCEPTED)
        for row in rows
    }
    # And the marketplace, given the user's key on every call, saw one DELETE per listing and
    # one deletion per present listing
    assert audit.calls_by_listing == {f"{s}/{li}": 1 for s, li in rows}
    assert audit.effects_by_listing == {f"{s}/{li}": 1 for s, li in rows if (s, li) not in absent}
    assert audit.responses_by_status == {204: len(rows) - len(absent), 404: len(absent)}
    # And no call was refused by either limit, and none could have been: no store drew more
    # than 2 calls in any second, and the app no more than 40
    assert audit.throttled_by_scope == {}
    assert audit.most_in_a_store_window() <= 2
    assert audit.most_in_an_app_window() <= 40


def _arrivals_between(audit: ListingsAudit, start: float, end: float) -> dict[str, int]:
    """Calls per store that arrived within (start, end), by the marketplace's clock."""
    counts = {
        s: sum(start < t < end for t in times) for s, times in audit.arrivals_by_store.items()
    }
    return {store: n for store, n in counts.items() if n}


def test_a_429_naming_the_app_closes_the_app_limit_and_every_store_waits(
    listings: Listings, ledger: Ledger
) -> None:
    # Given four stores' listings, and the marketplace answering the first call 429 naming
    # the app, with a Retry-After
    marketplace = listings.marketplace
    marketplace.reset()
    marketplace.throttle_listings("app", retry_after_seconds=RETRY_AFTER_SECONDS)
    rows = _rows("app-", 4, 4)
    # When they run
    jobs = _run(ledger, listings.policy, rows)
    audit = marketplace.listings_audit()
    # Then while the app was closed no store called at all
    (refused_at,) = audit.forced_at
    assert _arrivals_between(audit, refused_at + QUIET[0], refused_at + QUIET[1]) == {}
    # And afterwards every listing was deleted once
    assert {j.status for j in jobs.values()} == {JobStatus.SUCCEEDED}
    assert audit.effects_by_listing == {f"{s}/{li}": 1 for s, li in rows}


def test_a_429_naming_the_store_closes_that_store_only(listings: Listings, ledger: Ledger) -> None:
    # Given four stores' listings, and the marketplace answering one store's first call 429
    # naming the store, with a Retry-After
    marketplace = listings.marketplace
    marketplace.reset()
    marketplace.throttle_listings("store", store="one-0", retry_after_seconds=RETRY_AFTER_SECONDS)
    rows = _rows("one-", 4, 8)
    # When they run
    jobs = _run(ledger, listings.policy, rows)
    audit = marketplace.listings_audit()
    # Then while that store was closed it did not call, and the other stores went on
    (refused_at,) = audit.forced_at
    during = _arrivals_between(audit, refused_at + QUIET[0], refused_at + QUIET[1])
    assert set(during) == {"one-1", "one-2", "one-3"}
    assert {j.status for j in jobs.values()} == {JobStatus.SUCCEEDED}
    assert audit.effects_by_listing == {f"{s}/{li}": 1 for s, li in rows}

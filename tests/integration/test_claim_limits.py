"""The producer's claims under several limits (sweeper.producer.claim_bounds): every limit bounds
them, a closed limit's rows keep their time, and tenants take turns under a shared limit."""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest

from sweeper.config import Policy
from sweeper.ledger.store import Ledger
from sweeper.models import JobMessage, NewJob, OutcomeClass
from sweeper.producer.run import LIMIT_CLOSED, ProducerReport, run_producer
from sweeper.scheduling import scope_for
from tests.fakes import FakePublisher

pytestmark = pytest.mark.integration

T0 = datetime(2026, 11, 29, 2, 0, tzinfo=UTC)
#: The rows a test reads back to see that a claim left them as they were.
ROW_STATE = (
    "SELECT id, status, next_attempt_at, attempt_count, lease_owner FROM sweeper_jobs "
    "WHERE policy = %(policy)s AND tenant_id <> %(history)s ORDER BY id"
)
#: The tenant whose settled rows give the consumers' recent rate.
HISTORY = "history"


def rate(per_second: int) -> dict[str, Any]:
    return {"limit": per_second, "period_seconds": 1, "headroom": 1.0}


def listings(app_per_second: int = 40, **extra: Any) -> Policy:
    """The marketplace of issue 25: 2 requests/s per store and an app limit; a 20 s lease, so
    the horizon is 10 s: a store can use 20 rows of it, the app 10 x its rate."""
    return Policy.model_validate(
        {
            "name": "listings",
            "lease_seconds": 20,
            "limits": [
                {"name": "store", "key": "{tenant_id}", "rate": rate(2)},
                {"name": "app", "key": "app", "rate": rate(app_per_second)},
            ],
            **extra,
        }
    )


def seed(ledger: Ledger, policy: Policy, counts: dict[str, int]) -> None:
    """`counts[tenant]` due rows per tenant, earlier tenants' rows older."""
    jobs = [
        NewJob(tenant, f"o{i:05d}", T0 - timedelta(hours=len(counts) - t, seconds=i))
        for t, (tenant, n) in enumerate(counts.items())
        for i in range(n)
    ]
    ledger.schedule(policy.name, 1, lambda j: scope_for(policy, j), jobs, T0)


def consumers_settled_fast(ledger: Ledger, policy: Policy, n: int, at: datetime) -> None:
    """`n` jobs settled at `at`: the consumers' achieved rate is high, so the in-flight budget
    is what the limits allow, not the floor (sweeper.producer.backpressure). Run before any other
    row is scheduled (the claim takes the history's rows alone)."""
    jobs = [NewJob(HISTORY, f"h{i:05d}", at - timedelta(minutes=1)) for i in range(n)]
    ledger.schedule(policy.name, 1, lambda j: "history", jobs, at - timedelta(minutes=1))
    claimed = ledger.claim(policy.name, "history", at - timedelta(seconds=2), timedelta(hours=1), n)
    assert len(claimed) == n
    for job in claimed:
        ledger.mark_succeeded(job.operation_key, OutcomeClass.ACCEPTED, at)


def produce(
    ledger: Ledger,
    policy: Policy,
    publisher: FakePublisher,
    at: datetime = T0,
    closed: Collection[str] = (),
) -> ProducerReport:
    return run_producer(
        policy,
        at,
        ledger,
        publisher,
        clock=lambda: at,
        remaining_seconds=lambda: 100.0,
        closed_scopes=lambda: closed,
    )


def published_tenants(publisher: FakePublisher, start: int = 0) -> list[str]:
    return [JobMessage.model_validate_json(m.body).tenant_id for m in publisher.sent[start:]]


def row_state(db_url: str, policy: str) -> list[tuple[Any, ...]]:
    with psycopg.connect(db_url) as conn:
        return conn.execute(ROW_STATE, {"policy": policy, "history": HISTORY}).fetchall()


def test_a_claim_under_an_app_limit_takes_what_the_app_drains_not_the_stores_sum(
    ledger: Ledger,
) -> None:
    # Given 50 stores at 2/s each under an app limit of 40/s (the stores add up to 100/s), each
    # store with 30 due rows, and consumers fast enough that only the limits bound the budget
    policy = listings(app_per_second=40)
    consumers_settled_fast(ledger, policy, 200, T0 - timedelta(seconds=1))
    seed(ledger, policy, {f"s{i:02d}": 30 for i in range(50)})
    publisher = FakePublisher()
    # When the producer runs
    report = produce(ledger, policy, publisher)
    # Then it leaves on the consumers what the app drains within the horizon: 40/s x 10 s, not
    # the 1,000 the 50 stores' own caps (2/s x 10 s each) would add up to
    assert (report.in_flight_budget, report.published) == (400, 400)
    assert report.stop_reason == "in_flight_cap"
    # and every store had its share of it
    assert set(Counter(published_tenants(publisher)).values()) == {8}


def test_each_stores_rows_are_bounded_by_what_its_own_limit_drains(ledger: Ledger) -> None:
    # Given one store with 100 due rows and four with 5, under 2/s per store and 40/s for the app
    policy = listings(app_per_second=40)
    consumers_settled_fast(ledger, policy, 200, T0 - timedelta(seconds=1))
    seed(ledger, policy, {"big": 100, "s1": 5, "s2": 5, "s3": 5, "s4": 5})
    publisher = FakePublisher()
    # When the producer runs, with room for 400 rows under the app limit
    report = produce(ledger, policy, publisher)
    # Then the big store gets what its 2/s uses within the horizon (20 rows), the others all
    assert Counter(published_tenants(publisher)) == {"big": 20, "s1": 5, "s2": 5, "s3": 5, "s4": 5}
    assert (report.in_flight_budget, report.stop_reason) == (400, "drained")


def test_a_closed_app_limit_claims_nothing_and_leaves_every_row_as_it_was(
    ledger: Ledger, db_url: str
) -> None:
    # Given six stores with due work, and the app limit closed (a 429 naming the app)
    policy = listings()
    seed(ledger, policy, {f"s{i}": 5 for i in range(6)})
    before = row_state(db_url, "listings")
    publisher = FakePublisher()
    # When the producer runs, every store's own limit open
    report = produce(ledger, policy, publisher, closed={"app:app", "other-policy-scope"})
    # Then nothing is claimed or published, and the run says why
    assert (report.discovered, report.published) == (0, 0)
    assert report.stop_reason == LIMIT_CLOSED
    # and every row keeps its due time, its attempts and its status
    assert row_state(db_url, "listings") == before
    # and once the app reopens, the next run takes them all
    later = T0 + timedelta(seconds=30)
    assert produce(ledger, policy, FakePublisher(), at=later).published == 30


def test_a_closed_store_limit_holds_only_that_stores_rows(ledger: Ledger, db_url: str) -> None:
    # Given ten stores with due work, and store s3's own limit closed
    policy = listings()
    consumers_settled_fast(ledger, policy, 200, T0 - timedelta(seconds=1))
    seed(ledger, policy, {f"s{i}": 5 for i in range(10)})
    before = {row[0]: row for row in row_state(db_url, "listings")}
    publisher = FakePublisher()
    # When the producer runs
    report = produce(ledger, policy, publisher, closed={"s3"})
    # Then every other store's rows are published, none of s3's
    assert Counter(published_tenants(publisher)) == {f"s{i}": 5 for i in range(10) if i != 3}
    assert report.published == 45
    # and s3's rows are as they were
    after = {row[0]: row for row in row_state(db_url, "listings")}
    held = [row for row in after.values() if row[4] is None]
    assert len(held) == 5
    assert all(before[row[0]] == row for row in held)


def test_a_closed_tenant_keyed_limit_holds_only_that_tenants_rows(
    ledger: Ledger, db_url: str
) -> None:
    # Given a policy whose scope is per store and endpoint, under a further limit per account
    # (keyed by the tenant, its limiter key `account:acct-TENANT`), three tenants with work
    policy = Policy.model_validate(
        {
            "name": "listings",
            "limits": [
                {"name": "endpoint", "key": "{tenant_id}:listings", "rate": rate(5)},
                {"name": "account", "key": "acct-{tenant_id}", "rate": rate(2)},
            ],
        }
    )
    seed(ledger, policy, {"a": 4, "b": 4, "c": 4})
    before = {row[0]: row for row in row_state(db_url, "listings")}
    publisher = FakePublisher()
    # When the producer runs with tenant b's account limit closed
    produce(ledger, policy, publisher, closed={"account:acct-b"})
    # Then a's and c's rows go, b's stay as they were
    assert Counter(published_tenants(publisher)) == {"a": 4, "c": 4}
    after = row_state(db_url, "listings")
    assert [row for row in after if row[4] is None] == [
        before[row[0]] for row in after if row[4] is None
    ]
    assert len([row for row in after if row[4] is None]) == 4


def test_one_stores_backlog_and_nine_small_stores_are_published_interleaved_within_the_app(
    ledger: Ledger,
) -> None:
    # Given one store with 10,000 rows overdue for hours and nine with 10 each, due later, under
    # an app limit of 4/s (40 rows in the horizon) and 2/s per store (20 rows); one publish
    # call at a time, so the queue receives the calls in the order they are made
    policy = listings(app_per_second=4, publish_concurrency=1)
    small = [f"s{i}" for i in range(1, 10)]
    consumers_settled_fast(ledger, policy, 200, T0 - timedelta(seconds=1))
    seed(ledger, policy, {"big": 10_000} | dict.fromkeys(small, 10))
    publisher = FakePublisher()
    runs: list[ProducerReport] = []
    # When the producer runs three times, the consumers settling each run's rows in between
    for k in range(3):
        at = T0 + timedelta(seconds=k)
        start = len(publisher.sent)
        runs.append(produce(ledger, policy, publisher, at=at))
        page = published_tenants(publisher, start)
        # Then no run leaves more than the app's 40 rows on the consumers
        assert len(page) <= 40
        # and each run's rows go out in turns: every store's n-th before any store's (n+1)-th
        turn: Counter[str] = Counter()
        turns = []
        for tenant in page:
            turn[tenant] += 1
            turns.append(turn[tenant])
        assert turns == sorted(turns)
        for message in publisher.sent[start:]:
            key = JobMessage.model_validate_json(message.body).key
            ledger.mark_succeeded(key, OutcomeClass.ACCEPTED, at + timedelta(milliseconds=500))
    # and the first run shared the app's 40 rows among all ten stores, 4 each
    first = Counter(published_tenants(publisher)[:40])
    assert first == {"big": 4} | dict.fromkeys(small, 4)
    # and within three runs every small store's 10 rows were published, beside the backlog
    total = Counter(published_tenants(publisher))
    assert {tenant: total[tenant] for tenant in small} == dict.fromkeys(small, 10)
    # (the third run: their last 2 rows each, and the backlog's own cap, 2/s x 10 s)
    assert [r.published for r in runs] == [40, 40, 18 + 20]
    assert total["big"] == 4 + 4 + 20

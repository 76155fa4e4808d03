"""Claims pass over scopes whose gate is closed: their rows stay as they are, due time included."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from sweeper.config import Policy
from sweeper.errors import LimiterError
from sweeper.ledger.store import Ledger
from sweeper.limiter import DynamoLimiter, closed_scopes
from sweeper.models import JobMessage, JobStatus, NewJob, operation_key
from sweeper.producer.run import run_producer
from sweeper_local.aws import LocalAws
from tests.fakes import FakePublisher

pytestmark = pytest.mark.integration

T0 = datetime(2026, 11, 29, 2, 0, tzinfo=UTC)
LEASE = timedelta(seconds=60)


def seed_by_tenant(ledger: Ledger, tenants: int, per_tenant: int) -> None:
    """Jobs of `tenants` tenants, each tenant its own scope (its name), all due before T0."""
    jobs = [
        NewJob(f"t{t}", f"o{i:03d}", T0 - timedelta(seconds=i))
        for t in range(tenants)
        for i in range(per_tenant)
    ]
    ledger.schedule("exports", 1, lambda j: j.tenant_id, jobs, T0)


def test_a_claim_passes_over_a_closed_scope_and_leaves_its_rows_as_they_were(
    ledger: Ledger,
) -> None:
    # Given three scopes with five due rows each, and the gate of t1 closed
    seed_by_tenant(ledger, 3, 5)
    before = ledger.get(operation_key("exports", "t1", "o000", 1))
    assert before is not None
    # When a claim runs
    claimed = ledger.claim("exports", "batch-1", T0, LEASE, 100, closed_scopes=["t1"])
    # Then it leased every due row of the open scopes and none of the closed one
    assert sorted({job.scope for job in claimed}) == ["t0", "t2"]
    assert len(claimed) == 10
    # and the closed scope's rows are pending with their due time unchanged
    for i in range(5):
        job = ledger.get(operation_key("exports", "t1", f"o{i:03d}", 1))
        assert job is not None
        assert (job.status, job.next_attempt_at, job.attempt_count) == (
            JobStatus.PENDING,
            T0 - timedelta(seconds=i),
            0,
        )
    # and once the gate reopens, the next claim takes them
    again = ledger.claim("exports", "batch-2", T0, LEASE, 100)
    assert sorted(job.scope for job in again) == ["t1"] * 5


def test_the_producer_publishes_nothing_of_a_closed_scope(ledger: Ledger) -> None:
    # Given two scopes with due rows, one of them closed
    seed_by_tenant(ledger, 2, 6)
    policy = Policy(name="exports", page_size=4)
    publisher = FakePublisher()
    reads: list[int] = []

    def closed() -> set[str]:
        reads.append(1)
        return {"t0"}

    # When the producer runs
    report = run_producer(
        policy,
        T0,
        ledger,
        publisher,
        clock=lambda: T0,
        remaining_seconds=lambda: 100.0,
        closed_scopes=closed,
    )
    # Then only the open scope's rows were claimed and published, and the gates were read
    # before each claim (so a reopening mid-run is seen)
    bodies = [JobMessage.model_validate_json(m.body) for m in publisher.sent]
    assert {b.tenant_id for b in bodies} == {"t1"}
    assert (report.discovered, report.published) == (6, 6)
    assert len(reads) >= 2
    assert ledger.counts("exports")[JobStatus.PENDING] == 6


def test_closed_scopes_are_read_from_the_shared_limiter(local_aws: LocalAws, table: str) -> None:
    # Given a limiter table with a closed scope, a scope whose closure has ended, and a busy one
    limiter = DynamoLimiter(local_aws.dynamodb(), table)
    now = time.time()
    limiter.close("exports:t-closed", now + 60, "throttled")
    limiter.close("exports:t-auth", now + 60, "auth")
    limiter.close("exports:t-reopened", now - 1, "throttled")
    limiter.reserve("exports:t-busy", 1.0, horizon=5)
    # When the producer's view of the gates is read
    closed = closed_scopes(local_aws.dynamodb(), table, time.time())
    # Then it names exactly the scopes closed now
    assert closed == {"exports:t-closed", "exports:t-auth"}


class PagedScans:
    """A DynamoDB client whose scans return one item a page, as a large table's would."""

    def __init__(self, client: Any) -> None:
        self._client = client
        self.pages = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)  # the latest closure's GetItem, as it is

    def scan(self, **kwargs: Any) -> Any:
        self.pages += 1
        return self._client.scan(**kwargs, Limit=1)


def test_closed_scopes_are_read_across_every_page_of_the_scan(
    local_aws: LocalAws, table: str
) -> None:
    # Given three closed scopes and an open one, in a table scanned one item a page
    limiter = DynamoLimiter(local_aws.dynamodb(), table)
    now = time.time()
    for scope in ("a", "b", "c"):
        limiter.close(scope, now + 60, "throttled")
    limiter.reserve("open", 1.0, horizon=5)
    client = PagedScans(local_aws.dynamodb())
    # When the producer's view of the gates is read
    closed = closed_scopes(client, table, time.time())  # type: ignore[arg-type]
    # Then every page was read, each once, and every closed scope named
    assert closed == {"a", "b", "c"}
    assert 4 <= client.pages <= 5  # four items, one a page (and maybe a last, empty one)


def test_a_failed_read_of_the_closed_scopes_names_the_operation(local_aws: LocalAws) -> None:
    with pytest.raises(LimiterError, match=r"^limiter read of closed scopes failed$"):
        closed_scopes(local_aws.dynamodb(), "no-such-table", time.time())

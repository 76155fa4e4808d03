"""Discovery's run, connected anyway, is a full read of the ledger for the producer's wake item:
it raises the item to the ledger's next claimable time by the producer's own rule, so an idle
producer need not wake a paused cluster for its trust-bound read while discovery runs at least
every `producer_idle_check_seconds` (sweeper.ledger.wake_refresh)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from sweeper.config import Policy, S3Discovery
from sweeper.discovery.run import COMPLETE, run_discovery
from sweeper.discovery.s3 import S3Source
from sweeper.discovery.store import DiscoveryStore
from sweeper.ledger.store import Ledger
from sweeper.ledger.wake import DynamoWakeStore
from sweeper.models import JobStatus, NewJob
from sweeper.producer import NOT_DUE, run_producer
from sweeper_local.aws import LocalAws
from tests.fakes import FakePublisher
from tests.integration.test_wake import Counted

pytestmark = pytest.mark.integration

T0 = datetime(2026, 12, 1, 2, 0, tzinfo=UTC)


@pytest.fixture
def store(local_aws: LocalAws, table: str) -> DynamoWakeStore:
    return DynamoWakeStore(local_aws.dynamodb(), table)


@pytest.fixture
def policy(local_aws: LocalAws, unique_name: str) -> Policy:
    """A policy discovering an empty bucket: its runs find nothing (a ledger at rest)."""
    local_aws.s3().create_bucket(Bucket=unique_name)
    discovery = S3Discovery(
        bucket=unique_name, prefix="exports/", key_template="exports/{tenant_id}/{object_id}"
    )
    return Policy(name="exports", page_size=10, discovery=discovery)


def discover(policy: Policy, ledger: Ledger, client: Any, at: datetime) -> str:
    assert isinstance(policy.discovery, S3Discovery)
    report = run_discovery(
        policy,
        S3Source(policy.discovery, client),
        DiscoveryStore(ledger),
        scheduled_at=at,
        clock=lambda: at,
        remaining_seconds=lambda: 100.0,
    )
    return report.stop_reason


def produce(policy: Policy, ledger: Ledger, at: datetime) -> str:
    report = run_producer(
        policy, at, ledger, FakePublisher(), clock=lambda: at, remaining_seconds=lambda: 100.0
    )
    return report.stop_reason


def test_a_discovery_run_is_the_producers_full_read_within_its_trust_bound(
    db_url: str, store: DynamoWakeStore, policy: Policy, local_aws: LocalAws
) -> None:
    # Given a producer that read the whole ledger at T0 (its only row is due in a day)
    counted = Counted(db_url)
    producer_ledger = Ledger(counted, wake=store)
    other = Ledger(db_url, wake=store)
    other.schedule(
        policy.name, policy.version, lambda j: "s", [NewJob("t", "o", T0 + timedelta(days=1))], T0
    )
    assert produce(policy, producer_ledger, T0) == "drained"
    assert counted.connections == 1
    # When discovery runs past the producer's trust bound (an hour), finding nothing new
    later = T0 + timedelta(seconds=policy.producer_idle_check_seconds + 60)
    assert discover(policy, other, local_aws.s3(), later) == COMPLETE
    # Then the producer's next run trusts the item and does not connect
    assert produce(policy, producer_ledger, later + timedelta(minutes=5)) == NOT_DUE
    assert counted.connections == 1
    other.close()
    producer_ledger.close()


def test_a_write_the_item_never_heard_of_is_found_by_discoverys_full_read(
    db_url: str, store: DynamoWakeStore, policy: Policy, local_aws: LocalAws
) -> None:
    # Given an empty ledger read whole at T0 (nothing claimable), and a writer that keeps no
    # item (a bare `--database-url` command) scheduling a row due at T0 + 30 min
    producer_ledger = Ledger(db_url, wake=store)
    assert produce(policy, producer_ledger, T0) == "drained"
    bare = Ledger(db_url)
    due = T0 + timedelta(minutes=30)
    bare.schedule(policy.name, policy.version, lambda j: "s", [NewJob("t", "o", due)], T0)
    # When discovery runs at T0 + 10 min, within the producer's trust bound
    discovery_ledger = Ledger(db_url, wake=store)
    assert (
        discover(policy, discovery_ledger, local_aws.s3(), T0 + timedelta(minutes=10)) == COMPLETE
    )
    # Then its full read lowered nothing it should not: the producer sleeps until the row is due
    # and releases it then, not an hour after T0
    assert produce(policy, producer_ledger, T0 + timedelta(minutes=20)) == NOT_DUE
    assert produce(policy, producer_ledger, due + timedelta(minutes=5)) == "drained"
    assert bare.counts(policy.name)[JobStatus.LEASED] == 1
    for ledger in (producer_ledger, bare, discovery_ledger):
        ledger.close()

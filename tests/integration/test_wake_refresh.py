"""On a cluster that may pause, a run that connected ends with a full read of the ledger for the
producer's wake item (sweeper.ledger.wake_refresh): discovery's, connected anyway, stands for
the producer's trust-bound read; the consumer's, after the last job settles, spares the producer
a wake-up at the settled leases' expiry. Each raises the item by the producer's own rule."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from functions.consumer import app as consumer_app
from sweeper import runtime
from sweeper.config import Policy, S3Discovery
from sweeper.discovery.run import COMPLETE, run_discovery
from sweeper.discovery.s3 import S3Source
from sweeper.discovery.store import DiscoveryStore
from sweeper.ledger.store import Ledger
from sweeper.ledger.wake import DynamoWakeStore, may_skip
from sweeper.ledger.wake_refresh import end_run
from sweeper.models import JobStatus, NewJob
from sweeper.producer.run import NOT_DUE, run_producer
from sweeper_local.aws import LocalAws
from tests.conftest import Pipeline
from tests.fakes import FakePublisher
from tests.integration.test_consumer import publish_all
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
    """A discovery run as its handler makes it: the pass, then the end of the run."""
    assert isinstance(policy.discovery, S3Discovery)
    report = run_discovery(
        policy,
        S3Source(policy.discovery, client),
        DiscoveryStore(ledger),
        scheduled_at=at,
        clock=lambda: at,
        remaining_seconds=lambda: 100.0,
    )
    end_run(ledger, policy.name, at)
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
    other = Ledger(db_url, wake=store, may_pause=True)
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
    discovery_ledger = Ledger(db_url, wake=store, may_pause=True)
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


def test_the_consumer_that_settles_a_release_spares_the_producer_the_leases_expiry(
    pipeline: Pipeline, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given functions on a cluster that may pause, keeping the policy's wake item
    monkeypatch.setenv("SWEEPER_WAKE_TABLE", pipeline.resources.limiter_table)
    monkeypatch.setenv("SWEEPER_LEDGER_MAY_PAUSE", "1")
    runtime.reset()
    store = DynamoWakeStore(pipeline.aws.dynamodb(), pipeline.resources.limiter_table)
    waking = Ledger(pipeline.env["SWEEPER_DATABASE_URL"], wake=store)
    # ... and a release of due work: the producer's raise leaves the item at the leases' expiry
    pipeline.seed(3)
    records = publish_all(replace(pipeline, ledger=waking))
    released = datetime.now(UTC)
    expiry = released + timedelta(seconds=pipeline.policy.lease_seconds)
    trust = timedelta(seconds=pipeline.policy.producer_idle_check_seconds)
    assert not may_skip(store.read(pipeline.policy.name), expiry, trust)
    # When the consumer settles every job of it
    response = consumer_app.handler({"Records": records}, pipeline.lambda_context())
    assert response["batchItemFailures"] == []
    assert waking.counts(pipeline.policy.name)[JobStatus.SUCCEEDED] == 3
    # Then the producer's run after that expiry trusts the item and does not wake the cluster
    assert may_skip(store.read(pipeline.policy.name), expiry + timedelta(minutes=1), trust)
    waking.close()


def test_a_run_that_never_connected_does_not_connect_to_refresh(
    db_url: str, store: DynamoWakeStore, policy: Policy
) -> None:
    # Given a function's ledger on a cluster that may pause, unused in this run (not due)
    counted = Counted(db_url)
    ledger = Ledger(counted, wake=store, may_pause=True)
    # When the run ends, then the cluster is not woken for a refresh
    end_run(ledger, policy.name, T0)
    assert counted.connections == 0


def test_a_refresh_that_fails_unexpectedly_still_closes_the_runs_session(
    db_url: str, store: DynamoWakeStore, policy: Policy, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a function's ledger on a cluster that may pause, connected in this run, whose wake
    # store then fails to read in a way no adapter expected
    ledger = Ledger(Counted(db_url), wake=store, may_pause=True)
    ledger.schedule(policy.name, policy.version, lambda j: "s", [NewJob("t", "o", T0)], T0)
    assert ledger.connected

    def broken(name: str) -> None:
        raise RuntimeError("the store broke")

    monkeypatch.setattr(store, "read", broken)
    # When the run ends, then the error is the run's, and the session is closed all the same
    with pytest.raises(RuntimeError):
        end_run(ledger, policy.name, T0)
    assert not ledger.connected

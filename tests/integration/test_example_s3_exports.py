"""docs/examples/s3-exports.toml end to end on the local stack: discovery lists moto's S3, the
producer and consumers (worker processes, as Lambda runs them) delete each due object with the
s3_delete kind, the ledger says succeeded, and a second pass finds nothing.

moto stamps every object with the time it is written and cannot backdate it; the example's age
rule is 30 days. The listing discovery reads is moto's own, with the LastModified of the objects
written "long ago" moved back 31 days (`AgedListing`): the only stand-in for the passing month.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from sweeper.config import S3Discovery
from sweeper.discovery.run import run_discovery
from sweeper.discovery.s3 import S3Source
from sweeper.discovery.store import DiscoveryStore
from sweeper.ledger.store import Ledger
from sweeper.models import JobStatus, OutcomeClass, operation_key
from sweeper_local.action_targets import make_action_targets
from sweeper_local.background import LocalConsoleStack
from sweeper_local.pipeline import LocalPipeline
from sweeper_local.stack import LocalStack
from sweeper_tools.policy_file import load_config
from tests.conftest import PgServer

pytestmark = pytest.mark.integration

EXAMPLE = Path(__file__).resolve().parents[2] / "docs" / "examples" / "s3-exports.toml"
#: Written 31 days ago (see the module docstring), each several segments below its tenant.
OLD = (
    "exports/t1/2026/11/a.csv",
    "exports/t1/2026/11/b.csv",
    "exports/t2/2026/10/c.csv",
    "exports/t2/report.csv",
)
#: Written now: not due for 30 days.
FRESH = ("exports/t1/2026/12/new.csv",)
#: Outside the template: never an obligation.
STRAY = ("exports/loose.csv", "other/t1/a.csv")


class AgedListing:
    """moto's S3 client, whose ListObjectsV2 reports `aged` keys as written `age` earlier."""

    def __init__(self, client: Any, aged: set[str], age: timedelta) -> None:
        self._client = client
        self._aged = aged
        self._age = age

    def list_objects_v2(self, **kwargs: Any) -> Any:
        response = self._client.list_objects_v2(**kwargs)
        for item in response.get("Contents", []):
            if item["Key"] in self._aged:
                item["LastModified"] -= self._age
        return response


def discover(policy: Any, listing: AgedListing, ledger: Ledger, at: datetime) -> Any:
    assert isinstance(policy.discovery, S3Discovery)
    return run_discovery(
        policy,
        S3Source(policy.discovery, listing),
        DiscoveryStore(ledger),
        scheduled_at=at,
        clock=lambda: datetime.now(UTC),
        remaining_seconds=lambda: 60.0,
    )


def test_the_s3_exports_example_deletes_due_exports_and_settles_them(
    pg_server: PgServer,
) -> None:
    # Given the example policy, its bucket in the local stack's S3 with old, fresh and stray
    # objects, and the ledger of a fresh database
    policy = load_config(EXAMPLE).policy("s3-exports")
    url = pg_server.create_database("sweeper_example_s3_exports")
    with LocalStack(database_url=url) as stack:
        make_action_targets(stack.aws, policy)  # as `local up` makes it
        s3 = stack.aws.s3()
        for key in OLD + FRESH + STRAY:
            s3.put_object(Bucket="acme-exports", Key=key, Body=b"x")
        listing = AgedListing(s3, set(OLD), timedelta(days=31))
        ledger = Ledger(url)
        try:
            # When discovery runs a pass
            now = datetime.now(UTC).replace(microsecond=0)
            first = discover(policy, listing, ledger, now)
            # Then each old object is an obligation, its object id the rest of its key
            assert (first.inserted, first.not_due, first.rejected) == (4, 1, 1)
            key = operation_key("s3-exports", "t1", "2026/11/a.csv", policy.version)
            job = ledger.get(key)
            assert job is not None
            assert job.status is JobStatus.PENDING
            # When the pipeline runs (producer and consumers as Lambda runs them)
            with LocalPipeline(
                stack, policy, prefix="sweeper-example", log_prefix="sweeper-example-"
            ) as run:
                assert run.run(lambda: run.final() == len(OLD), timeout_seconds=180)
            # Then the old objects are gone, the fresh and stray ones are left
            left = [o["Key"] for o in s3.list_objects_v2(Bucket="acme-exports").get("Contents", [])]
            assert sorted(left) == sorted(FRESH + STRAY)
            # And the ledger says succeeded, accepted, for each of them
            counts = ledger.counts("s3-exports")
            assert counts[JobStatus.SUCCEEDED] == len(OLD)
            settled = ledger.get(key)
            assert settled is not None
            assert settled.status is JobStatus.SUCCEEDED
            assert settled.last_outcome is OutcomeClass.ACCEPTED
            # When discovery runs its next pass
            second = discover(policy, listing, ledger, now + timedelta(hours=1))
            # Then it finds nothing new: the old objects are gone, the fresh one not yet due
            assert (second.inserted, second.moved_earlier, second.not_due) == (0, 0, 1)
            assert ledger.counts("s3-exports")[JobStatus.SUCCEEDED] == len(OLD)
        finally:
            ledger.close()


def test_local_up_makes_the_example_s_bucket_where_none_exists(db_url: str) -> None:
    # Given the example's policy file and a local stack whose S3 holds no bucket
    config = load_config(EXAMPLE)
    # When `local up` starts it (no hints: its intake's processes are left out)
    with LocalConsoleStack(
        config,
        config_path=str(EXAMPLE),
        database_url=db_url,
        tick_seconds=3600,
        intake_consumers=False,
    ) as up:
        # Then the action's bucket is there, empty, for the team's objects (the same code
        # makes it for `sweeper demo`)
        s3 = up.stack.aws.s3()
        buckets = [b["Name"] for b in s3.list_buckets()["Buckets"]]
        assert buckets == ["acme-exports"]
        assert s3.list_objects_v2(Bucket="acme-exports").get("Contents", []) == []

"""The demo's doors: each brings its share of obligations into the ledger by discovery, from a
system-of-record database in the local cluster and from a bucket in the AWS emulator."""

from __future__ import annotations

import pytest

from sweeper.config import Policy
from sweeper.ledger.store import Ledger
from sweeper.local.aws import LocalAws
from sweeper.local.doors import DEMO_STRAY_KEYS, DOORS, feed_doors, split
from sweeper.local.stack import LocalStack
from sweeper.models import JobStatus

pytestmark = pytest.mark.integration


def test_each_door_brings_in_its_share_and_says_how_many(
    db_url: str, ledger: Ledger, local_aws: LocalAws, unique_name: str
) -> None:
    # Given the ledger's cluster and the AWS emulator (the local stack's parts)
    stack = LocalStack(database_url=db_url, aws=local_aws, source_bucket=unique_name)
    policy = Policy(name=f"demo-{unique_name[:6]}")
    # When 41 obligations come in by every door
    reports = {r.door: r for r in feed_doors(stack, policy, ledger, list(DOORS), 41, 4)}
    # Then each door brought in its share, the bucket's stray keys were rejected by position,
    # and the ledger holds every obligation once
    assert (reports["sql"].seeded, reports["sql"].brought_in, reports["sql"].rejected) == (
        21,
        21,
        0,
    )
    assert (reports["s3"].seeded, reports["s3"].brought_in) == (20, 20)
    assert reports["s3"].rejected == len(DEMO_STRAY_KEYS)
    assert ledger.counts(policy.name)[JobStatus.PENDING] == 41


def test_obligations_are_shared_among_doors_as_evenly_as_whole_numbers_allow() -> None:
    assert split(41, ["sql", "s3"]) == {"sql": 21, "s3": 20}
    assert split(2, ["sql", "s3", "webhook"]) == {"sql": 1, "s3": 1, "webhook": 0}

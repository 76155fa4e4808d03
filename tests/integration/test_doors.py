"""The demo's doors: each brings its share of obligations into the ledger by its production
path: discovery of a system-of-record database in the local cluster and of a bucket in the AWS
emulator, hints posted to the webhook on loopback, and a file sent through the intake queue."""

from __future__ import annotations

import secrets

import pytest

from sweeper.config import Policy
from sweeper.ledger.store import Ledger
from sweeper.models import JobStatus
from sweeper_local.aws import LocalAws
from sweeper_local.doors import DEMO_STRAY_KEYS, DOORS, feed_doors, split
from sweeper_local.errors import LocalStackError
from sweeper_local.intake import LocalIntake
from sweeper_local.metric_totals import CountingSink
from sweeper_local.stack import LocalStack
from sweeper_local.webhook import LocalWebhook

pytestmark = pytest.mark.integration


def test_each_door_brings_in_its_share_and_says_how_many(
    db_url: str, ledger: Ledger, local_aws: LocalAws, unique_name: str
) -> None:
    # Given the ledger's cluster and the AWS emulator (the local stack's parts)
    # and the policy's intake with its webhook, as the demo serves them
    stack = LocalStack(database_url=db_url, aws=local_aws, source_bucket=unique_name)
    policy = Policy(name=f"demo-{unique_name[:6]}")
    secret = secrets.token_hex(32)
    with (
        LocalIntake(stack, policy, secret=secret, prefix=unique_name) as intake,
        LocalWebhook({policy.name: intake.webhook_deps(CountingSink())}) as webhook,
    ):
        stack.webhook_url, stack.webhook_secret = webhook.url, secret
        stack.intake_queue_urls[policy.name] = intake.resources.queue_url
        # When 82 obligations come in by every door
        reports = {r.door: r for r in feed_doors(stack, policy, ledger, list(DOORS), 82, 4)}
    # Then each door brought in its share, the bucket's stray keys were rejected by position,
    # and the ledger holds every obligation once
    shares = {door: (r.seeded, r.brought_in, r.rejected) for door, r in reports.items()}
    assert shares == {
        "sql": (21, 21, 0),
        "s3": (21, 21, len(DEMO_STRAY_KEYS)),
        "webhook": (20, 20, 0),
        "file": (20, 20, 0),
    }
    assert reports["webhook"].runs == 1  # one signed request of 20 hints
    assert ledger.counts(policy.name)[JobStatus.PENDING] == 82


def test_a_hint_door_without_the_intake_says_so(db_url: str, ledger: Ledger) -> None:
    stack = LocalStack(database_url=db_url)
    for door in ("webhook", "file"):
        with pytest.raises(LocalStackError, match="intake running"):
            DOORS[door].feed(stack, Policy(name="exports"), ledger, 1, 1)


def test_obligations_are_shared_among_doors_as_evenly_as_whole_numbers_allow() -> None:
    assert split(41, ["sql", "s3"]) == {"sql": 21, "s3": 20}
    assert split(2, ["sql", "s3", "webhook"]) == {"sql": 1, "s3": 1, "webhook": 0}

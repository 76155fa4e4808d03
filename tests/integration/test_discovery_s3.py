"""Discovery from an S3 bucket in the local AWS emulator: the age rule, ids from the key, a
StartAfter cursor that resumes exactly, bad keys counted by position."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from sweeper.config import Policy, S3Discovery
from sweeper.discovery.run import BUDGET, COMPLETE, SOURCE_ERROR, run_discovery
from sweeper.discovery.s3 import S3Source, key_pattern
from sweeper.discovery.store import DiscoveryStore
from sweeper.errors import DiscoveryFailedError
from sweeper.ledger.store import Ledger
from sweeper.models import JobStatus
from sweeper_local.aws import LocalAws

pytestmark = pytest.mark.integration

DAY = 86_400


@pytest.fixture
def bucket(local_aws: LocalAws, unique_name: str) -> tuple[Any, str]:
    client = local_aws.s3()
    client.create_bucket(Bucket=unique_name)
    return client, unique_name


def put(client: Any, bucket: str, *keys: str) -> None:
    for key in keys:
        client.put_object(Bucket=bucket, Key=key, Body=b"x")


def policy_for(bucket: str, page_size: int = 1000, **extra: Any) -> Policy:
    discovery = S3Discovery(
        bucket=bucket,
        prefix="exports/",
        key_template="exports/{tenant_id}/{object_id}",
        min_age_seconds=7 * DAY,
        page_size=page_size,
        **extra,
    )
    return Policy(name="exports", discovery=discovery)


def discover(
    policy: Policy,
    client: Any,
    ledger: Ledger,
    *,
    now: datetime,
    at: datetime | None = None,
    remaining: Callable[[], float] = lambda: 1e9,
) -> Any:
    assert isinstance(policy.discovery, S3Discovery)
    return run_discovery(
        policy,
        S3Source(policy.discovery, client),
        DiscoveryStore(ledger),
        scheduled_at=at or now,
        clock=lambda: now,
        remaining_seconds=remaining,
    )


def pages_budget(pages: int) -> Callable[[], float]:
    """A budget that allows exactly `pages` pages (checked once before each)."""
    left = itertools.count(pages, -1)
    return lambda: 1e9 if next(left) > 0 else 0.0


def test_objects_old_enough_become_jobs_due_at_their_age_limit(
    bucket: tuple[Any, str], ledger: Ledger
) -> None:
    # Given objects under the prefix (just written) and one outside it
    client, name = bucket
    put(client, name, "exports/t1/a.csv", "exports/t2/b.csv", "uploads/t1/c.csv")
    head = client.head_object(Bucket=name, Key="exports/t1/a.csv")
    written = head["LastModified"].astimezone(UTC)
    policy = policy_for(name)
    # When discovery runs six days later, then eight days later
    early = discover(policy, client, ledger, now=written + timedelta(days=6))
    late = discover(policy, client, ledger, now=written + timedelta(days=8))
    # Then the first pass found them not yet due; the second made them jobs due at 7 days
    assert (early.scanned, early.not_due, early.inserted) == (2, 2, 0)
    assert (late.scanned, late.inserted, late.stop_reason) == (2, 2, COMPLETE)
    job = ledger.get("exports:t1:a.csv:v1")
    assert job is not None
    assert job.due_at == written + timedelta(days=7)
    assert ledger.counts("exports")[JobStatus.PENDING] == 2


def test_lookahead_schedules_young_objects_for_later(
    bucket: tuple[Any, str], ledger: Ledger
) -> None:
    client, name = bucket
    put(client, name, "exports/t1/a.csv")
    now = datetime.now(UTC)
    report = discover(policy_for(name, lookahead_seconds=8 * DAY), client, ledger, now=now)
    assert (report.inserted, report.not_due) == (1, 0)
    job = ledger.get("exports:t1:a.csv:v1")
    assert job is not None
    assert job.due_at > now


def test_a_second_pass_changes_nothing(bucket: tuple[Any, str], ledger: Ledger) -> None:
    client, name = bucket
    put(client, name, *(f"exports/t{i % 3}/o{i}" for i in range(30)))
    later = datetime.now(UTC) + timedelta(days=30)
    policy = policy_for(name, page_size=7)
    first = discover(policy, client, ledger, now=later)
    second = discover(policy, client, ledger, now=later, at=later + timedelta(hours=1))
    assert (first.inserted, first.pages) == (30, 5)
    assert (second.scanned, second.inserted, second.moved_earlier, second.unchanged) == (
        30,
        0,
        0,
        30,
    )


def test_a_budget_stop_resumes_after_the_last_key_with_every_key_once(
    bucket: tuple[Any, str], ledger: Ledger
) -> None:
    # Given 50 objects and runs of two pages of 6 keys
    client, name = bucket
    put(client, name, *(f"exports/t{i % 4}/o{i:03d}" for i in range(50)))
    later = datetime.now(UTC) + timedelta(days=30)
    policy = policy_for(name, page_size=6)
    reports = []
    for n in range(20):
        report = discover(
            policy,
            client,
            ledger,
            now=later,
            at=later + timedelta(minutes=n),
            remaining=pages_budget(2),
        )
        reports.append(report)
        if report.stop_reason == COMPLETE:
            break
    # Then the pass took several runs and read each key once
    assert [r.stop_reason for r in reports[:-1]] == [BUDGET] * (len(reports) - 1)
    assert len(reports) == 5  # 50 keys, 12 a run
    assert sum(r.scanned for r in reports) == 50
    assert sum(r.inserted for r in reports) == 50
    assert sum(r.unchanged for r in reports) == 0


def test_keys_that_do_not_match_the_template_are_rejected_by_position(
    bucket: tuple[Any, str], ledger: Ledger
) -> None:
    client, name = bucket
    # Positions are in the listing's order (keys sorted): 1 no tenant, 2 and 3 good, 4 too deep.
    put(client, name, "exports/t1/a", "exports/t1/deep/secret-name", "exports/t1/b")
    put(client, name, "exports/loose-secret")
    later = datetime.now(UTC) + timedelta(days=30)
    report = discover(policy_for(name, page_size=2), client, ledger, now=later)
    assert (report.scanned, report.inserted, report.rejected) == (4, 2, 2)
    assert report.rejected_sample == [
        {"position": 1, "reason": "key does not match key_template"},
        {"position": 4, "reason": "key does not match key_template"},
    ]
    assert "secret" not in repr(report.as_dict())


def test_a_missing_bucket_fails_the_run_with_the_error_code_only(
    local_aws: LocalAws, ledger: Ledger, unique_name: str
) -> None:
    with pytest.raises(DiscoveryFailedError) as failed:
        discover(policy_for(unique_name), local_aws.s3(), ledger, now=datetime.now(UTC))
    assert failed.value.report.stop_reason == SOURCE_ERROR  # type: ignore[attr-defined]
    assert failed.value.report.error == "ListObjectsV2 failed (NoSuchBucket)"  # type: ignore[attr-defined]


def test_the_key_template_matches_whole_keys_only() -> None:
    pattern = key_pattern("exports/{tenant_id}/x-{object_id}.csv")
    match = pattern.match("exports/acme/x-42.csv")
    assert match is not None
    assert (match["tenant_id"], match["object_id"]) == ("acme", "42")
    assert pattern.match("exports/acme/x-42.csv.bak") is None
    assert pattern.match("exports/a/b/x-42.csv") is None


def test_keys_whose_ids_break_the_id_rule_are_rejected_and_nothing_of_them_is_written(
    bucket: tuple[Any, str], ledger: Ledger
) -> None:
    # Given keys whose id fields are dot segments, untrimmed or hold a control character
    # (S3 stores any of them: `[^/]+` in the key pattern matches each), among good keys
    client, name = bucket
    bad = ["exports/../..", "exports/t1/..", "exports/./o1", "exports/ t1/o1", "exports/t1/o1\x07"]
    put(client, name, *bad, "exports/t1/good", "exports/t2/good")
    listed = [o["Key"] for o in client.list_objects_v2(Bucket=name)["Contents"]]
    assert sorted(listed) == sorted([*bad, "exports/t1/good", "exports/t2/good"])
    # When a pass runs
    later = datetime.now(UTC) + timedelta(days=30)
    report = discover(policy_for(name), client, ledger, now=later)
    # Then only the good keys become jobs; each bad one is counted by position and reason
    assert (report.scanned, report.inserted, report.rejected) == (7, 2, 5)
    reasons = sorted(r["reason"] for r in report.rejected_sample)
    assert reasons == sorted(
        [
            "tenant_id a dot segment, . or ..",
            "object_id a dot segment, . or ..",
            "tenant_id a dot segment, . or ..",
            "tenant_id leading or trailing whitespace",
            "object_id a control, invisible or line-separator character",
        ]
    )
    assert ledger.counts("exports")[JobStatus.PENDING] == 2
    assert ledger.get("exports:t1:good:v1") is not None
    assert ledger.get("exports:t2:good:v1") is not None

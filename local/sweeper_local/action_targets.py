"""What a policy's action calls, made on the local stack, where nothing exists yet.

`sweeper local up` and `sweeper demo` share it. An s3_delete policy's bucket is made in the AWS
emulator (without it S3 answers NoSuchBucket, classed auth, and every job waits behind a closed
scope); the demo also puts each obligation's object where the key template names it, as the
team's system would have written it, and counts what its consumers deleted from the delete
markers of a bucket that keeps its versions. An HTTP action's target is the vendor simulator,
which needs nothing made; the lambda and python kinds call the team's own code.
"""

from __future__ import annotations

import contextlib
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Final

import psycopg
from psycopg.rows import dict_row

from sweeper.actions.s3_delete import BadKeyError, S3DeleteActionConfig, render_key
from sweeper.config import Policy
from sweeper.models import ActionCall
from sweeper_local.aws import LocalAws

#: Every obligation of a policy, with what the consumer renders its call from. A plain read:
#: the demo reads once, after its doors brought the obligations in and before any is published.
POLICY_JOBS: Final = """
SELECT operation_key, policy_version, tenant_id, object_id, scope, params
FROM sweeper_jobs WHERE policy = %(policy)s ORDER BY id
"""
#: Objects put at once (each a small PUT to the emulator).
PUT_WORKERS: Final = 8


@dataclass(frozen=True)
class BucketAudit:
    """What a versioned bucket shows of its deletes: one delete marker per delete."""

    deleted: int
    most_deletes_of_one_object: int


def s3_delete_action(policy: Policy) -> S3DeleteActionConfig | None:
    """The policy's action when it deletes objects of a bucket, else None."""
    action = policy.action
    return action if isinstance(action, S3DeleteActionConfig) else None


def make_action_targets(aws: LocalAws, policy: Policy, *, keep_versions: bool = False) -> None:
    """Make what the policy's action calls where it does not exist: an s3_delete action's bucket.

    `keep_versions`: the bucket keeps every version, so that each delete leaves a marker that
    `audit_bucket` counts (the demo's audit; the action deletes the same way on either).
    """
    action = s3_delete_action(policy)
    if action is None:
        return
    s3 = aws.s3()
    with contextlib.suppress(s3.exceptions.BucketAlreadyOwnedByYou):
        s3.create_bucket(Bucket=action.bucket)
    if keep_versions:
        s3.put_bucket_versioning(
            Bucket=action.bucket, VersioningConfiguration={"Status": "Enabled"}
        )


def put_action_objects(aws: LocalAws, policy: Policy, database_url: str) -> int:
    """Put an empty object where each of the policy's obligations in the ledger has its key
    (rendered as the consumer renders it); how many were put (0 for a kind without objects).
    An obligation whose key cannot be rendered gets none (its job fails `bad_key`)."""
    action = s3_delete_action(policy)
    if action is None:
        return 0
    with psycopg.connect(database_url, row_factory=dict_row) as conn:
        rows = conn.execute(POLICY_JOBS, {"policy": policy.name}).fetchall()
    keys = []
    for row in rows:
        call = ActionCall(
            key=row["operation_key"],
            idempotency_key=row["operation_key"],
            policy=policy.name,
            policy_version=row["policy_version"],
            tenant_id=row["tenant_id"],
            object_id=row["object_id"],
            scope=row["scope"],
            attempt=1,
            batch_id="local-objects",
            params=row["params"],
        )
        with contextlib.suppress(BadKeyError):
            keys.append(render_key(action.key_template, call))
    s3 = aws.s3()

    def put(key: str) -> None:
        s3.put_object(Bucket=action.bucket, Key=key, Body=b"")

    with ThreadPoolExecutor(max_workers=PUT_WORKERS) as pool:
        list(pool.map(put, keys))
    return len(keys)


def audit_bucket(aws: LocalAws, policy: Policy) -> BucketAudit | None:
    """The deletes an s3_delete policy's bucket shows under its key prefix (None for another
    kind); its bucket must keep versions (`make_action_targets(keep_versions=True)`)."""
    action = s3_delete_action(policy)
    if action is None:
        return None
    markers: Counter[str] = Counter()
    pages = aws.s3().get_paginator("list_object_versions")
    for page in pages.paginate(Bucket=action.bucket, Prefix=action.prefix):
        markers.update(marker["Key"] for marker in page.get("DeleteMarkers", []))
    return BucketAudit(sum(markers.values()), max(markers.values(), default=0))

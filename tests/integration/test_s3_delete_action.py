"""The s3_delete kind against moto's S3 in server mode (a real HTTP endpoint, boto3 as shipped)."""

from __future__ import annotations

from typing import Any

import pytest

from sweeper.actions.s3_delete import S3DeleteAction, S3DeleteActionConfig
from sweeper.models import ActionCall, OutcomeClass
from sweeper_local.aws import LocalAws

pytestmark = pytest.mark.integration

TEMPLATE = "exports/{tenant_id}/{object_id+}"


def job(object_id: str, tenant_id: str = "t1") -> ActionCall:
    return ActionCall(
        key=f"exports:{tenant_id}:{object_id}:v1",
        idempotency_key=f"exports:{tenant_id}:{object_id}:v1",
        policy="exports",
        policy_version=1,
        tenant_id=tenant_id,
        object_id=object_id,
        scope="global",
        attempt=0,
        batch_id="b",
    )


@pytest.fixture
def bucket(local_aws: LocalAws, aws_env: dict[str, str], unique_name: str) -> tuple[Any, str]:
    client = local_aws.s3()
    client.create_bucket(Bucket=unique_name)
    return client, unique_name


def action_for(bucket: str) -> S3DeleteAction:
    # boto3's own client, reaching moto through AWS_ENDPOINT_URL as the consumer would
    return S3DeleteAction(S3DeleteActionConfig(bucket=bucket, key_template=TEMPLATE))


def keys(client: Any, bucket: str) -> list[str]:
    return [o["Key"] for o in client.list_objects_v2(Bucket=bucket).get("Contents", [])]


def test_an_object_is_deleted_and_only_it(bucket: tuple[Any, str]) -> None:
    # Given two objects, one of them several segments below the tenant
    client, name = bucket
    for key in ("exports/t1/2026/11/a.csv", "exports/t1/2026/11/a.csv.bak"):
        client.put_object(Bucket=name, Key=key, Body=b"x")
    # When the job for the deep one runs
    result = action_for(name).perform(job("2026/11/a.csv"), 5.0)
    # Then it is accepted and gone, and its neighbour (same prefix) is left
    assert (result.outcome, result.code) == (OutcomeClass.ACCEPTED, "s3_deleted")
    assert keys(client, name) == ["exports/t1/2026/11/a.csv.bak"]


def test_a_missing_key_is_absent_and_no_delete_is_sent(bucket: tuple[Any, str]) -> None:
    # Given a key that is not there (S3's DeleteObject would answer 204 all the same)
    client, name = bucket
    client.put_object(Bucket=name, Key="exports/t1/a.csv.bak", Body=b"x")
    # When its job runs
    result = action_for(name).perform(job("a.csv"), 5.0)
    # Then the answer is honest: absent
    assert (result.outcome, result.code) == (OutcomeClass.ABSENT, "s3_not_listed")
    assert keys(client, name) == ["exports/t1/a.csv.bak"]


def test_a_second_run_of_a_deleted_object_is_absent(bucket: tuple[Any, str]) -> None:
    client, name = bucket
    client.put_object(Bucket=name, Key="exports/t1/a.csv", Body=b"x")
    action = action_for(name)
    assert action.perform(job("a.csv"), 5.0).outcome is OutcomeClass.ACCEPTED
    assert action.perform(job("a.csv"), 5.0).outcome is OutcomeClass.ABSENT


def test_on_a_versioned_bucket_a_delete_marker_hides_the_object_and_keeps_its_version(
    bucket: tuple[Any, str],
) -> None:
    # Given a versioned bucket with one object
    client, name = bucket
    client.put_bucket_versioning(Bucket=name, VersioningConfiguration={"Status": "Enabled"})
    put = client.put_object(Bucket=name, Key="exports/t1/a.csv", Body=b"x")
    # When its job runs
    action = action_for(name)
    result = action.perform(job("a.csv"), 5.0)
    # Then a delete marker is what was added: the object is gone from listings and GETs ...
    assert (result.outcome, result.code) == (OutcomeClass.ACCEPTED, "s3_delete_marker")
    assert keys(client, name) == []
    versions = client.list_object_versions(Bucket=name, Prefix="exports/t1/a.csv")
    assert [m["IsLatest"] for m in versions["DeleteMarkers"]] == [True]
    # ... its earlier version is kept (the bucket's lifecycle expires it) ...
    assert [v["VersionId"] for v in versions["Versions"]] == [put["VersionId"]]
    # ... and a second run adds no second marker: the object is absent
    assert action.perform(job("a.csv"), 5.0).outcome is OutcomeClass.ABSENT
    again = client.list_object_versions(Bucket=name, Prefix="exports/t1/a.csv")
    assert len(again["DeleteMarkers"]) == 1


def test_an_id_that_would_climb_out_of_the_prefix_is_never_sent(
    bucket: tuple[Any, str],
) -> None:
    client, name = bucket
    client.put_object(Bucket=name, Key="exports/t2/a.csv", Body=b"x")
    result = action_for(name).perform(job("../t2/a.csv"), 5.0)
    assert (result.outcome, result.code) == (OutcomeClass.PERMANENT, "bad_key")
    assert keys(client, name) == ["exports/t2/a.csv"]


def test_a_missing_bucket_closes_the_scope_as_auth(aws_env: dict[str, str]) -> None:
    result = action_for("no-such-bucket-here").perform(job("a.csv"), 5.0)
    assert (result.outcome, result.code) == (OutcomeClass.AUTH, "s3_NoSuchBucket")

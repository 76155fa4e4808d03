"""`sweeper smoke` names what the policy's action kind calls when that refuses the canary."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

import pytest

from sweeper.config import Policy
from sweeper.ledger.store import Ledger
from sweeper.models import JobStatus, OutcomeClass, operation_key
from sweeper_tools.smoke import run_smoke

pytestmark = pytest.mark.integration

CANARY = uuid.UUID(int=7)
CANARY_KEY = operation_key("s3-exports", "sandbox", f"sweeper-smoke-{CANARY.hex}", 1)


def test_a_smoke_names_the_bucket_an_s3_delete_policy_was_refused_by(
    ledger: Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given an s3_delete policy with a sandbox tenant, and a consumer that meets AccessDenied
    policy = Policy.model_validate(
        {
            "name": "s3-exports",
            "action": {
                "kind": "s3_delete",
                "bucket": "acme-exports",
                "key_template": "exports/{tenant_id}/{object_id+}",
            },
            "smoke": {"tenant_id": "sandbox", "timeout_seconds": 1},
        }
    )

    def release() -> dict[str, Any]:
        # What the consumer records when S3 refuses the delete (the pipeline is not the point)
        job = ledger.get(CANARY_KEY)
        assert job is not None
        assert job.status is JobStatus.PENDING
        ledger.mark_failed(
            CANARY_KEY,
            OutcomeClass.AUTH,
            "s3_AccessDenied",
            datetime.now(UTC),
            count_attempt=True,
        )
        return {"batch_id": "b1", "published": 1}

    monkeypatch.setattr(uuid, "uuid4", lambda: CANARY)
    # When the smoke runs
    report = run_smoke(policy, ledger, release, clock=lambda: datetime.now(UTC))
    # Then the failed hop names the bucket, not a vendor
    assert report.failed_hop == "vendor"
    assert report.failure is not None
    assert report.failure.startswith("bucket acme-exports answered auth, s3_AccessDenied")

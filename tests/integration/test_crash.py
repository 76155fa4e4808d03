"""A real crash: the consumer's process is killed while its call is in flight.

A raised exception lets Powertools delete the in-progress idempotency record; a killed process
cannot, so the record stays IN_PROGRESS until the expiry Powertools took from the Lambda
context's remaining time. Meanwhile a redelivery must go back to the queue; after it, the same
key is called again and the vendor replays: one effect.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType

from sweeper.consumer import process_batch
from sweeper.models import JobMessage, JobStatus
from sweeper.observability import Metric
from tests.conftest import Pipeline
from tests.integration.test_consumer import deps_with, failed_ids, publish_all

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
#: The killed invocation's Lambda timeout: what is left of it (minus the safety margin) bounds
#: its call, and Powertools sets the in-progress expiry from it.
CRASHED_TIMEOUT_SECONDS = 10.0


def wait_for(what: str, check: Any, timeout_seconds: float) -> None:
    deadline = time.monotonic() + timeout_seconds
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


def idempotency_record(p: Pipeline) -> dict[str, Any]:
    items = p.aws.dynamodb().scan(TableName=p.resources.idempotency_table, ConsistentRead=True)
    (item,) = items["Items"]
    return dict(item)


def test_a_consumer_killed_mid_call_leaves_the_record_in_progress_then_replays_once(
    pipeline: Pipeline, tmp_path: Path
) -> None:
    # Given one job, delivered to a consumer in its own process
    pipeline.seed(1)
    (record,) = publish_all(pipeline)
    key = JobMessage.model_validate_json(record["body"]).key
    event_file = tmp_path / "event.json"
    event_file.write_text(json.dumps({"Records": [record]}), encoding="utf-8")
    # When the vendor acts but its answer never comes (set before the consumer starts: on a
    # loaded machine this process may be descheduled long enough for the child to call first),
    # and the process is killed while it waits
    pipeline.vendor.set_fault_rates(timeout_after_effect_rate=1.0)
    child = subprocess.Popen(
        [
            sys.executable,
            *("-m", "tests.integration.consumer_process"),
            *(str(event_file), str(CRASHED_TIMEOUT_SECONDS)),
        ],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        wait_for(
            "the call to reach the vendor",
            lambda: pipeline.vendor.audit().calls_total or child.poll() is not None,
            60,
        )
    finally:
        child.send_signal(signal.SIGKILL)
        out, err = child.communicate(timeout=30)
    assert (child.returncode, out) == (-signal.SIGKILL, b""), err.decode()[-2000:]
    assert pipeline.vendor.audit().effects_total == 1
    pipeline.vendor.set_fault_rates(timeout_after_effect_rate=0.0)
    # Then its idempotency record is left IN_PROGRESS, expiring with the Lambda time it had
    item = idempotency_record(pipeline)
    assert item["status"]["S"] == "INPROGRESS"
    expiry_ms = int(item["in_progress_expiration"]["N"])
    assert 0 < expiry_ms / 1000 - time.time() <= CRASHED_TIMEOUT_SECONDS
    job = pipeline.ledger.get(key)
    assert job is not None
    assert (job.status, job.attempt_count) == (JobStatus.LEASED, 0)

    # When SQS redelivers it before that expiry
    deps, sink = deps_with(pipeline, pipeline.ledger)
    processor = BatchProcessor(event_type=EventType.SQS, raise_on_entire_batch_failure=False)
    early = {**record, "messageId": "redelivery-early"}
    response = process_batch({"Records": [early]}, pipeline.lambda_context(), deps, processor)
    # Then it is returned to the queue without a call: another delivery may still be calling
    assert time.time() * 1000 < expiry_ms, "the redelivery came too late to test this path"
    assert failed_ids(dict(response)) == {"redelivery-early"}
    assert sink.totals.get(Metric.IN_PROGRESS_ELSEWHERE) == 1
    assert pipeline.vendor.audit().calls_total == 1
    job = pipeline.ledger.get(key)
    assert job is not None
    assert (job.status, job.attempt_count) == (JobStatus.LEASED, 0)
    assert job.next_attempt_at > job.updated_at  # the ledger knows it comes back later

    # When it is delivered again after the in-progress expiry
    wait_for("the in-progress expiry", lambda: time.time() * 1000 > expiry_ms, 30)
    late = {**record, "messageId": "redelivery-late"}
    response = process_batch({"Records": [late]}, pipeline.lambda_context(), deps, processor)
    # Then the same key is called again, the vendor replays it: one effect, the job succeeded
    assert failed_ids(dict(response)) == set()
    audit = pipeline.vendor.audit()
    assert (audit.calls_by_key[key], audit.effects_by_key[key], audit.effects_total) == (2, 1, 1)
    assert audit.keys_by_target == {f"{job.tenant_id}/{job.object_id}": (key,)}
    job = pipeline.ledger.get(key)
    assert job is not None
    assert (job.status, job.attempt_count) == (JobStatus.SUCCEEDED, 1)
    assert idempotency_record(pipeline)["status"]["S"] == "COMPLETED"

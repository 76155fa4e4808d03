"""What the consumer writes to its log for a batch: a line per batch, not a line per job."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from sweeper.models import JobMessage, JobStatus
from sweeper_local.lambda_runtime import load_handler
from tests.conftest import Pipeline
from tests.integration.test_consumer import publish_all
from tests.integration.test_handlers import roomy_context

pytestmark = pytest.mark.integration

#: What a successful job may cost in log bytes, the batch line and the metrics blob included
#: (a line per job, as before, took 531; one line per batch takes 33: sweeper_tools.planning.costs).
MAX_LOG_BYTES_PER_JOB = 100


Handler = Callable[[dict[str, Any], Any], Any]


@pytest.fixture
def consumer(pipeline: Pipeline) -> Handler:
    """The consumer function, imported in its environment (its Logger named by the service)."""
    return load_handler("consumer")


@pytest.fixture
def function_log(consumer: Handler, monkeypatch: pytest.MonkeyPatch) -> Iterator[io.StringIO]:
    """What the consumer's Powertools Logger writes, at its deployed level (INFO)."""
    service = logging.getLogger("sweeper")
    streams = [h for h in service.handlers if isinstance(h, logging.StreamHandler)]
    assert streams, "the consumer's Powertools Logger is the 'sweeper' logger's handler"
    out = io.StringIO()
    for log_handler in streams:
        monkeypatch.setattr(log_handler, "stream", out)
    level = service.level
    service.setLevel(logging.INFO)
    yield out
    service.setLevel(level)


def _lines(out: io.StringIO) -> list[dict[str, object]]:
    return [json.loads(line) for line in out.getvalue().splitlines() if line.strip()]


def test_a_batch_of_successful_jobs_logs_one_line_with_counts_under_the_byte_bound(
    pipeline: Pipeline,
    consumer: Handler,
    function_log: io.StringIO,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # Given 100 published jobs the vendor accepts
    pipeline.seed(100, tenants=10)
    records = publish_all(pipeline)
    assert len(records) == 100
    capsys.readouterr()
    # When the consumer handles them in one batch
    response = consumer({"Records": records}, roomy_context())
    assert response["batchItemFailures"] == []
    assert pipeline.ledger.counts("exports")[JobStatus.SUCCEEDED] == 100
    # Then the whole log (its lines and the metrics blob) stays under the bound per job
    written = len(function_log.getvalue().encode()) + len(capsys.readouterr().out.encode())
    assert written / 100 < MAX_LOG_BYTES_PER_JOB, f"{written / 100:.0f} bytes a job"
    # and its log holds one line for the batch, counting the outcomes, naming no key
    lines = [line for line in _lines(function_log) if line.get("message") == "batch"]
    assert len(lines) == 1, _lines(function_log)
    (batch,) = lines
    assert batch["outcomes"] == {"settled": 100}
    assert "operation_key" not in json.dumps(batch)


def test_the_batch_line_names_the_keys_of_what_went_wrong_and_their_lines_stay(
    pipeline: Pipeline, consumer: Handler, function_log: io.StringIO
) -> None:
    # Given a batch of two good records, a body that does not parse and one naming no job
    pipeline.seed(2)
    good = publish_all(pipeline)
    body = JobMessage.model_validate_json(good[0]["body"])
    forged = body.model_copy(update={"key": "exports:forged"})
    bad = [
        {**good[0], "messageId": "m-malformed", "body": "not json"},
        {**good[0], "messageId": "m-orphan", "body": forged.to_body()},
    ]
    # When the consumer handles them in one batch
    assert consumer({"Records": good + bad}, roomy_context())["batchItemFailures"] == []
    lines = _lines(function_log)
    # Then the batch line counts each outcome and names the two that went wrong, only them
    (batch,) = [line for line in lines if line.get("message") == "batch"]
    assert (batch["records"], batch["outcomes"]) == (
        4,
        {"settled": 2, "malformed": 1, "orphan": 1},
    )
    assert batch["problems"] == {"malformed": ["m-malformed"], "orphan": ["exports:forged"]}
    # and the per-job lines an operator reads for them are written as before
    messages = {str(line["message"]) for line in lines}
    assert {"malformed message dropped", "message names no ledger job; dropped"} <= messages
    assert "settled" not in messages


def test_at_debug_a_line_per_job_comes_back(
    pipeline: Pipeline,
    consumer: Handler,
    function_log: io.StringIO,
) -> None:
    # Given the consumer's log level set to DEBUG (POWERTOOLS_LOG_LEVEL, for an incident)
    logging.getLogger("sweeper").setLevel(logging.DEBUG)  # put back by `function_log`
    pipeline.seed(3)
    records = publish_all(pipeline)
    # When it handles a batch
    assert consumer({"Records": records}, roomy_context())["batchItemFailures"] == []
    # Then each job has its own line again, by its key, beside the batch line
    lines = _lines(function_log)
    settled = {str(line["operation_key"]) for line in lines if line["message"] == "settled"}
    keys = {JobMessage.model_validate_json(r["body"]).key for r in records}
    assert settled == keys
    assert [line["outcomes"] for line in lines if line["message"] == "batch"] == [{"settled": 3}]

"""The Lambda entry points, invoked as Lambda does, with the sample events from events/."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from functions.consumer import app as consumer_app
from functions.producer import app as producer_app
from sweeper import runtime
from sweeper.errors import ConfigError, LedgerUnavailableError
from sweeper.models import JobMessage, JobStatus, NewJob
from sweeper.observability import NOT_SUMMED, Metric
from sweeper.scheduling import schedule_jobs
from sweeper_local.lambda_runtime import LocalLambdaContext, parse_emf
from tests.conftest import Pipeline, load_event
from tests.integration.test_consumer import publish_all
from tests.integration.test_ledger_blip import terminate_ledger_connections

pytestmark = pytest.mark.integration


def test_the_producer_handler_releases_due_work_for_the_scheduled_event(
    pipeline: Pipeline,
) -> None:
    # Given due obligations and the scheduler's sample event for this policy
    pipeline.seed(12)
    event = load_event("scheduler_event.json")
    # When the producer is invoked
    report: dict[str, Any] = producer_app.handler(event, pipeline.lambda_context("producer"))
    # Then every due row is leased and queued, and the run is recorded at the scheduled time
    assert (report["discovered"], report["published"]) == (12, 12)
    assert report["scheduled_at"].startswith(event["time"].rstrip("Z"))
    assert pipeline.ledger.counts("exports")[JobStatus.LEASED] == 12
    attrs = pipeline.aws.sqs().get_queue_attributes(
        QueueUrl=pipeline.resources.queue_url, AttributeNames=["ApproximateNumberOfMessages"]
    )["Attributes"]
    assert attrs["ApproximateNumberOfMessages"] == "12"


def test_a_repeated_scheduler_delivery_publishes_nothing_twice(pipeline: Pipeline) -> None:
    pipeline.seed(5)
    event = load_event("scheduler_event.json")
    producer_app.handler(event, pipeline.lambda_context("producer"))
    again = producer_app.handler(event, pipeline.lambda_context("producer"))
    assert again["duplicate_invocation"] is True
    assert again["published"] == 0


def test_an_event_for_another_policy_is_refused(pipeline: Pipeline) -> None:
    event = load_event("scheduler_event.json")
    event["detail"]["policy"] = "listings"
    with pytest.raises(ConfigError, match="listings"):
        producer_app.handler(event, pipeline.lambda_context("producer"))


def test_the_sample_sqs_batch_drives_the_consumer_handler(pipeline: Pipeline) -> None:
    # Given the ledger holds the two jobs the sample batch names, leased
    from sweeper.models import NewJob
    from sweeper.scheduling import schedule_jobs

    event = load_event("sqs_batch.json")
    messages = [JobMessage.model_validate_json(r["body"]) for r in event["Records"]]
    from datetime import UTC, datetime

    now = datetime.now(UTC)
    schedule_jobs(
        pipeline.ledger,
        pipeline.policy,
        [NewJob(m.tenant_id, m.object_id, now) for m in messages],
        now,
    )
    from functions.consumer import app as consumer_app

    response = consumer_app.handler(event, pipeline.lambda_context())
    assert response["batchItemFailures"] == []
    assert pipeline.ledger.counts("exports")[JobStatus.SUCCEEDED] == 2
    assert pipeline.vendor.audit().effects_total == 2


# -- what the handlers emit is what the alarms and the dashboard read (infra/observability/) --


def test_the_producer_handler_emits_claims_lease_expiries_and_publish_failures(
    pipeline: Pipeline, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given twelve due rows released by one run, whose leases then expire unsettled
    pipeline.seed(12)
    event = load_event("scheduler_event.json")
    producer_app.handler(event, pipeline.lambda_context("producer"))
    first = parse_emf(capsys.readouterr().out)
    later = datetime.now(UTC) + timedelta(seconds=pipeline.policy.lease_seconds + 1)
    monkeypatch.setattr(runtime, "utcnow", lambda: later)
    # When the next scheduled run comes
    producer_app.handler(
        {**event, "time": "2026-11-29T02:05:00Z"}, pipeline.lambda_context("producer")
    )
    second = parse_emf(capsys.readouterr().out)
    # Then the first run reported its claims and the second the expired leases it reclaimed
    assert first[Metric.DISCOVERED] == 12
    assert Metric.OLDEST_ELIGIBLE_AGE in first
    # (a zero is not sent: CloudWatch bills a metric for each hour it is sent in)
    assert Metric.RECLAIMED not in first
    assert Metric.PUBLISH_FAILURES not in first
    assert second[Metric.RECLAIMED] == 12
    assert second[Metric.DISCOVERED] == 12


def test_a_producer_run_that_finds_nothing_due_sends_no_metric(
    pipeline: Pipeline, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given a policy with nothing due
    event = load_event("scheduler_event.json")
    # When the producer runs
    report: dict[str, Any] = producer_app.handler(event, pipeline.lambda_context("producer"))
    # Then it sends no metric at all (each would be billed for the hour), only its log line
    assert report["discovered"] == report["published"] == 0
    assert parse_emf(capsys.readouterr().out) == {}


def test_the_consumer_handler_emits_the_limiter_slots_its_batch_used(
    pipeline: Pipeline, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given the ledger holds the two jobs the sample batch names
    event = load_event("sqs_batch.json")
    messages = [JobMessage.model_validate_json(r["body"]) for r in event["Records"]]
    now = datetime.now(UTC)
    schedule_jobs(
        pipeline.ledger,
        pipeline.policy,
        [NewJob(m.tenant_id, m.object_id, now) for m in messages],
        now,
    )
    capsys.readouterr()

    # A roomy timeout: a slow cold start on a loaded machine must not leave no time to call
    def context() -> LocalLambdaContext:
        return LocalLambdaContext(function_name="sweeper-consumer", timeout_seconds=60)

    # When the consumer handles the batch, then the same batch again (both jobs settled by then)
    consumer_app.handler(event, context())
    first = parse_emf(capsys.readouterr().out)
    consumer_app.handler(event, context())
    second = parse_emf(capsys.readouterr().out)
    # Then the first batch used a slot per call; the second called nothing and says so
    assert first[Metric.LIMITER_SLOTS_USED] == 2 == pipeline.vendor.audit().calls_total
    assert second[Metric.LIMITER_SLOTS_USED] == 0


def emf_values(output: str) -> dict[str, tuple[str, list[float]]]:
    """Name -> (unit, every value) of the EMF documents in a captured stdout, in order."""
    found: dict[str, tuple[str, list[float]]] = {}
    for line in output.splitlines():
        if '"_aws"' not in line:
            continue
        doc = json.loads(line)
        for directive in doc["_aws"]["CloudWatchMetrics"]:
            for metric in directive["Metrics"]:
                values = doc[metric["Name"]]
                kept = found.setdefault(metric["Name"], (metric["Unit"], []))[1]
                kept.extend(values if isinstance(values, list) else [values])
    return found


def roomy_context() -> LocalLambdaContext:
    """A consumer context whose timeout a slow start on a loaded machine does not reach."""
    return LocalLambdaContext(function_name="sweeper-consumer", timeout_seconds=60)


def test_the_consumer_handler_prints_one_value_per_count_with_the_batch_sum(
    pipeline: Pipeline, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given six published jobs
    pipeline.seed(6)
    records = publish_all(pipeline)
    capsys.readouterr()
    # When the consumer handles them in one batch (on its threads)
    response = consumer_app.handler({"Records": records}, roomy_context())
    assert response["batchItemFailures"] == []
    emitted = emf_values(capsys.readouterr().out)
    # Then each count is one value, the batch's sum
    assert emitted[Metric.SUCCEEDED] == ("Count", [6.0])
    assert emitted[Metric.LIMITER_SLOTS_USED] == ("Count", [6.0])
    counts = {n: v for n, (unit, v) in emitted.items() if unit == "Count" and n not in NOT_SUMMED}
    assert all(len(values) == 1 for values in counts.values()), counts
    # and each delivery's time is its own value, for CloudWatch's percentiles
    unit, times = emitted[Metric.PROCESSING_SECONDS]
    assert (unit, len(times)) == ("Seconds", 6)


def test_a_consumer_batch_that_raises_still_prints_what_it_counted(
    pipeline: Pipeline, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given three published jobs, and a consumer whose ledger connection ends before its read
    pipeline.seed(3)
    records = publish_all(pipeline)
    runtime.ledger().targets(["warm"])  # the connection is open, as in a warm environment
    terminate_ledger_connections(pipeline.env["SWEEPER_DATABASE_URL"])
    capsys.readouterr()
    # When the batch is delivered, the invocation fails
    with pytest.raises(LedgerUnavailableError):
        consumer_app.handler({"Records": records}, roomy_context())
    # Then the records it returned for the unreachable ledger were still counted, in one value
    assert emf_values(capsys.readouterr().out)[Metric.LEDGER_UNREACHED] == ("Count", [3.0])

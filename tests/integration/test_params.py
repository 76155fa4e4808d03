"""Per-obligation params through every door, into the ledger and from the ledger row to the
action (real PostgreSQL, moto's SQS, S3 and DynamoDB): good params arrive whole, bad ones are
refused with nothing written and named by line or position and rule, never by value."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest
from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType

from sweeper.config import IntakeConfig, Policy, S3Discovery, SqlDiscovery
from sweeper.consumer import process_batch
from sweeper.discovery.run import COMPLETE, run_discovery
from sweeper.discovery.s3 import S3Source
from sweeper.discovery.sql import SqlSource
from sweeper.discovery.store import DiscoveryStore
from sweeper.errors import InputError
from sweeper.intake.hints import hint_messages
from sweeper.intake.process import IntakeDeps, process_intake_batch
from sweeper.ledger.store import Ledger
from sweeper.models import (
    ActionCall,
    ActionResult,
    JobMessage,
    JobStatus,
    NewJob,
    OutcomeClass,
    operation_key,
    params_digest,
)
from sweeper.observability import Metric
from sweeper.params import ParamsRules
from sweeper.scheduling import schedule_jobs
from sweeper.sqs_queue import SqsVisibility
from sweeper_local.metric_totals import CountingSink
from sweeper_tools.obligation_file import parse_jobs
from tests.conftest import Pipeline
from tests.integration.test_consumer import deps_with, failed_ids, publish_all
from tests.integration.test_discovery_s3 import bucket  # noqa: F401  (a fixture)
from tests.integration.test_discovery_sql import SourceDb, source_db  # noqa: F401
from tests.integration.test_webhook import Webhook, webhook  # noqa: F401

pytestmark = pytest.mark.integration

NOW = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
SCHEMA = {
    "type": "object",
    "properties": {
        "business_date": {"type": "string", "pattern": "^[0-9]{4}-[0-9]{2}-[0-9]{2}$"},
        "amount": {"type": "integer", "minimum": 0},
    },
    "required": ["business_date"],
    "additionalProperties": False,
}
#: The issue's payments policy: the business date is part of the obligation's identity.
PAYMENTS = Policy(name="payments", identity_params=["business_date"], params_schema=SCHEMA)
#: A value no refusal may ever echo.
SECRET_VALUE = "cust-4711-private"


def _params_of(db_url: str) -> dict[str, Any]:
    """operation key -> params, every job in the ledger."""
    with psycopg.connect(db_url) as conn:
        rows = conn.execute("SELECT operation_key, params FROM sweeper_jobs").fetchall()
    return {str(key): params for key, params in rows}


def _schedule_text(ledger: Ledger, text: str, fmt: Any, policy: Policy = PAYMENTS) -> Any:
    jobs = parse_jobs(text, fmt, NOW, ParamsRules.of(policy))
    return schedule_jobs(ledger, policy, jobs, NOW)


# -- the file doors: CSV and JSON lines -----------------------------------------------------------


def test_a_csv_params_column_reaches_the_ledger_and_identity_params_make_distinct_keys(
    ledger: Ledger, db_url: str
) -> None:
    # Given one payment reconciled for two business dates, by CSV with a params column
    text = (
        "tenant_id,object_id,due_at,params\n"
        'acct_1,pay_9,,"{""business_date"": ""2026-11-30"", ""amount"": 5}"\n'
        'acct_1,pay_9,,"{""business_date"": ""2026-12-01""}"\n'
    )
    # When it is scheduled
    result = _schedule_text(ledger, text, "csv")
    # Then two obligations exist, one per business date, each with its own params
    assert result.inserted == 2
    assert _params_of(db_url) == {
        "payments:acct_1:pay_9:2026-11-30:v1": {"business_date": "2026-11-30", "amount": 5},
        "payments:acct_1:pay_9:2026-12-01:v1": {"business_date": "2026-12-01"},
    }


def test_jsonl_params_reach_the_ledger(ledger: Ledger, db_url: str) -> None:
    text = (
        '{"tenant_id": "acct_1", "object_id": "pay_9", "params": {"business_date": "2026-11-30"}}\n'
    )
    _schedule_text(ledger, text, "jsonl")
    assert _params_of(db_url) == {
        "payments:acct_1:pay_9:2026-11-30:v1": {"business_date": "2026-11-30"}
    }


REFUSED = [
    pytest.param(["2026-11-30"], "params_not_object", id="not-an-object"),
    pytest.param(
        {"business_date": "2026-11-30", "note": SECRET_VALUE * 400},
        "params_too_large",
        id="too-large",
    ),
    pytest.param({"business_date": SECRET_VALUE}, "params_schema", id="schema"),
    pytest.param({"amount": 5}, "params_schema", id="schema-required"),
]


def _cell(value: object) -> str:
    """A JSON value as one quoted CSV cell."""
    return '"' + json.dumps(value).replace('"', '""') + '"'


@pytest.mark.parametrize(("params", "rule"), REFUSED)
@pytest.mark.parametrize("fmt", ["csv", "jsonl"])
def test_bad_params_in_a_file_are_refused_by_line_and_rule_with_nothing_written(
    ledger: Ledger, db_url: str, fmt: str, params: Any, rule: str
) -> None:
    # Given a file whose second obligation carries bad params
    good = {"business_date": "2026-11-30"}
    if fmt == "csv":
        text = (
            f"tenant_id,object_id,params\nacct_1,pay_1,{_cell(good)}\n"
            f"acct_1,pay_2,{_cell(params)}\n"
        )
        line = 3
    else:
        text = "\n".join(
            json.dumps({"tenant_id": "acct_1", "object_id": o, "params": p})
            for o, p in (("pay_1", good), ("pay_2", params))
        )
        line = 2
    # When it is scheduled
    with pytest.raises(InputError) as refused:
        _schedule_text(ledger, text, fmt)
    # Then the refusal names the line and the rule, never the value, and nothing was written
    assert refused.value.line == line
    assert rule in str(refused.value)
    assert SECRET_VALUE not in str(refused.value)
    assert _params_of(db_url) == {}


def test_an_obligation_without_its_identity_param_is_refused(ledger: Ledger, db_url: str) -> None:
    policy = PAYMENTS.model_copy(update={"params_schema": None})
    text = '{"tenant_id": "acct_1", "object_id": "pay_9", "params": {"amount": 5}}\n'
    with pytest.raises(InputError, match="identity_param_missing: business_date"):
        _schedule_text(ledger, text, "jsonl", policy)
    assert _params_of(db_url) == {}


# -- the hint doors: webhook and intake queue -----------------------------------------------------


def _intake(hook: Webhook, ledger: Ledger, messages: list[dict[str, Any]]) -> Any:
    records = [{"messageId": m["MessageId"], "body": m["Body"]} for m in messages]
    visibility = SqsVisibility(hook.aws.sqs(), hook.resources.queue_url)
    deps = IntakeDeps(PAYMENTS, ledger, lambda: NOW, CountingSink(), visibility)
    return process_intake_batch({"Records": records}, deps)


def test_webhook_hints_carry_params_through_the_intake_queue_into_the_ledger(
    webhook: Webhook,  # noqa: F811
    ledger: Ledger,
    db_url: str,
) -> None:
    # Given the payments policy's webhook
    webhook.deps = replace(webhook.deps, policy=PAYMENTS)
    body = json.dumps(
        [
            {"tenant_id": "acct_1", "object_id": "pay_9", "params": {"business_date": d}}
            for d in ("2026-11-30", "2026-12-01")
        ]
    ).encode()
    # When two hints with params are posted and the intake function handles the queue
    response = webhook.post(body, path="/v1/hints/payments")
    assert (response.status, response.body["accepted"]) == (202, 2)
    (answer, report) = _intake(webhook, ledger, webhook.queued())
    # Then the ledger holds both obligations with their params
    assert answer == {"batchItemFailures": []}
    assert report.inserted == 2
    assert _params_of(db_url) == {
        "payments:acct_1:pay_9:2026-11-30:v1": {"business_date": "2026-11-30"},
        "payments:acct_1:pay_9:2026-12-01:v1": {"business_date": "2026-12-01"},
    }


def test_a_webhook_hint_with_bad_params_is_refused_by_position_and_rule_and_nothing_queued(
    webhook: Webhook,  # noqa: F811
) -> None:
    webhook.deps = replace(webhook.deps, policy=PAYMENTS)
    body = json.dumps(
        [
            {"tenant_id": "a", "object_id": "p1", "params": {"business_date": "2026-11-30"}},
            {"tenant_id": "a", "object_id": "p2", "params": {"business_date": SECRET_VALUE}},
        ]
    ).encode()
    response = webhook.post(body, path="/v1/hints/payments")
    assert response.status == 400
    assert response.body == {"error": "invalid_hints", "problems": ["[1].params: params_schema"]}
    assert SECRET_VALUE not in response.json()
    assert webhook.queued() == []


def test_an_event_hint_with_params_is_scheduled_and_one_with_bad_params_is_rejected(
    ledger: Ledger, db_url: str
) -> None:
    # Given two EventBridge events on the intake queue, one with good params and one without
    # its identity param
    def event(detail: dict[str, Any]) -> str:
        return json.dumps(
            {
                "version": "0",
                "id": "e1",
                "detail-type": "export.expired",
                "source": "acme.exports",
                "account": "123456789012",
                "time": NOW.isoformat(),
                "region": "eu-west-1",
                "resources": [],
                "detail": detail,
            }
        )

    good = event({"tenant_id": "a", "object_id": "p1", "params": {"business_date": "2026-11-30"}})
    bad = event({"tenant_id": "a", "object_id": "p2", "params": {"amount": 3}})
    records = [
        {"messageId": "good", "receiptHandle": "rh-good", "body": good},
        {"messageId": "bad", "receiptHandle": "rh-bad", "body": bad},
    ]
    metrics = CountingSink()

    class NoHides:
        def hide_for(self, receipt_handle: str, seconds: float) -> None:
            raise AssertionError("nothing returns")

        def hide_each(self, hides: Any) -> list[str]:
            raise AssertionError("nothing returns")

    intake = IntakeConfig(event_patterns=[{"source": ["acme.exports"]}])
    policy = PAYMENTS.model_copy(update={"intake": intake})
    deps = IntakeDeps(policy, ledger, lambda: NOW, metrics, NoHides())
    # When the intake function handles them
    answer, report = process_intake_batch({"Records": records}, deps)
    # Then the good one is in the ledger with its params and the bad one was rejected (never
    # retried: the same body fails the same way), writing nothing
    assert answer == {"batchItemFailures": []}
    assert (report.rejected, report.inserted) == (1, 1)
    assert _params_of(db_url) == {"payments:a:p1:2026-11-30:v1": {"business_date": "2026-11-30"}}


def test_a_queued_hint_message_is_checked_again_against_the_policy(
    ledger: Ledger, db_url: str
) -> None:
    # Given a hint message queued with params the policy's schema refuses (the policy changed,
    # or something else wrote to the queue)
    (body,) = hint_messages(
        "payments", "webhook", "req", [NewJob("a", "p1", NOW, {"business_date": "x"})]
    )
    deps = IntakeDeps(PAYMENTS, ledger, lambda: NOW, CountingSink(), None)  # type: ignore[arg-type]
    answer, report = process_intake_batch(
        {"Records": [{"messageId": "m", "receiptHandle": "rh", "body": body}]}, deps
    )
    assert answer == {"batchItemFailures": []}
    assert (report.rejected, report.inserted) == (1, 0)
    assert _params_of(db_url) == {}


# -- the discovery doors: SQL columns and S3 metadata ---------------------------------------------


def test_sql_discovery_takes_the_named_columns_as_params_and_rejects_bad_rows_by_position(
    source_db: SourceDb,  # noqa: F811
    ledger: Ledger,
    db_url: str,
) -> None:
    # Given a system of record with a business date and an amount per row (one row's amount
    # negative, which the schema refuses; one row without an amount, left out of its params)
    source_db.execute("ALTER TABLE exports ADD COLUMN business_date date, ADD COLUMN amount int")
    with psycopg.connect(source_db.url, autocommit=True) as conn:
        conn.cursor().executemany(
            "INSERT INTO exports (tenant, export_id, expires_at, business_date, amount) "
            "VALUES (%s, %s, %s, %s, %s)",
            [
                ("acct_1", "pay_1", NOW - timedelta(hours=3), "2026-11-30", 5),
                ("acct_1", "pay_2", NOW - timedelta(hours=2), "2026-11-30", -1),
                ("acct_1", "pay_3", NOW - timedelta(hours=1), "2026-12-01", None),
            ],
        )
    query = (
        "SELECT tenant AS tenant_id, export_id AS object_id, expires_at AS due_at, "
        "business_date, amount FROM exports"
    )
    policy = PAYMENTS.model_copy(
        update={"discovery": SqlDiscovery(query=query, param_columns=["business_date", "amount"])}
    )
    assert isinstance(policy.discovery, SqlDiscovery)
    # When discovery runs
    report = run_discovery(
        policy,
        SqlSource(policy.discovery, source_db.url),
        DiscoveryStore(ledger),
        scheduled_at=NOW,
        clock=lambda: NOW,
        remaining_seconds=lambda: 1e9,
    )
    # Then the good rows are jobs with their params (a date as its ISO text), and the bad one
    # is rejected by its position and rule, never its value
    assert (report.stop_reason, report.inserted, report.rejected) == (COMPLETE, 2, 1)
    assert report.rejected_sample == [
        {
            "position": 2,
            "reason": "params fails the policy's params_schema "
            "(params_schema: minimum at properties/amount/minimum)",
        }
    ]
    assert _params_of(db_url) == {
        "payments:acct_1:pay_1:2026-11-30:v1": {"business_date": "2026-11-30", "amount": 5},
        "payments:acct_1:pay_3:2026-12-01:v1": {"business_date": "2026-12-01"},
    }


def test_s3_discovery_takes_the_named_metadata_as_params(
    bucket: tuple[Any, str],  # noqa: F811
    ledger: Ledger,
    db_url: str,
) -> None:
    # Given objects with user metadata: one with a good business date, one with a bad one
    client, name = bucket
    client.put_object(
        Bucket=name, Key="exports/t1/a.csv", Body=b"x", Metadata={"business_date": "2026-11-30"}
    )
    client.put_object(
        Bucket=name, Key="exports/t1/b.csv", Body=b"x", Metadata={"business_date": SECRET_VALUE}
    )
    discovery = S3Discovery(
        bucket=name,
        prefix="exports/",
        key_template="exports/{tenant_id}/{object_id}",
        min_age_seconds=0,
        metadata_params=["business_date"],
    )
    policy = PAYMENTS.model_copy(update={"discovery": discovery})
    later = datetime.now(UTC) + timedelta(minutes=1)
    # When discovery runs
    report = run_discovery(
        policy,
        S3Source(discovery, client),
        DiscoveryStore(ledger),
        scheduled_at=later,
        clock=lambda: later,
        remaining_seconds=lambda: 1e9,
    )
    # Then the first object is a job with its metadata as params; the second is rejected
    assert (report.inserted, report.rejected) == (1, 1)
    assert report.rejected_sample[0]["position"] == 2
    assert "params_schema" in report.rejected_sample[0]["reason"]
    assert SECRET_VALUE not in json.dumps(report.rejected_sample)
    assert _params_of(db_url) == {
        "payments:t1:a.csv:2026-11-30:v1": {"business_date": "2026-11-30"}
    }


# -- re-scheduling with other data ----------------------------------------------------------------


def _events(db_url: str, key: str) -> list[tuple[Any, ...]]:
    with psycopg.connect(db_url) as conn:
        return conn.execute(
            "SELECT e.event, e.action_id, e.previous_params FROM sweeper_job_events e "
            "JOIN sweeper_jobs j ON j.id = e.job_id WHERE j.operation_key = %s ORDER BY e.id",
            (key,),
        ).fetchall()


def test_before_its_claim_the_newest_params_win_and_the_replacement_is_a_job_event(
    ledger: Ledger, db_url: str
) -> None:
    # Given an obligation scheduled with an amount of 5
    key = "payments:acct_1:pay_9:2026-11-30:v1"
    first = {"business_date": "2026-11-30", "amount": 5}
    schedule_jobs(ledger, PAYMENTS, [NewJob("acct_1", "pay_9", NOW, first)], NOW)
    # When it is scheduled again with an amount of 7 (same identity), before any claim
    newer = {"business_date": "2026-11-30", "amount": 7}
    result = schedule_jobs(ledger, PAYMENTS, [NewJob("acct_1", "pay_9", NOW, newer)], NOW)
    # Then the newest params win, and a job event (no operator action) keeps what they replaced
    assert (result.inserted, result.params_replaced, result.params_kept) == (0, 1, 0)
    assert result.unchanged == 0
    job = ledger.get(key)
    assert job is not None
    assert job.params == newer
    assert _events(db_url, key) == [("params_replaced", None, first)]
    # and the same params again change nothing and record nothing
    again = schedule_jobs(ledger, PAYMENTS, [NewJob("acct_1", "pay_9", NOW, newer)], NOW)
    assert (again.params_replaced, again.unchanged) == (0, 1)
    assert len(_events(db_url, key)) == 1


def test_after_its_claim_the_params_are_kept_and_the_newer_ones_counted_as_kept(
    ledger: Ledger, db_url: str
) -> None:
    # Given an obligation claimed by a producer run (its message may be out)
    key = "payments:acct_1:pay_9:2026-11-30:v1"
    first = {"business_date": "2026-11-30", "amount": 5}
    schedule_jobs(ledger, PAYMENTS, [NewJob("acct_1", "pay_9", NOW, first)], NOW)
    (claimed,) = ledger.claim("payments", "batch-1", NOW, timedelta(minutes=15), 10)
    assert claimed.params == first
    # When it is scheduled again with other data, and again after its lease was released
    newer = {"business_date": "2026-11-30", "amount": 7}
    result = schedule_jobs(ledger, PAYMENTS, [NewJob("acct_1", "pay_9", NOW, newer)], NOW)
    # Then the claimed job keeps the params its message was sent with, counted as kept
    assert (result.params_replaced, result.params_kept, result.unchanged) == (0, 1, 1)
    job = ledger.get(key)
    assert job is not None
    assert job.params == first
    assert _events(db_url, key) == []
    # and so it does when the same re-schedule moves its due time earlier
    earlier = NOW - timedelta(hours=1)
    moved = schedule_jobs(ledger, PAYMENTS, [NewJob("acct_1", "pay_9", earlier, newer)], NOW)
    assert (moved.moved_earlier, moved.params_replaced, moved.params_kept) == (1, 0, 1)
    job = ledger.get(key)
    assert job is not None
    assert (job.due_at, job.params) == (earlier, first)
    # and a job attempted once keeps them even when pending again
    ledger.record_unsettled(
        key,
        NOW,
        next_attempt_at=NOW,
        lease_until=NOW,
        outcome=OutcomeClass.TRANSIENT,
        count_attempt=True,
    )
    ledger.release([claimed.id], "batch-1", NOW)
    later = schedule_jobs(ledger, PAYMENTS, [NewJob("acct_1", "pay_9", NOW, newer)], NOW)
    assert (later.params_replaced, later.params_kept) == (0, 1)
    job = ledger.get(key)
    assert job is not None
    assert (job.status, job.params) == (JobStatus.PENDING, first)


def test_a_job_whose_claim_was_released_unpublished_takes_the_newest_params(
    ledger: Ledger,
) -> None:
    # Given a job claimed, then released because its message was never published
    first = {"business_date": "2026-11-30", "amount": 5}
    schedule_jobs(ledger, PAYMENTS, [NewJob("acct_1", "pay_9", NOW, first)], NOW)
    (claimed,) = ledger.claim("payments", "batch-1", NOW, timedelta(minutes=15), 10)
    ledger.release([claimed.id], "batch-1", NOW)
    # When it is scheduled with other data
    newer = {"business_date": "2026-11-30", "amount": 7}
    result = schedule_jobs(ledger, PAYMENTS, [NewJob("acct_1", "pay_9", NOW, newer)], NOW)
    # Then no call can have carried the old ones: the newest win
    assert result.params_replaced == 1
    job = ledger.get(claimed.operation_key)
    assert job is not None
    assert job.params == newer


def test_within_one_input_a_key_takes_the_earliest_due_time_and_the_last_params(
    ledger: Ledger,
) -> None:
    key = operation_key("payments", "acct_1", "pay_9", 1, ("2026-11-30",))
    earlier = NOW - timedelta(hours=1)
    jobs = [
        NewJob("acct_1", "pay_9", earlier, {"business_date": "2026-11-30", "amount": 1}),
        NewJob("acct_1", "pay_9", NOW, {"business_date": "2026-11-30", "amount": 2}),
    ]
    result = schedule_jobs(ledger, PAYMENTS, jobs, NOW)
    assert result.inserted == 1
    job = ledger.get(key)
    assert job is not None
    assert (job.due_at, job.params) == (earlier, {"business_date": "2026-11-30", "amount": 2})


def test_a_moved_due_time_and_new_params_are_one_update(ledger: Ledger) -> None:
    key = operation_key("payments", "acct_1", "pay_9", 1, ("2026-11-30",))
    first = {"business_date": "2026-11-30", "amount": 5}
    schedule_jobs(ledger, PAYMENTS, [NewJob("acct_1", "pay_9", NOW, first)], NOW)
    newer = {"business_date": "2026-11-30", "amount": 7}
    earlier = NOW - timedelta(hours=1)
    result = schedule_jobs(ledger, PAYMENTS, [NewJob("acct_1", "pay_9", earlier, newer)], NOW)
    assert (result.moved_earlier, result.params_replaced, result.unchanged) == (1, 1, 0)
    job = ledger.get(key)
    assert job is not None
    assert (job.due_at, job.next_attempt_at, job.params) == (earlier, earlier, newer)


# -- from the ledger row to the action ------------------------------------------------------------


class Recording:
    """A test action: accepts every call and keeps the params it was given."""

    def __init__(self) -> None:
        self.params: list[dict[str, Any]] = []

    def __call__(self, call: ActionCall, timeout: float | None) -> ActionResult:
        self.params.append(dict(call.params))
        return ActionResult(outcome=OutcomeClass.ACCEPTED, code="ok")


def _seed_with_params(p: Pipeline, params: dict[str, Any]) -> None:
    now = datetime.now(UTC)
    schedule_jobs(p.ledger, p.policy, [NewJob("t1", "o1", now - timedelta(seconds=1), params)], now)


def _consume(p: Pipeline, records: list[dict[str, Any]], action: Recording) -> Any:
    deps, sink = deps_with(p, p.ledger, action)
    processor = BatchProcessor(event_type=EventType.SQS, raise_on_entire_batch_failure=False)
    return process_batch({"Records": records}, p.lambda_context(), deps, processor), sink


def test_the_message_carries_only_the_params_digest_and_the_action_gets_the_ledgers_params(
    pipeline: Pipeline,
) -> None:
    # Given a job with params, published by the producer
    params = {"business_date": "2026-11-30", "note": SECRET_VALUE}
    _seed_with_params(pipeline, params)
    (record,) = publish_all(pipeline)
    # Then its message names the params by digest only (no customer data on the wire)
    assert SECRET_VALUE not in record["body"]
    assert JobMessage.model_validate_json(record["body"]).params_digest == params_digest(params)
    # When a body that also carries params of its own is consumed
    body = json.loads(record["body"])
    body["params"] = {"business_date": "1999-01-01", "note": "forged"}
    action = Recording()
    response, sink = _consume(pipeline, [{**record, "body": json.dumps(body)}], action)
    # Then the action was given the ledger row's params, never the body's
    assert failed_ids(response) == set()
    assert action.params == [params]
    assert sink.totals.get(Metric.MISMATCHED) is None


def test_a_message_whose_params_digest_disagrees_with_the_ledger_is_dropped_uncalled(
    pipeline: Pipeline,
) -> None:
    # Given a published job with params, and its message altered to name other params
    _seed_with_params(pipeline, {"business_date": "2026-11-30"})
    (record,) = publish_all(pipeline)
    body = json.loads(record["body"])
    body["params_digest"] = params_digest({"business_date": "1999-01-01"})
    action = Recording()
    # When it is consumed
    response, sink = _consume(pipeline, [{**record, "body": json.dumps(body)}], action)
    # Then nothing is called and it is counted as today's mismatches are
    assert failed_ids(response) == set()
    assert action.params == []
    assert sink.totals.get(Metric.MISMATCHED) == 1
    # and so is a message that drops the digest of a job that has params
    del body["params_digest"]
    response, sink = _consume(pipeline, [{**record, "body": json.dumps(body)}], action)
    assert action.params == []
    assert sink.totals.get(Metric.MISMATCHED) == 1


def test_a_job_without_params_sends_a_body_as_before_params_existed(pipeline: Pipeline) -> None:
    pipeline.seed(1)
    (record,) = publish_all(pipeline)
    assert not {"params", "params_digest"} & set(json.loads(record["body"]))


def test_the_ledger_refuses_an_obligation_without_its_identity_params_whoever_skipped_the_doors(
    ledger: Ledger, db_url: str
) -> None:
    with pytest.raises(InputError, match="identity param 'business_date'"):
        schedule_jobs(ledger, PAYMENTS, [NewJob("acct_1", "pay_9", NOW)], NOW)
    assert _params_of(db_url) == {}

"""The intake function: hints from the intake queue upserted into the ledger, idempotently."""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from psycopg import sql

from sweeper import runtime
from sweeper.config import Policy
from sweeper.intake import process
from sweeper.intake.hints import hint_messages
from sweeper.intake.process import IntakeDeps, process_intake_batch
from sweeper.intake.send import send_hints
from sweeper.ledger.store import Ledger
from sweeper.models import NewJob, id_problem
from sweeper.observability import Metric
from sweeper.returns import LEDGER_RETURN_BASE_SECONDS
from sweeper.scheduling import schedule_jobs
from sweeper.sqs_queue import Hide, SqsPublisher
from sweeper_local.aws import IntakeResources, LocalAws, provision_intake
from sweeper_local.lambda_runtime import LocalLambdaContext, load_handler
from sweeper_local.metric_totals import CountingSink
from sweeper_local.poller import to_event_record

POLICY = Policy(name="exports")
NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _record(message_id: str, body: str) -> dict[str, Any]:
    return {"messageId": message_id, "receiptHandle": f"rh-{message_id}", "body": body}


class _Hides:
    """A Visibility that records what it was asked to hide (and hides it)."""

    def __init__(self) -> None:
        self.hidden: list[str] = []

    def hide_for(self, receipt_handle: str, seconds: float) -> None:
        raise AssertionError("the intake hides in batches")

    def hide_each(self, hides: Sequence[Hide]) -> list[str]:
        self.hidden.extend(h.message_id for h in hides)
        return []


def _deps(
    ledger: Ledger, metrics: CountingSink | None = None, visibility: _Hides | None = None
) -> IntakeDeps:
    return IntakeDeps(
        POLICY, ledger, lambda: NOW, metrics or CountingSink(), visibility or _Hides()
    )


def _message(*jobs: NewJob, policy: str = "exports") -> str:
    (body,) = hint_messages(policy, "webhook", "req", list(jobs))
    return body


def _rows(db_url: str) -> list[tuple[str, str, datetime]]:
    with psycopg.connect(db_url) as conn:
        return [
            (t, o, d)
            for t, o, d in conn.execute(
                "SELECT tenant_id, object_id, due_at FROM sweeper_jobs ORDER BY object_id"
            ).fetchall()
        ]


def _snapshot(db_url: str) -> list[tuple[Any, ...]]:
    with psycopg.connect(db_url) as conn:
        return conn.execute("SELECT * FROM sweeper_jobs ORDER BY id").fetchall()


def test_a_batch_of_hints_is_upserted_and_every_message_acknowledged(
    ledger: Ledger, db_url: str
) -> None:
    metrics = CountingSink()
    event = {
        "Records": [
            _record("m1", _message(NewJob("t1", "o1", NOW))),
            _record("m2", _message(NewJob("t1", "o2", NOW), NewJob("t2", "o3", NOW))),
        ]
    }

    response, report = process_intake_batch(event, _deps(ledger, metrics))

    assert response == {"batchItemFailures": []}
    assert (report.messages, report.hints, report.inserted) == (2, 3, 3)
    assert [r[1] for r in _rows(db_url)] == ["o1", "o2", "o3"]
    assert metrics.totals[Metric.HINTS_INSERTED] == 3


def test_an_unreadable_message_is_acknowledged_and_counted_and_the_rest_commit(
    ledger: Ledger, db_url: str
) -> None:
    metrics = CountingSink()
    event = {
        "Records": [
            _record("bad-json", "{not json"),
            _record("wrong-policy", _message(NewJob("t1", "o9", NOW), policy="uploads")),
            _record("good", _message(NewJob("t1", "o1", NOW))),
        ]
    }

    response, report = process_intake_batch(event, _deps(ledger, metrics))

    assert response == {"batchItemFailures": []}  # never retried: it would fail the same way
    assert report.rejected == 2
    assert metrics.totals[Metric.INTAKE_REJECTED] == 2
    assert [r[1] for r in _rows(db_url)] == ["o1"]


def test_when_the_ledger_is_down_no_message_is_acknowledged(pg_server: Any) -> None:
    down = Ledger(pg_server.url_for("no_such_database"))
    event = {
        "Records": [
            _record("m1", _message(NewJob("t1", "o1", NOW))),
            _record("m2", _message(NewJob("t1", "o2", NOW))),
            _record("bad", "{"),
        ]
    }

    response, report = process_intake_batch(event, _deps(down))

    assert response == {"batchItemFailures": [{"itemIdentifier": "m1"}, {"itemIdentifier": "m2"}]}
    assert (report.failed, report.rejected) == (2, 1)


def test_a_message_the_database_refuses_comes_back_alone(ledger: Ledger, db_url: str) -> None:
    # A constraint the database enforces and the hint model does not know: the batch's
    # transaction fails, then each message is tried alone and only the refused one returns.
    with psycopg.connect(db_url, autocommit=True) as conn:
        conn.execute(
            "ALTER TABLE sweeper_jobs ADD CONSTRAINT refuse_poison CHECK (object_id <> 'poison')"
        )
    event = {
        "Records": [
            _record("m1", _message(NewJob("t1", "o1", NOW))),
            _record("poison", _message(NewJob("t1", "poison", NOW))),
            _record("m3", _message(NewJob("t1", "o3", NOW))),
        ]
    }

    hides = _Hides()

    response, report = process_intake_batch(event, _deps(ledger, visibility=hides))

    assert response == {"batchItemFailures": [{"itemIdentifier": "poison"}]}
    assert report.inserted == 2
    assert [r[1] for r in _rows(db_url)] == ["o1", "o3"]
    assert hides.hidden == []  # a refusal is no blip: it comes back after the queue's timeout


def test_a_refused_message_is_logged_with_its_sqlstate_and_never_the_value(
    ledger: Ledger, db_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    # A check violation's DETAIL quotes the failing row: the chained psycopg error must not
    # reach the log, only its SQLSTATE.
    with psycopg.connect(db_url, autocommit=True) as conn:
        conn.execute(
            "ALTER TABLE sweeper_jobs ADD CONSTRAINT refuse_poison "
            "CHECK (object_id <> 'customer-value-7f3a')"
        )
    event = {"Records": [_record("poison", _message(NewJob("t1", "customer-value-7f3a", NOW)))]}

    with caplog.at_level("DEBUG"):
        response, _ = process_intake_batch(event, _deps(ledger))

    assert response == {"batchItemFailures": [{"itemIdentifier": "poison"}]}
    refused = [r for r in caplog.records if r.getMessage() == "intake upsert failed"]
    assert [getattr(r, "sqlstate", None) for r in refused] == ["23514"]  # check_violation
    assert all(r.exc_info is None for r in caplog.records)
    assert "customer-value-7f3a" not in caplog.text


_CASES = itertools.count()
_DOORS = st.lists(
    st.tuples(st.sampled_from(["file", "hint"]), st.integers(min_value=-10_000, max_value=10_000)),
    min_size=1,
    max_size=6,
)


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(arrivals=_DOORS)
def test_hints_and_schedules_in_any_order_converge_on_one_job_due_earliest(
    ledger: Ledger, db_url: str, arrivals: list[tuple[str, int]]
) -> None:
    # Given one obligation (new in every example) arriving by either door, in any order
    object_id = f"obj-{next(_CASES)}"
    for door, offset in arrivals:
        job = NewJob("t1", object_id, NOW + timedelta(seconds=offset))
        if door == "file":
            schedule_jobs(ledger, POLICY, [job], NOW)
        else:
            response, _ = process_intake_batch(
                {"Records": [_record("m", _message(job))]}, _deps(ledger)
            )
            assert response == {"batchItemFailures": []}

    # Then the ledger holds one job for it, due at the earliest time any door gave
    with psycopg.connect(db_url) as conn:
        rows = conn.execute(
            "SELECT due_at, next_attempt_at FROM sweeper_jobs WHERE object_id = %s", (object_id,)
        ).fetchall()
    earliest = NOW + timedelta(seconds=min(offset for _, offset in arrivals))
    assert rows == [(earliest, earliest)]


# -- through the real queue and handler ------------------------------------------------------


@pytest.fixture
def intake(
    db_url: str,
    local_aws: LocalAws,
    aws_env: dict[str, str],
    unique_name: str,
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[tuple[IntakeResources, dict[str, str]]]:
    """The intake queue in the emulator and the intake function's environment, as deployed."""
    resources = provision_intake(
        local_aws.sqs(),
        local_aws.dynamodb(),
        local_aws.secretsmanager(),
        POLICY,
        prefix=unique_name,
    )
    env = {
        **aws_env,
        "SWEEPER_POLICY": POLICY.model_dump_json(),
        "SWEEPER_DATABASE_URL": db_url,
        "SWEEPER_INTAKE_QUEUE_URL": resources.queue_url,
        "POWERTOOLS_SERVICE_NAME": "sweeper",
    }
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    runtime.reset()
    yield resources, env
    runtime.reset()


def _receive(local_aws: LocalAws, resources: IntakeResources, wait_seconds: float) -> list[Any]:
    sqs = local_aws.sqs()
    deadline = time.monotonic() + wait_seconds
    while time.monotonic() < deadline:
        found = sqs.receive_message(
            QueueUrl=resources.queue_url, MaxNumberOfMessages=10, WaitTimeSeconds=1
        ).get("Messages", [])
        if found:
            return list(found)
    return []


def test_a_kill_between_the_commit_and_the_acknowledgement_creates_no_second_row(
    intake: tuple[IntakeResources, dict[str, str]], local_aws: LocalAws, db_url: str
) -> None:
    resources, env = intake
    send_hints(
        SqsPublisher(local_aws.sqs(), resources.queue_url),
        "exports",
        "file",
        [NewJob("t1", "o1", NOW), NewJob("t2", "o2", NOW)],
    )

    # When an intake invocation commits its upsert and dies before the message is deleted
    crashed = subprocess.run(
        [sys.executable, "-m", "tests.integration.intake_process", resources.queue_url],
        env={**os.environ, **env},
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert crashed.returncode == -9, crashed.stderr[-2000:]
    first = json.loads(crashed.stdout.strip().splitlines()[-1])
    assert first == {"received": 1, "response": {"batchItemFailures": []}}
    committed = _snapshot(db_url)
    assert len(committed) == 2

    # Then the message comes back, and its second delivery changes nothing
    redelivered = _receive(local_aws, resources, wait_seconds=15)
    assert len(redelivered) == 1
    arn = local_aws.sqs().get_queue_attributes(
        QueueUrl=resources.queue_url, AttributeNames=["QueueArn"]
    )["Attributes"]["QueueArn"]
    handler = load_handler("intake")
    event = {"Records": [to_event_record(m, arn, env["AWS_REGION"]) for m in redelivered]}
    response = handler(event, LocalLambdaContext("sweeper-intake", timeout_seconds=30))
    assert response == {"batchItemFailures": []}
    assert _snapshot(db_url) == committed  # the same two rows, not even touched


@pytest.mark.parametrize(
    ("field", "bad"),
    [
        ("tenant_id", ".."),
        ("object_id", ".."),
        ("object_id", "."),
        ("object_id", "o\u0000"),
        ("tenant_id", " t1"),
        ("object_id", "o1\t"),
    ],
)
def test_a_message_with_an_id_breaking_the_id_rule_is_rejected_and_its_batch_mate_commits(
    ledger: Ledger, db_url: str, field: str, bad: str
) -> None:
    # Given an intake message (as anyone able to send to the queue could write it) with a bad id
    hint = {"tenant_id": "t1", "object_id": "o-bad", "due_at": NOW.isoformat()}
    hint[field] = bad
    body = {"kind": "sweeper.hints", "v": 1, "policy": "exports", "source": "file"}
    poison = json.dumps({**body, "request_id": "r1", "hints": [hint]})
    metrics = CountingSink()
    event = {
        "Records": [_record("poison", poison), _record("good", _message(NewJob("t1", "o1", NOW)))]
    }
    # When the batch is processed
    response, report = process_intake_batch(event, _deps(ledger, metrics))
    # Then the bad message is rejected and counted, never retried; the good one commits alone
    assert response == {"batchItemFailures": []}
    assert (report.rejected, report.inserted) == (1, 1)
    assert metrics.totals[Metric.INTAKE_REJECTED] == 1
    assert [(t, o) for t, o, _ in _rows(db_url)] == [("t1", "o1")]


def test_a_poison_number_is_rejected_alone_and_its_batch_mates_commit(
    ledger: Ledger, db_url: str
) -> None:
    # Given a batch whose first message holds an integer of 5,000 digits
    metrics = CountingSink()
    poison = '{"kind":"sweeper.hints","v":' + "9" * 5000 + "}"
    event = {
        "Records": [
            _record("poison", poison),
            _record("m1", _message(NewJob("t1", "o1", NOW))),
            _record("m2", _message(NewJob("t1", "o2", NOW))),
        ]
    }
    # When it is processed
    response, report = process_intake_batch(event, _deps(ledger, metrics))
    # Then that message is rejected and counted; the others commit; nothing comes back
    assert response == {"batchItemFailures": []}
    assert (report.rejected, report.inserted) == (1, 2)
    assert metrics.totals[Metric.INTAKE_REJECTED] == 1
    assert [r[1] for r in _rows(db_url)] == ["o1", "o2"]


@settings(
    max_examples=50, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    body=st.one_of(
        st.text(max_size=100),
        st.just('{"kind":"sweeper.hints","v":' + "9" * 5000 + "}"),
        st.fixed_dictionaries(
            {
                "tenant_id": st.text(max_size=8) | st.sampled_from([".", "..", " t"]),
                "object_id": st.text(max_size=8) | st.sampled_from([".", "..", "o\x00"]),
                "due_at": st.sampled_from(
                    [NOW.isoformat(), "0001-01-01T00:00:00+01:00", "2026-01-01T00:00:00"]
                ),
            }
        ).map(
            lambda hint: json.dumps(
                {
                    "kind": "sweeper.hints",
                    "v": 1,
                    "policy": "exports",
                    "source": "file",
                    "request_id": "r1",
                    "hints": [hint],
                }
            )
        ),
    )
)
def test_any_message_beside_a_valid_one_never_harms_it(
    ledger: Ledger, db_url: str, body: str
) -> None:
    # Given any body at all beside a valid message
    event = {
        "Records": [
            _record("any", body),
            _record("good", _message(NewJob("t-good", "o-good", NOW))),
        ]
    }
    # When the batch is processed, it never raises and never sends a record back
    response, report = process_intake_batch(event, _deps(ledger))
    assert response == {"batchItemFailures": []}
    assert report.rejected + (report.messages - report.rejected) == 2
    # Then the valid message's job is there, and every stored id obeys the id rule
    rows = _rows(db_url)
    assert ("t-good", "o-good") in {(t, o) for t, o, _ in rows}
    assert all(id_problem(t) is None and id_problem(o) is None for t, o, _ in rows)


# -- a ledger outage during an upsert --------------------------------------------------------

#: Well inside the intake queue's visibility timeout, well past a first return's delay.
BACK_WITHIN_SECONDS = LEDGER_RETURN_BASE_SECONDS + 4.0


@contextmanager
def ledger_outage(admin_url: str, db_url: str) -> Iterator[Callable[[], None]]:
    """Yields `cut`: end every ledger connection to the database of `db_url` and refuse new ones,
    as a restarting server does, until the block ends (the ledger is back)."""
    name = psycopg.conninfo.conninfo_to_dict(db_url)["dbname"]

    def allow(allowed: bool) -> None:
        with psycopg.connect(admin_url, autocommit=True) as admin:
            admin.execute(
                sql.SQL("ALTER DATABASE {} ALLOW_CONNECTIONS {}").format(
                    sql.Identifier(str(name)), sql.Literal(allowed)
                )
            )
            admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE application_name = 'sweeper' AND datname = %s AND NOT %s",
                (name, allowed),
            )

    try:
        yield lambda: allow(False)
    finally:
        allow(True)


def test_hints_that_meet_an_unreachable_ledger_come_back_in_seconds_and_commit_once(
    intake: tuple[IntakeResources, dict[str, str]],
    local_aws: LocalAws,
    db_url: str,
    pg_server: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Given two hint messages received from the intake queue by a warm intake function
    resources, env = intake
    publisher = SqsPublisher(local_aws.sqs(), resources.queue_url)
    send_hints(publisher, "exports", "file", [NewJob("t1", "o1", NOW)])
    send_hints(publisher, "exports", "file", [NewJob("t2", "o2", NOW)])
    sqs = local_aws.sqs()
    arn = sqs.get_queue_attributes(QueueUrl=resources.queue_url, AttributeNames=["QueueArn"])[
        "Attributes"
    ]["QueueArn"]
    received: list[Any] = []
    deadline = time.monotonic() + 15
    while len(received) < 2 and time.monotonic() < deadline:
        received += sqs.receive_message(
            QueueUrl=resources.queue_url,
            MaxNumberOfMessages=10,
            WaitTimeSeconds=1,
            AttributeNames=["All"],
        ).get("Messages", [])
    assert len(received) == 2
    ids = sorted(m["MessageId"] for m in received)
    handler = load_handler("intake")
    context = LocalLambdaContext("sweeper-intake", timeout_seconds=30)
    runtime.ledger().targets(["warm"])  # the connection is open, as in a warm environment
    real = schedule_jobs
    with ledger_outage(pg_server.admin_url, db_url) as cut:
        # When the ledger goes down as the batch is upserted (and stays down for the invocation)
        def upsert_during_outage(*args: Any, **kwargs: Any) -> Any:
            cut()
            return real(*args, **kwargs)

        monkeypatch.setattr(process, "schedule_jobs", upsert_during_outage)
        event = {"Records": [to_event_record(m, arn, env["AWS_REGION"]) for m in received]}
        response = handler(event, context)
        monkeypatch.setattr(process, "schedule_jobs", real)
    # Then both messages are returned, and nothing was written
    assert sorted(f["itemIdentifier"] for f in response["batchItemFailures"]) == ids
    assert _rows(db_url) == []
    # And they are visible again in seconds, not after the queue's visibility timeout
    back: dict[str, Any] = {}
    deadline = time.monotonic() + BACK_WITHIN_SECONDS
    while len(back) < 2 and time.monotonic() < deadline:
        found = sqs.receive_message(
            QueueUrl=resources.queue_url,
            MaxNumberOfMessages=10,
            WaitTimeSeconds=1,
            AttributeNames=["All"],
        ).get("Messages", [])
        back.update((m["MessageId"], m) for m in found)
    assert sorted(back) == ids, f"not back within {BACK_WITHIN_SECONDS} s"
    # When they are delivered again with the ledger back, each hint is upserted once
    again = {"Records": [to_event_record(m, arn, env["AWS_REGION"]) for m in back.values()]}
    assert handler(again, context) == {"batchItemFailures": []}
    assert [(t, o) for t, o, _ in _rows(db_url)] == [("t1", "o1"), ("t2", "o2")]

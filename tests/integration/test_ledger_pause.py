"""A ledger whose cluster may pause leaves no session open between runs: Aurora pauses only
after SecondsUntilAutoPause with no user connection, and a warm Lambda environment keeps its
cached ledger (and its session) between invocations. One that cannot pause keeps its session,
so a busy function does not reconnect for every batch."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import UTC, datetime

import boto3
import psycopg
import pytest

from functions.consumer import app as consumer_app
from sweeper import runtime
from sweeper.config import Policy, SweeperConfig, load_settings
from sweeper.endpoints import Endpoints
from sweeper.ledger.store import Ledger
from sweeper.models import JobMessage, JobStatus, NewJob
from sweeper.operator_api.backend import Backend
from sweeper.scheduling import schedule_jobs
from tests.conftest import Pipeline, load_event

pytestmark = pytest.mark.integration

T0 = datetime(2026, 12, 1, 2, 0, tzinfo=UTC)
POLICY = Policy(name="exports")
#: The application name every ledger session carries (sweeper.ledger.executor).
APPLICATION = "sweeper"
#: The sessions of the ledger's database that a sweeper ledger opened.
SESSIONS = """
SELECT count(*) FROM pg_stat_activity
 WHERE datname = current_database() AND application_name = %(app)s AND pid <> pg_backend_pid()
"""


#: How long a closed session's backend may take to leave pg_stat_activity (it exits after the
#: client's Terminate message, not before the client returns).
SETTLE_SECONDS = 5.0


def _count(db_url: str) -> int:
    with psycopg.connect(db_url, application_name="observer") as conn:
        found = conn.execute(SESSIONS, {"app": APPLICATION}).fetchone()
    assert found is not None
    return int(found[0])


def sessions(db_url: str, *, expect: int | None = None) -> int:
    """The ledger sessions the server holds; with `expect`, polled until it is reached or
    SETTLE_SECONDS pass (a closing backend leaves the view a moment after its client)."""
    deadline = time.monotonic() + SETTLE_SECONDS
    found = _count(db_url)
    while expect is not None and found != expect and time.monotonic() < deadline:
        found = _count(db_url)
    return found


def work(ledger: Ledger) -> None:
    """A run's ledger work: one upsert, as discovery or intake makes."""
    jobs = [NewJob("t1", "o1", T0)]
    ledger.schedule(POLICY.name, POLICY.version, lambda j: "s", jobs, T0)


def test_a_ledger_that_may_pause_closes_its_session_at_the_end_of_a_run(db_url: str) -> None:
    # Given a ledger of a cluster that may pause, which worked in a run
    ledger = Ledger(db_url, may_pause=True)
    work(ledger)
    assert sessions(db_url) == 1
    # When the run ends
    ledger.end_run()
    # Then no session of it is left for the cluster to see
    assert sessions(db_url, expect=0) == 0
    # And the next run connects again
    work(ledger)
    assert sessions(db_url) == 1
    ledger.close()


def test_a_ledger_that_cannot_pause_keeps_its_session_between_runs(db_url: str) -> None:
    # Given a ledger of a cluster with a minimum capacity (it never pauses)
    ledger = Ledger(db_url)
    work(ledger)
    # When the run ends
    ledger.end_run()
    # Then its session stays for the next run
    assert sessions(db_url) == 1
    ledger.close()


@pytest.fixture
def function_env(db_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """A ledger function's environment, its cached settings and ledger built afresh."""
    monkeypatch.setenv("SWEEPER_POLICY", POLICY.model_dump_json())
    monkeypatch.setenv("SWEEPER_DATABASE_URL", db_url)
    load_settings.cache_clear()
    runtime.ledger.cache_clear()
    yield
    if runtime.ledger.cache_info().currsize:
        runtime.ledger().close()
    load_settings.cache_clear()
    runtime.ledger.cache_clear()


@pytest.mark.parametrize("may_pause", ["1", "0"])
@pytest.mark.usefixtures("function_env")
def test_a_handler_ends_its_ledger_run_raising_or_not(
    db_url: str, monkeypatch: pytest.MonkeyPatch, may_pause: str
) -> None:
    # Given a function whose environment says whether its cluster may pause
    monkeypatch.setenv("SWEEPER_LEDGER_MAY_PAUSE", may_pause)

    @runtime.ends_ledger_run
    def handler(fail: bool) -> None:
        work(runtime.ledger())
        if fail:
            raise RuntimeError("the run failed after its ledger work")

    # When one invocation returns and the next raises
    expected = 0 if may_pause == "1" else 1
    handler(False)
    after_return = sessions(db_url, expect=expected)
    with pytest.raises(RuntimeError):
        handler(True)
    # Then the session is closed after each when the cluster may pause, and kept otherwise
    assert (after_return, sessions(db_url, expect=expected)) == (expected, expected)


@pytest.mark.usefixtures("function_env")
def test_a_handler_that_never_reached_the_ledger_builds_none_to_close(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Given a function whose cluster may pause, and a run that returns before the ledger
    monkeypatch.setenv("SWEEPER_LEDGER_MAY_PAUSE", "1")

    @runtime.ends_ledger_run
    def handler() -> str:
        return "not due"

    # When it ends, then no ledger was built just to be closed
    assert handler() == "not due"
    assert runtime.ledger.cache_info().currsize == 0


def test_the_consumer_handler_leaves_no_session_when_the_cluster_may_pause(
    pipeline: Pipeline, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a consumer whose cluster may pause, and the two jobs of the sample batch due
    monkeypatch.setenv("SWEEPER_LEDGER_MAY_PAUSE", "1")
    runtime.reset()
    event = load_event("sqs_batch.json")
    messages = [JobMessage.model_validate_json(r["body"]) for r in event["Records"]]
    now = datetime.now(UTC)
    jobs = [NewJob(m.tenant_id, m.object_id, now) for m in messages]
    schedule_jobs(pipeline.ledger, pipeline.policy, jobs, now)
    pipeline.ledger.close()
    # When Lambda invokes it with the batch
    response = consumer_app.handler(event, pipeline.lambda_context())
    # Then the jobs are settled and the warm environment keeps no session of the ledger
    assert response["batchItemFailures"] == []
    assert pipeline.ledger.counts("exports")[JobStatus.SUCCEEDED] == 2
    pipeline.ledger.close()
    assert sessions(pipeline.env["SWEEPER_DATABASE_URL"], expect=0) == 0


@pytest.mark.parametrize("may_pause", [True, False])
def test_the_operator_backend_ends_its_ledger_run_after_a_request(
    db_url: str, may_pause: bool
) -> None:
    # Given the operator API's backend, whose request worked on the ledger
    backend = Backend(
        config=SweeperConfig(policies=[POLICY]),
        endpoints=Endpoints("local", boto3.Session(), db_url),
        open_ledger=lambda: Ledger(db_url, may_pause=may_pause),
    )
    work(backend.ledger)
    # When the request ends
    backend.end_run()
    # Then its session is closed when the cluster may pause, and kept otherwise
    expected = 0 if may_pause else 1
    assert sessions(db_url, expect=expected) == expected
    backend.ledger.close()

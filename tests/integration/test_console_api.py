"""The console page's backend through the operator API (`sweeper console --stack S`): against
the local stack, every page read answers as the direct ledger backend does, an action is
recorded with the signed caller's ARN, and the read-only function serves the reads and refuses
the actions."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest
from click.testing import CliRunner

from sweeper.endpoints import Endpoints
from sweeper.errors import OperatorError
from sweeper.ledger.store import Ledger
from sweeper.models import JobStatus, NewJob, OutcomeClass
from sweeper.operator_api.service import serve
from sweeper.scheduling import schedule_jobs
from sweeper_cli import main
from sweeper_cli.webconsole.backend import ApiBackend, LedgerBackend, ledger_backend
from sweeper_local.operator_api import OperatorApiStandIn
from sweeper_tools.endpoints import resolve
from sweeper_tools.operator_client import (
    OPERATOR_URL_OUTPUT,
    READ_ONLY_URL_OUTPUT,
    OperatorApiClient,
)
from sweeper_tools.policy_file import load_config
from tests.conftest import PgServer
from tests.integration.conftest import StartConsole, module_console

pytestmark = pytest.mark.integration

CALLER = "arn:aws:iam::000000000000:user/testing"  # the local emulator's key, as signed
POLICY = "exports"
OPERATOR = "page-tester"


@dataclass
class Both:
    direct: LedgerBackend
    api: ApiBackend
    stand_in: OperatorApiStandIn
    endpoints: Endpoints
    ledger: Ledger
    db_url: str


def _client(endpoints: Endpoints, urls: dict[str, str]) -> OperatorApiClient:
    return OperatorApiClient.from_outputs(endpoints.session, urls)


def _seeded(stack_file: Path, db_url: str) -> Iterator[Both]:
    """A seeded local stack (its local file given), the page's direct backend over it, and its
    API backend through the stand-in of the two function URLs (SigV4-signed with the local
    emulator's key)."""
    config = load_config(json.loads(stack_file.read_text())["config"])
    ledger = Ledger(db_url)
    policy = config.policy(POLICY)
    now = datetime.now(UTC)
    later = now + timedelta(days=1)
    ledger.pause(POLICY, "setup", "nothing consumes", now)
    schedule_jobs(ledger, policy, [NewJob("t1", f"o{i}", later) for i in range(4)], now)
    schedule_jobs(ledger, policy, [NewJob("t2", f"x{i}", now) for i in range(3)], now)
    ledger.mark_failed(
        "exports:t2:x0:v1", OutcomeClass.PERMANENT, "http_400", now, count_attempt=True
    )
    ledger.mark_succeeded("exports:t2:x1:v1", OutcomeClass.ACCEPTED, now)
    endpoints = resolve(
        local_file=str(stack_file), database_url=None, region=None, profile=None, stack=None
    )
    direct = ledger_backend(endpoints, config, ledger, OPERATOR)
    stand_in = OperatorApiStandIn(stack_file).start()
    api = ApiBackend(_client(endpoints, stand_in.urls), direct.policies(), operator=CALLER)
    # One change recorded, so the overview's last actions are not empty
    direct.act(
        POLICY, "hold", key="exports:t1:o3:v1", tenant_id=None, reason="legal", until=None,
        dry_run=False,
    )  # fmt: skip
    try:
        yield Both(direct, api, stand_in, endpoints, ledger, db_url)
    finally:
        stand_in.stop()
        ledger.close()


@pytest.fixture
def both(start_console: StartConsole, db_url: str) -> Iterator[Both]:
    """A stack of this test's own, for a test that changes a job or a queue."""
    _, local_file = start_console()
    yield from _seeded(local_file, db_url)


@pytest.fixture(scope="module")
def reads(
    pg_server: PgServer, pg_template: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Both]:
    """One stack for the module's tests that only read it (starting one takes seconds); each
    of them shows that it changed nothing, or changes nothing by construction (a refused or
    dry-run request)."""
    with module_console(pg_server, pg_template, tmp_path_factory, "reads") as (local_file, db_url):
        yield from _seeded(local_file, db_url)


def _actions(db_url: str) -> list[tuple[str, str, str | None]]:
    with psycopg.connect(db_url) as conn:
        rows = conn.execute(
            "SELECT action, actor, reason FROM sweeper_operator_actions ORDER BY id"
        )
        return [(a, b, c) for a, b, c in rows]


def _without_clock(data: Any) -> Any:
    """The answer as the page receives it (JSON), less the one clock reading in it."""
    found = json.loads(json.dumps(data))
    if isinstance(found, dict):
        found.pop("oldest_eligible_age_seconds", None)
    return found


READS = {
    "overview": lambda b: b.overview(POLICY),
    "activity": lambda b: b.activity(POLICY),
    "search by tenant": lambda b: b.search(POLICY, "t2"),
    "search by key": lambda b: b.search(POLICY, "exports:t1:o3:v1"),
    "search for nothing": lambda b: b.search(POLICY, "nobody"),
    "job history": lambda b: b.job("exports:t1:o3:v1"),
    "no such job": lambda b: b.job("exports:t9:none:v1"),
    "policies": lambda b: b.policies(),
    "retry preview by key": lambda b: b.act(
        POLICY, "retry", key="exports:t2:x0:v1", tenant_id=None, reason=None, until=None,
        dry_run=True,
    ),
    "retry preview by tenant": lambda b: b.act(
        POLICY, "retry", key=None, tenant_id="t2", reason=None, until=None, dry_run=True
    ),
    "hold preview by tenant": lambda b: b.act(
        POLICY, "hold", key=None, tenant_id="t1", reason="x", until=None, dry_run=True
    ),
}  # fmt: skip


@pytest.mark.parametrize("read", list(READS))
def test_every_page_read_through_the_api_is_what_the_ledger_backend_reads(
    reads: Both, read: str
) -> None:
    # Given the same ledger behind both backends
    # When the page's read goes directly and through the operator API
    direct = _without_clock(READS[read](reads.direct))
    through = _without_clock(READS[read](reads.api))
    # Then the answers are the same, figure for figure
    assert through == direct
    assert direct not in (None, [], {}) or read in ("search for nothing", "no such job")


def test_the_overview_through_the_api_reads_the_queues_and_gates(both: Both) -> None:
    # Given a dead letter in the policy's DLQ
    where = both.endpoints.policy(POLICY)
    assert where.dlq_url
    both.endpoints.sqs().send_message(QueueUrl=where.dlq_url, MessageBody="{}")
    # When the page's overview comes through the API
    item = both.api.overview(POLICY)
    # Then it shows the DLQ's depth, the gates, the held job and the last action
    assert (item["queues_read"], item["gates_read"]) == (True, True)
    assert item["dlq"]["messages"] == 1
    assert item["counts"]["held"] == 1
    assert [a["action"] for a in item["actions"]][:1] == ["hold"]


def test_an_action_through_the_api_backend_is_recorded_with_the_callers_arn(both: Both) -> None:
    # Given a pending job and a failed one
    before = len(_actions(both.db_url))
    # When the page holds the first and retries the second through the API
    held = both.api.act(
        POLICY, "hold", key="exports:t1:o0:v1", tenant_id=None, reason="legal hold",
        until=None, dry_run=False,
    )  # fmt: skip
    retried = both.api.act(
        POLICY, "retry", key="exports:t2:x0:v1", tenant_id=None, reason="fixed",
        until=None, dry_run=False,
    )  # fmt: skip
    # Then both moved, as the page reports them
    assert held == {
        "policy": POLICY, "action": "hold", "dry_run": False, "moved": 1,
        "from_states": {"pending": 1},
    }  # fmt: skip
    assert retried["moved"] == 1
    job = both.ledger.get("exports:t1:o0:v1")
    assert job is not None
    assert job.status is JobStatus.HELD
    # And the ledger records the signed caller's ARN, never the page's own name for it
    assert _actions(both.db_url)[before:] == [
        ("hold", CALLER, "legal hold"),
        ("retry", CALLER, "fixed"),
    ]


def test_the_read_only_function_serves_the_page_reads_and_refuses_its_actions(
    reads: Both,
) -> None:
    # Given a backend whose every request goes to the read-only URL
    read_only = reads.stand_in.urls[READ_ONLY_URL_OUTPUT]
    reader = ApiBackend(
        _client(reads.endpoints, {READ_ONLY_URL_OUTPUT: read_only, OPERATOR_URL_OUTPUT: read_only}),
        reads.direct.policies(),
        operator=CALLER,
    )
    before = (_actions(reads.db_url), reads.ledger.counts(POLICY))
    # When it reads, the page's reads are served
    assert reader.overview(POLICY)["counts"] == reads.direct.overview(POLICY)["counts"]
    assert reader.search(POLICY, "t1") == reads.direct.search(POLICY, "t1")
    for body in (
        {"command": "overview", "policy": POLICY},
        {"command": "activity", "policy": POLICY},
        {"command": "search", "policy": POLICY, "query": "t1"},
        {"command": "job", "key": "exports:t1:o0:v1"},
    ):
        reply = serve(
            json.dumps(body), caller=CALLER, access="read", backend=reads.stand_in.backends["read"]
        )
        assert reply.outcome == "ok", reply.body
    # And every action is forbidden, and nothing moves
    for action in ("retry", "cancel", "hold", "unhold", "postpone"):
        with pytest.raises(OperatorError, match="read-only"):
            reader.act(
                POLICY, action, key="exports:t2:x0:v1", tenant_id=None, reason="r",
                until=datetime(2099, 1, 1, tzinfo=UTC), dry_run=False,
            )  # fmt: skip
    assert (_actions(reads.db_url), reads.ledger.counts(POLICY)) == before


@pytest.mark.parametrize(
    "body",
    [
        {"command": "overview", "policy": POLICY, "actor": "someone-else"},
        {"command": "overview"},
        {"command": "search", "policy": POLICY, "query": "q" * 1025},
        {"command": "search", "policy": POLICY, "query": "t1", "limit": 0},
        {"command": "job", "key": ""},
    ],
)
def test_a_page_read_outside_its_model_is_refused(reads: Both, body: dict[str, Any]) -> None:
    reply = serve(
        json.dumps(body), caller=CALLER, access="read", backend=reads.stand_in.backends["read"]
    )
    assert reply.outcome == "invalid"


def test_console_with_a_stack_goes_through_the_operator_api(start_console: StartConsole) -> None:
    # Given a local stack whose file names no operator API
    _, local_file = start_console()
    # When the console is asked for the stack without a database URL
    result = CliRunner().invoke(
        main,
        ["console", "--stack", "Sweeper", "--local-file", str(local_file)],
        env={"DATABASE_URL": "", "SWEEPER_DATABASE_URL": ""},
    )
    # Then it goes to the operator API (never the ledger), and says in one line what is missing
    assert result.exit_code == 1
    assert result.output.strip() == (
        "Error: OperatorError: the stack has no operator API (output OperatorApiReadOnlyUrl): "
        "deploy this version, or use --database-url"
    )

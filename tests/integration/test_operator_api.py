"""The operator API against the local stack: every console command through the API (the CLI's
`--stack`, SigV4 to a loopback stand-in of the function URL, the function's own logic) and
directly, alike; the read-only function changes nothing; a bad request runs nothing."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest
from click.testing import CliRunner

from sweeper.ledger.store import Ledger
from sweeper.models import JobStatus, NewJob, OutcomeClass
from sweeper.operator_api.service import serve
from sweeper.scheduling import schedule_jobs
from sweeper_cli import main
from sweeper_local.operator_api import OperatorApiStandIn
from sweeper_tools.policy_file import load_config
from tests.conftest import PgServer
from tests.integration.conftest import StartConsole, module_console

pytestmark = pytest.mark.integration

CALLER = "arn:aws:iam::000000000000:user/testing"  # the local emulator's key, as signed


@pytest.fixture
def api(start_console: StartConsole, tmp_path: Path) -> Iterator[tuple[Path, Path]]:
    """(the local stack's file: direct; a file naming the API stand-in: through the API)."""
    _, local_file = start_console()
    stand_in = OperatorApiStandIn(local_file).start()
    yield local_file, stand_in.write_local_file(tmp_path / "through-api.json")
    stand_in.stop()


@pytest.fixture(scope="module")
def refusals(
    pg_server: PgServer, pg_template: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Path, Path, str]]:
    """One stack for the tests whose requests are refused (starting one takes seconds): each
    shows that its request changed nothing. (direct file, through-the-API file, database)"""
    with module_console(pg_server, pg_template, tmp_path_factory, "refusals") as (direct, db_url):
        stand_in = OperatorApiStandIn(direct).start()
        try:
            yield direct, stand_in.write_local_file(direct.parent / "through-api.json"), db_url
        finally:
            stand_in.stop()


def sweeper(local_file: Path, *args: str, api: bool = False, code: int = 0) -> Any:
    stack = ["--stack", "Sweeper"] if api else []
    result = CliRunner().invoke(main, [*args, "--local-file", str(local_file), *stack, "--json"])
    assert result.exit_code == code, result.output
    return json.loads(result.output) if code == 0 else result.output


def actions(db_url: str) -> list[tuple[str, str, str | None]]:
    with psycopg.connect(db_url) as conn:
        rows = conn.execute(
            "SELECT action, actor, reason FROM sweeper_operator_actions ORDER BY id"
        )
        return [(a, b, c) for a, b, c in rows]


def seed(db_url: str, local_file: Path) -> Ledger:
    """Paused (nothing consumes), six jobs due in a day, one terminal, one old settled."""

    ledger = Ledger(db_url)
    policy = load_config(json.loads(local_file.read_text())["config"]).policy("exports")
    later = datetime.now(UTC) + timedelta(days=1)
    long_ago = datetime.now(UTC) - timedelta(days=40)
    ledger.pause("exports", "setup", None, datetime.now(UTC))
    schedule_jobs(ledger, policy, [NewJob("t1", f"o{i}", later) for i in range(6)], long_ago)
    schedule_jobs(ledger, policy, [NewJob("t2", f"x{i}", long_ago) for i in range(2)], long_ago)
    ledger.mark_failed(
        "exports:t2:x0:v1", OutcomeClass.PERMANENT, "http_400", long_ago, count_attempt=True
    )
    ledger.mark_succeeded("exports:t2:x1:v1", OutcomeClass.ACCEPTED, long_ago)
    return ledger


READS = [
    ("status",),
    ("runs", "--since", "2026-01-01T00:00:00Z"),
    ("inspect",),
]


def test_every_read_command_answers_the_same_through_the_api_and_directly(
    api: tuple[Path, Path], db_url: str
) -> None:
    # Given a ledger with pending, held, terminal and settled jobs
    direct, through = api
    ledger = seed(db_url, direct)
    sweeper(direct, "hold", "--key", "exports:t1:o5:v1", "--reason", "legal")
    for command in READS:
        # When each read command runs both ways
        mine = sweeper(direct, *command)
        theirs = sweeper(through, *command, api=True)
        # Then the answers are the same, figure for figure
        if command[0] == "status":
            for item in (*mine["policies"], *theirs["policies"]):
                item.pop("oldest_eligible_age_seconds")  # a clock reading
        assert theirs == mine, command
    ledger.close()


def test_every_change_command_works_through_the_api_and_records_the_iam_caller(
    api: tuple[Path, Path], db_url: str
) -> None:
    # Given the same ledger
    direct, through = api
    ledger = seed(db_url, direct)
    k = [f"exports:t1:o{i}:v1" for i in range(6)]
    soon = (datetime.now(UTC) + timedelta(days=30)).isoformat()
    before = len(actions(db_url))
    # When every change command goes through the API (and, where it can be, directly too)
    pairs = [
        (
            ("hold", "--key", k[0], "--reason", "legal"),
            ("hold", "--key", k[1], "--reason", "legal"),
        ),
        (("unhold", "--key", k[0]), ("unhold", "--key", k[1])),
        (
            ("postpone", "--key", k[2], "--until", soon, "--reason", "freeze"),
            ("postpone", "--key", k[3], "--until", soon, "--reason", "freeze"),
        ),
        (
            ("cancel", "--key", k[4], "--reason", "gone"),
            ("cancel", "--key", k[5], "--reason", "gone"),
        ),
    ]
    for via_api, direct_args in pairs:
        theirs = sweeper(through, *via_api, api=True)
        mine = sweeper(direct, *direct_args)
        # Then each answers as the direct path does, for its own key
        assert {**theirs, "keys": []} == {**mine, "keys": []}
        assert theirs["moved"] == 1
    retried = sweeper(through, "retry", "--outcome", "permanent", "--reason", "fixed", api=True)
    assert retried == {"policy": "exports", "retried": 1, "keys": ["exports:t2:x0:v1"]}
    resumed = sweeper(through, "resume", "--reason", "done", api=True)
    assert resumed["paused"] is False
    since = (datetime.now(UTC) - timedelta(minutes=5)).isoformat()
    caught = sweeper(through, "catch-up", "--since", since, "--dry-run", api=True)
    assert caught["dry_run"] is True
    assert caught["policy"] == "exports"
    drove = sweeper(through, "redrive", "--dry-run", api=True)
    assert drove["dry_run"] is True
    assert drove["errors"] == 0
    pruned = sweeper(through, "prune", "--older-than-days", "30", "--reason", "quarterly", api=True)
    assert pruned["jobs_deleted"] == 1
    released = sweeper(through, "release", api=True)
    assert released["batch_id"].startswith("release-")
    paused = sweeper(through, "pause", "--reason", "again", api=True)
    assert paused["paused"] is True
    refused = sweeper(through, "release", api=True, code=1)
    assert refused.startswith("Error: OperatorError: policy exports is paused")
    # And the ledger records the IAM principal (never --actor) and the reason of each
    recorded = actions(db_url)[before:]
    through_api = [(a, r) for a, who, r in recorded if who == CALLER]
    assert through_api == [
        ("hold", "legal"),
        ("unhold", None),
        ("postpone", "freeze"),
        ("cancel", "gone"),
        ("retry", "fixed"),
        ("resume", "done"),
        ("prune", "quarterly"),
        ("release", None),
        ("pause", "again"),
    ]
    assert ledger.counts("exports")[JobStatus.CANCELLED] == 2
    ledger.close()


def test_the_read_only_function_refuses_every_change_and_changes_nothing(
    api: tuple[Path, Path], db_url: str
) -> None:
    # Given the stand-in's backend and a seeded ledger
    direct, _ = api
    ledger = seed(db_url, direct)
    stand_in = OperatorApiStandIn(direct)
    key = "exports:t1:o0:v1"
    changes = [
        {"command": "cancel", "keys": [key], "reason": "x"},
        {"command": "hold", "keys": [key], "reason": "x"},
        {"command": "unhold", "keys": [key]},
        {"command": "postpone", "keys": [key], "until": "2099-01-01T00:00:00Z", "reason": "x"},
        {"command": "retry", "outcomes": ["permanent"]},
        {"command": "redrive"},
        {"command": "pause"},
        {"command": "resume"},
        {"command": "release"},
        {"command": "catch-up", "since": "2026-01-01T00:00:00Z"},
        {"command": "prune", "older_than_days": 30, "reason": "x"},
    ]
    before = (actions(db_url), ledger.counts("exports"))
    for body in changes:
        # When a read-only principal asks for it
        reply = serve(
            json.dumps(body), caller=CALLER, access="read", backend=stand_in.backends["read"]
        )
        # Then it is forbidden, and nothing ran
        assert (reply.outcome, reply.status_code) == ("forbidden", 403), body
    assert (actions(db_url), ledger.counts("exports")) == before
    # And the reads it may make are served
    for command in ("status", "inspect"):
        reply = serve(
            json.dumps({"command": command}),
            caller=CALLER,
            access="read",
            backend=stand_in.backends["read"],
        )
        assert reply.outcome == "ok", reply.body
    ledger.close()


@pytest.mark.parametrize(
    ("body", "caller", "outcome"),
    [
        ('{"command": "status", "actor": "someone-else"}', CALLER, "invalid"),
        ('{"command": "drop-table"}', CALLER, "invalid"),
        ('{"command": "cancel", "keys": ["k"], "reason": "x", "limit": 0}', CALLER, "invalid"),
        ("[1, 2]", CALLER, "invalid"),
        ("not json", CALLER, "invalid"),
        ('{"command": "status"}', None, "forbidden"),
        ('{"command": "status"}', "someone", "forbidden"),
        ('{"command": "status"}', "arn:aws:sts::1:assumed-role/R/" + "s" * 2048, "forbidden"),
    ],
)
def test_anything_but_a_valid_request_from_an_iam_caller_is_refused_and_nothing_runs(
    refusals: tuple[Path, Path, str], body: str, caller: str | None, outcome: str
) -> None:
    direct, _, db_url = refusals
    stand_in = OperatorApiStandIn(direct)
    before = actions(db_url)
    reply = serve(body, caller=caller, access="operate", backend=stand_in.backend)
    assert reply.outcome == outcome
    assert reply.body["ok"] is False
    assert "someone-else" not in reply.json()
    assert actions(db_url) == before


def test_an_unsigned_request_never_reaches_the_function(
    refusals: tuple[Path, Path, str],
) -> None:
    import urllib3

    _, through, _ = refusals
    url = json.loads(through.read_text())["operator_api"]["OperatorApiUrl"]
    response = urllib3.request("POST", url, body=b'{"command": "status"}')
    assert response.status == 403
    assert json.loads(response.data) == {"Message": "Forbidden"}


def test_a_long_principal_arn_is_recorded_whole(api: tuple[Path, Path], db_url: str) -> None:
    # Given a caller whose role session name makes its ARN longer than 128 characters
    direct, _ = api
    stand_in = OperatorApiStandIn(direct)
    caller = "arn:aws:sts::111122223333:assumed-role/Operator/" + "s" * 300
    before = len(actions(db_url))
    # When it pauses and resumes a policy through the API
    for command in ("pause", "resume"):
        body = json.dumps({"command": command, "policy": "exports", "reason": "drill"})
        reply = serve(body, caller=caller, access="operate", backend=stand_in.backend)
        assert reply.outcome == "ok", reply.body
    # Then the ledger records its whole ARN (migration 0012), never a cut one
    assert [who for _, who, _ in actions(db_url)[before:]] == [caller, caller]

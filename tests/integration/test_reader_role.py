"""The reader role (migration 0014): the read-only operator API's login reads, and changes nothing.

Against the real local PostgreSQL, connected as a login user that `ensure_login` makes,
as the migrations function does on AWS for the reader's own secret.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator

import psycopg
import pytest
from psycopg import sql

from sweeper.errors import LedgerError
from sweeper.ledger.roles import APP_ROLE, READER_ROLE, ensure_login
from sweeper.operator_api.requests import READ_COMMANDS
from sweeper.operator_api.service import serve
from sweeper_local.operator_api import OperatorApiStandIn
from tests.integration.conftest import StartConsole
from tests.integration.test_app_role import as_user, assert_refused, grants_of
from tests.integration.test_operator_api import CALLER, seed

pytestmark = pytest.mark.integration

#: What the read commands read (migration 0014 grants SELECT on these, 0015 on the actions'
#: steps, and nothing else).
READ_TABLES = {
    "sweeper_jobs",
    "sweeper_runs",
    "sweeper_policy_state",
    "sweeper_operator_actions",
    "sweeper_operator_action_steps",
    "sweeper_job_events",
    "sweeper_discovery_runs",
}


def _drop(db_url: str, name: str) -> None:
    with psycopg.connect(db_url, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(name)))


@pytest.fixture
def reader_url(db_url: str) -> Iterator[str]:
    """A reader login made as on AWS (roles are per server: a name of its own, dropped after)."""
    name = f"sweeper_reader_t{uuid.uuid4().hex[:8]}"
    assert ensure_login(db_url, name, "generated-password", READER_ROLE) is True
    yield as_user(db_url, name)
    _drop(db_url, name)


def test_the_reader_can_select_every_table_the_read_commands_read(reader_url: str) -> None:
    with psycopg.connect(reader_url, autocommit=True) as conn:
        for table in sorted(READ_TABLES):
            statement = sql.SQL("SELECT count(*) FROM {}").format(sql.Identifier(table))
            assert conn.execute(statement).fetchone() is not None, table


@pytest.mark.parametrize(
    "statement",
    [
        "INSERT INTO sweeper_operator_actions (policy, action, actor, at) "
        "VALUES ('exports', 'pause', 'intruder', now())",
        "UPDATE sweeper_jobs SET status = 'cancelled'",
        "DELETE FROM sweeper_jobs",
        "UPDATE sweeper_policy_state SET paused = false",
        "DELETE FROM sweeper_operator_actions",
        "INSERT INTO sweeper_runs (batch_id) VALUES ('x')",
        "TRUNCATE sweeper_job_events",
        "SELECT * FROM sweeper_discovery_cursors",
        "CREATE TABLE sweeper_intruder (id int)",
    ],
)
def test_the_reader_is_refused_every_change(reader_url: str, statement: str) -> None:
    assert_refused(reader_url, statement)


def test_the_reader_role_holds_select_on_the_read_tables_only(db_url: str) -> None:
    tables, privileges, role = grants_of(db_url, READER_ROLE)
    assert tables == READ_TABLES
    assert privileges == {"SELECT"}
    assert role == (False, False, False, False)


def test_every_read_command_runs_as_the_reader(start_console: StartConsole, db_url: str) -> None:
    # Given a ledger with jobs, runs, operator actions and job events
    _, local_file = start_console()
    ledger = seed(db_url, local_file)
    stand_in = OperatorApiStandIn(local_file)
    hold = {"command": "hold", "keys": ["exports:t1:o5:v1"], "reason": "legal"}
    held = serve(
        json.dumps(hold), caller=CALLER, access="operate", backend=stand_in.backends["operate"]
    )
    assert held.outcome == "ok", held.body
    read = stand_in.backends["read"]
    bodies = [
        {"command": "status"},
        {"command": "runs", "since": "2026-01-01T00:00:00Z", "policy": "exports"},
        {"command": "inspect", "policy": "exports"},
        {"command": "overview", "policy": "exports"},
        {"command": "activity", "policy": "exports"},
        {"command": "search", "policy": "exports", "query": "t1"},
        {"command": "job", "key": "exports:t1:o5:v1"},
        {"command": "limits-show", "policy": "exports"},
    ]
    assert {body["command"] for body in bodies} == READ_COMMANDS
    for body in bodies:
        # When the read-only path serves it
        reply = serve(json.dumps(body), caller=CALLER, access="read", backend=read)
        # Then it is answered, as the reader role
        assert reply.outcome == "ok", (body, reply.body)
    (who,) = read.ledger._execute("SELECT current_user", {})
    assert who[0] == READER_ROLE
    ledger.close()


def test_a_login_of_one_role_is_never_made_a_member_of_the_other(db_url: str) -> None:
    # Given an application user
    name = f"sweeper_app_t{uuid.uuid4().hex[:8]}"
    ensure_login(db_url, name, "generated-password", APP_ROLE)
    try:
        # When the reader's secret names it, it is refused (the reader would hold DML)
        with pytest.raises(LedgerError, match=APP_ROLE):
            ensure_login(db_url, name, "generated-password", READER_ROLE)
        with psycopg.connect(db_url) as conn:
            member = conn.execute(
                "SELECT pg_has_role(%s, %s, 'MEMBER')", (name, READER_ROLE)
            ).fetchone()
        assert member == (False,)
    finally:
        _drop(db_url, name)


def test_the_local_stand_in_reads_as_the_reader(start_console: StartConsole) -> None:
    _, local_file = start_console()
    stand_in = OperatorApiStandIn(local_file)
    read, operate = stand_in.backends["read"], stand_in.backends["operate"]
    (reader,) = read.ledger._execute("SELECT current_user", {})
    (operator,) = operate.ledger._execute("SELECT current_user", {})
    assert reader[0] == READER_ROLE
    assert operator[0] != READER_ROLE

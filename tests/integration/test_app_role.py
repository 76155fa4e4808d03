"""The application role (migration 0004): the functions' DML works, DDL does not.

Against the real local PostgreSQL, connected as a login user that `ensure_login` makes, as
the migrations function does on AWS. (The local server trusts every local login, so the password
itself is not checked here; the role's rights are.)
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest
from psycopg import errors, sql

from sweeper.errors import LedgerError
from sweeper.ledger.roles import APP_ROLE, ensure_login
from sweeper.ledger.store import Ledger
from sweeper.models import JobStatus, NewJob, OutcomeClass

pytestmark = pytest.mark.integration

T0 = datetime(2026, 12, 1, 2, 0, tzinfo=UTC)
LEASE = timedelta(seconds=60)


def as_user(db_url: str, user: str) -> str:
    info = psycopg.conninfo.conninfo_to_dict(db_url)
    info["user"] = user
    return psycopg.conninfo.make_conninfo(**info)  # type: ignore[arg-type]


def assert_refused(url: str, statement: str) -> None:
    """The statement, run as the URL's user, is refused for want of a privilege."""
    with (
        psycopg.connect(url, autocommit=True) as conn,
        pytest.raises(errors.InsufficientPrivilege),
    ):
        conn.execute(statement.encode())


def grants_of(db_url: str, role: str) -> tuple[set[str], set[str], Any]:
    """The tables a role holds privileges on, which privileges, and its role attributes
    (login, create role, create database, superuser)."""
    with psycopg.connect(db_url) as conn:
        rows = conn.execute(
            "SELECT table_name, privilege_type FROM information_schema.role_table_grants "
            "WHERE grantee = %s",
            (role,),
        ).fetchall()
        attributes = conn.execute(
            "SELECT rolcanlogin, rolcreaterole, rolcreatedb, rolsuper FROM pg_roles "
            "WHERE rolname = %s",
            (role,),
        ).fetchone()
    return {table for table, _ in rows}, {privilege for _, privilege in rows}, attributes


@pytest.fixture
def app_user(db_url: str) -> Iterator[str]:
    """A login user made as on AWS (roles are per server: a name of its own, dropped after)."""
    name = f"sweeper_app_t{uuid.uuid4().hex[:8]}"
    assert ensure_login(db_url, name, "generated-password", APP_ROLE) is True
    yield name
    with psycopg.connect(db_url, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(name)))


@pytest.fixture
def app_url(db_url: str, app_user: str) -> str:
    return as_user(db_url, app_user)


@pytest.fixture
def app_ledger(app_url: str) -> Iterator[Ledger]:
    ledger = Ledger(app_url)
    yield ledger
    ledger.close()


def test_the_app_user_does_what_the_functions_and_operators_do(app_ledger: Ledger) -> None:
    # Given the ledger reached as the application user
    ledger = app_ledger
    # When it schedules, runs a producer's claim, settles, pauses, retries and prunes
    jobs = [NewJob("t", f"o{i}", T0) for i in range(3)]
    assert ledger.schedule("exports", 1, lambda j: "exports", jobs, T0).inserted == 3
    run = ledger.start_run("exports", T0, "batch-1", T0)
    claimed = ledger.claim("exports", run.batch_id, T0, LEASE, 10)
    assert len(claimed) == 3
    ledger.finish_run(
        run.batch_id,
        T0,
        reclaimed=0,
        discovered=3,
        published=3,
        publish_failures=0,
        oldest_age_seconds=0.0,
        stop_reason="drained",
    )
    assert ledger.mark_succeeded(claimed[0].operation_key, OutcomeClass.ACCEPTED, T0)
    assert ledger.mark_failed(
        claimed[1].operation_key, OutcomeClass.PERMANENT, "http_422", T0, count_attempt=True
    )
    assert ledger.jobs_for_redrive([claimed[2].operation_key])
    assert ledger.pause("exports", "ops", "drill", T0)
    assert ledger.resume("exports", "ops", "drill over", T0)
    assert ledger.retry_failed("exports", "ops", T0) == [claimed[1].operation_key]
    assert ledger.prune_settled_batch(T0 + timedelta(days=1), 100)[0] == 1
    assert ledger.prune_runs_batch(T0 + timedelta(days=1), 100) == 1
    # Then every table was read and written, as the statements intend
    counts = ledger.counts("exports")
    assert (counts[JobStatus.PENDING], counts[JobStatus.LEASED]) == (1, 1)
    assert counts[JobStatus.SUCCEEDED] == counts[JobStatus.FAILED] == 0


@pytest.mark.parametrize(
    "statement",
    [
        "CREATE TABLE sweeper_intruder (id int)",
        "DROP TABLE sweeper_jobs",
        "ALTER TABLE sweeper_jobs ADD COLUMN note text",
        "CREATE INDEX sweeper_jobs_intruder ON sweeper_jobs (tenant_id)",
        "TRUNCATE sweeper_jobs",
        "CREATE SCHEMA intruder",
        "DROP TABLE sweeper_schema_version",
        "INSERT INTO sweeper_schema_version (version, name, checksum) VALUES (99, 'x', 'x')",
        "CREATE ROLE sweeper_intruder LOGIN",
    ],
)
def test_the_app_user_cannot_change_the_schema(app_url: str, statement: str) -> None:
    assert_refused(app_url, statement)


def test_the_role_holds_data_rights_on_sweeper_tables_only(db_url: str) -> None:
    tables, privileges, role = grants_of(db_url, APP_ROLE)
    assert tables == {
        "sweeper_jobs",
        "sweeper_runs",
        "sweeper_policy_state",
        "sweeper_operator_actions",
        "sweeper_job_events",
        "sweeper_discovery_cursors",  # migration 0006: discovery
        "sweeper_discovery_runs",
        "sweeper_operator_action_steps",  # migration 0015: a long action's steps
    }
    assert privileges == {"SELECT", "INSERT", "UPDATE", "DELETE"}
    assert role == (False, False, False, False)


def test_a_table_a_later_migration_adds_is_granted_too(db_url: str, app_url: str) -> None:
    # Given a new table created by the migrating user, as a later migration would
    with psycopg.connect(db_url, autocommit=True) as conn:
        conn.execute("CREATE TABLE sweeper_later (id bigint GENERATED ALWAYS AS IDENTITY, v text)")
    # Then the application user can use it at once
    with psycopg.connect(app_url, autocommit=True) as conn:
        conn.execute("INSERT INTO sweeper_later (v) VALUES ('x')")
        assert conn.execute("SELECT count(*) FROM sweeper_later").fetchone() == (1,)


def test_ensuring_the_login_again_keeps_it_and_refuses_the_migrating_user(
    db_url: str, app_user: str
) -> None:
    assert ensure_login(db_url, app_user, "rotated-password", APP_ROLE) is False
    with psycopg.connect(db_url) as conn:
        member = conn.execute(
            "SELECT pg_has_role(%s, %s, 'MEMBER')", (app_user, APP_ROLE)
        ).fetchone()
        me = conn.execute("SELECT current_user").fetchone()
    assert member == (True,)
    assert me is not None
    with pytest.raises(LedgerError, match="migrating user itself"):
        ensure_login(db_url, me[0], "anything", APP_ROLE)

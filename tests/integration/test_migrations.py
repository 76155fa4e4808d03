"""Migrations: applied in order, recorded, safe to run twice at once, as the code expects."""

from __future__ import annotations

import dataclasses
import threading

import psycopg
import pytest

from sweeper.errors import MigrationError
from sweeper.ledger.migrate import load_migrations, migrate
from sweeper.models import Job, JobStatus, OutcomeClass
from sweeper_cli.maintenance import current_version

pytestmark = pytest.mark.integration


def test_migrate_applies_every_file_once_and_records_it(fresh_db_url: str) -> None:
    # Given an empty database
    # When migrating twice
    first = migrate(fresh_db_url)
    second = migrate(fresh_db_url)
    # Then every file was applied the first time only, and the version is recorded
    assert first == [m.version for m in load_migrations()]
    assert second == []
    assert current_version(fresh_db_url) == len(first)


def test_two_concurrent_migrations_apply_each_file_once(fresh_db_url: str) -> None:
    results: list[list[int]] = []
    errors: list[BaseException] = []

    def run() -> None:
        try:
            results.append(migrate(fresh_db_url))
        except BaseException as exc:  # collected and asserted below
            errors.append(exc)

    threads = [threading.Thread(target=run) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert sorted(len(r) for r in results) == [0, len(load_migrations())]


def test_schema_has_the_columns_the_job_row_expects(db_url: str) -> None:
    with psycopg.connect(db_url) as conn:
        columns = [
            row[0]
            for row in conn.execute(
                "SELECT column_name FROM information_schema.columns "
                "WHERE table_name = 'sweeper_jobs' ORDER BY ordinal_position"
            )
        ]
    assert columns == [f.name for f in dataclasses.fields(Job)]


def test_schema_checks_allow_exactly_the_code_states_and_outcomes(db_url: str) -> None:
    with psycopg.connect(db_url) as conn:
        defs = " ".join(
            row[0]
            for row in conn.execute(
                "SELECT pg_get_constraintdef(oid) FROM pg_constraint "
                "WHERE conrelid = 'sweeper_jobs'::regclass AND contype = 'c'"
            )
        )
    for status in JobStatus:
        assert f"'{status.value}'::text" in defs
    for outcome in OutcomeClass:
        assert f"'{outcome.value}'::text" in defs


def test_claim_indexes_are_partial_on_status(db_url: str) -> None:
    with psycopg.connect(db_url) as conn:
        indexes: dict[str, str] = dict(
            conn.execute(
                "SELECT indexname, indexdef FROM pg_indexes WHERE tablename = 'sweeper_jobs'"
            ).fetchall()
        )
    assert "WHERE (status = 'pending'::text)" in indexes["sweeper_jobs_pending_due"]
    assert "WHERE (status = 'leased'::text)" in indexes["sweeper_jobs_leased_expiry"]


def test_a_changed_applied_migration_is_refused(db_url: str) -> None:
    with psycopg.connect(db_url, autocommit=True) as conn:
        conn.execute("UPDATE sweeper_schema_version SET checksum = 'tampered' WHERE version = 1")
    with pytest.raises(MigrationError, match="changed after it was applied"):
        migrate(db_url)

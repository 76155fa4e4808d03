"""Numbered SQL migrations, applied in order under an advisory lock, recorded with checksums."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from importlib import resources

import psycopg
from psycopg.rows import TupleRow

from sweeper.errors import LedgerError, MigrationError
from sweeper.ledger.store import connect_failure
from sweeper.redaction import describe_target

#: Held for the whole migrating transaction, so two `sweeper migrate` (or a deploy and a
#: developer) never apply the same file twice. The value is arbitrary but fixed forever.
MIGRATION_LOCK_KEY = 7_311_117_029_516_041_001

_FILE_RE = re.compile(r"^(\d{4})_([a-z0-9_]+)\.sql$")

CREATE_VERSION_TABLE = """
CREATE TABLE IF NOT EXISTS sweeper_schema_version (
    version    integer     PRIMARY KEY,
    name       text        NOT NULL,
    checksum   text        NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
)
"""
SELECT_APPLIED = "SELECT version, name, checksum FROM sweeper_schema_version ORDER BY version"
INSERT_APPLIED = "INSERT INTO sweeper_schema_version (version, name, checksum) VALUES (%s, %s, %s)"


@dataclass(frozen=True, slots=True)
class Migration:
    version: int
    name: str
    sql: str

    @property
    def checksum(self) -> str:
        return hashlib.sha256(self.sql.encode()).hexdigest()


def load_migrations() -> list[Migration]:
    """The migration files shipped in the package, checked to be numbered 1, 2, 3 … with no gap."""
    folder = resources.files("sweeper.ledger").joinpath("migrations")
    found: list[Migration] = []
    for entry in folder.iterdir():
        match = _FILE_RE.match(entry.name)
        if match is None:
            continue
        found.append(Migration(int(match[1]), match[2], entry.read_text(encoding="utf-8")))
    found.sort(key=lambda m: m.version)
    expected = list(range(1, len(found) + 1))
    if [m.version for m in found] != expected:
        raise MigrationError(
            f"migrations must be numbered 1..n without gaps, found {[m.version for m in found]}"
        )
    return found


def migrate(conninfo: str) -> list[int]:
    """Apply every pending migration in one transaction; return the versions applied now."""
    migrations = load_migrations()
    with connect(conninfo, autocommit=True) as conn, conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK_KEY,))
        conn.execute(CREATE_VERSION_TABLE)
        applied = {row[0]: (row[1], row[2]) for row in conn.execute(SELECT_APPLIED)}
        for migration in migrations:
            if migration.version in applied and applied[migration.version][1] != migration.checksum:
                raise MigrationError(
                    f"migration {migration.version:04d}_{migration.name} was changed after it "
                    "was applied; add a new migration instead"
                )
        unknown = sorted(set(applied) - {m.version for m in migrations})
        if unknown:
            raise MigrationError(f"the database has migrations this code does not know: {unknown}")
        done: list[int] = []
        for migration in migrations:
            if migration.version in applied:
                continue
            try:
                conn.execute(migration.sql.encode())  # no parameters: several statements allowed
            except psycopg.Error as exc:
                raise MigrationError(
                    f"migration {migration.version:04d}_{migration.name} failed: {exc}"
                ) from exc
            conn.execute(INSERT_APPLIED, (migration.version, migration.name, migration.checksum))
            done.append(migration.version)
        return done


def connect(conninfo: str, *, autocommit: bool = False) -> psycopg.Connection[TupleRow]:
    """A connection, or a LedgerError saying where and why, without the credentials."""
    try:
        return psycopg.connect(conninfo, autocommit=autocommit, application_name="sweeper")
    except psycopg.Error as exc:
        raise LedgerError(connect_failure(exc, describe_target(conninfo))) from exc

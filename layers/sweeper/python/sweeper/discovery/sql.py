"""The sql source: a read-only, parameterised query against a system-of-record PostgreSQL.

The operator's query (`discovery.query`, one SELECT returning tenant_id, object_id, due_at) is
wrapped as a subquery and paged by keyset on (due_at, tenant_id, object_id): a total order, so
rows with equal due times are neither skipped nor read twice at a page boundary, whatever the
page size. The cursor is the last row's three keys as PostgreSQL renders them as text; they are
passed back untyped, so PostgreSQL compares them in the columns' own types (a text column pages
by text order, a timestamptz column by time). Rows with a NULL key have no place in that order:
the pass counts them once, by a separate query, and never reads them as rows.

The session is read-only (`default_transaction_read_only`), in UTC with ISO dates (so the cursor
renders the same way every time) and under a statement timeout. The connection is the source's
own, from its own secret: never the ledger's.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any, LiteralString

import psycopg
from psycopg import sql
from psycopg.conninfo import make_conninfo
from psycopg.rows import TupleRow

from sweeper.config import SqlDiscovery
from sweeper.discovery.rows import Cursor, Page, Rejected, SourceRow
from sweeper.errors import DiscoverySourceError
from sweeper.redaction import describe_target

# The first page of a pass. Parameters of the operator's query keep their own names; sweeper's
# are prefixed so they cannot clash.
_FIRST_PAGE: LiteralString = """
SELECT s.tenant_id::text, s.object_id::text, s.due_at::text{param_columns}
FROM ({query}) AS s
WHERE s.due_at IS NOT NULL AND s.tenant_id IS NOT NULL AND s.object_id IS NOT NULL
ORDER BY s.due_at, s.tenant_id, s.object_id
LIMIT %(sweeper_limit)s
"""

# Every later page: strictly after the cursor in the total order (a row comparison, so an index
# on (due_at, tenant_id, object_id) in the source serves it as a range scan).
_NEXT_PAGE: LiteralString = """
SELECT s.tenant_id::text, s.object_id::text, s.due_at::text{param_columns}
FROM ({query}) AS s
WHERE s.due_at IS NOT NULL AND s.tenant_id IS NOT NULL AND s.object_id IS NOT NULL
  AND (s.due_at, s.tenant_id, s.object_id)
      > (%(sweeper_due)s, %(sweeper_tenant)s, %(sweeper_object)s)
ORDER BY s.due_at, s.tenant_id, s.object_id
LIMIT %(sweeper_limit)s
"""

# Rows the keyset cannot reach: counted once per pass, never read.
_NULL_KEYS: LiteralString = """
SELECT count(*) FILTER (WHERE s.tenant_id IS NULL),
       count(*) FILTER (WHERE s.tenant_id IS NOT NULL AND s.object_id IS NULL),
       count(*) FILTER (WHERE s.tenant_id IS NOT NULL AND s.object_id IS NOT NULL
                        AND s.due_at IS NULL)
FROM ({query}) AS s
WHERE s.due_at IS NULL OR s.tenant_id IS NULL OR s.object_id IS NULL
"""

ConninfoFn = Callable[[bool], str]


def session_conninfo(conninfo: str, statement_timeout_seconds: float) -> str:
    """The source's connection string with sweeper's session settings added."""
    options = (
        "-c default_transaction_read_only=on -c TimeZone=UTC -c DateStyle=ISO "
        f"-c statement_timeout={int(statement_timeout_seconds * 1000)}"
    )
    return make_conninfo(conninfo, options=options, application_name="sweeper-discovery")


class SqlSource:
    """Keyset pages of the operator's query; one connection, opened on first use."""

    kind = "sql"

    def __init__(self, config: SqlDiscovery, conninfo: str | ConninfoFn) -> None:
        self._config = config
        self._conninfo = conninfo
        self._conn: psycopg.Connection[TupleRow] | None = None
        self._first = _compose(_FIRST_PAGE, config.query, config.param_columns)
        self._next = _compose(_NEXT_PAGE, config.query, config.param_columns)
        self._nulls = _compose(_NULL_KEYS, config.query)

    def _connection(self) -> psycopg.Connection[TupleRow]:
        if self._conn is None or self._conn.closed or self._conn.broken:
            raw = self._conninfo if isinstance(self._conninfo, str) else self._conninfo(False)
            try:
                self._conn = psycopg.connect(
                    session_conninfo(raw, self._config.statement_timeout_seconds),
                    autocommit=True,
                )
            except psycopg.Error as exc:
                raise DiscoverySourceError(
                    "sql", f"cannot connect to the source database at {describe_target(raw)}"
                ) from exc
            # Belt and braces: the session refuses writes even if the options were dropped.
            self._conn.read_only = True
        return self._conn

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def _params(self, now: datetime, **extra: Any) -> dict[str, Any]:
        return {**self._config.params, "now": now, **extra}

    def _fetch(self, query: sql.Composed, params: dict[str, Any]) -> list[TupleRow]:
        conn = self._connection()
        try:
            with conn.transaction():
                return conn.execute(query, params).fetchall()
        except psycopg.Error as exc:
            # The SQLSTATE only: a message may quote a value of the source.
            raise DiscoverySourceError("sql", f"source query failed ({exc.sqlstate})") from exc

    def pass_rejects(self, now: datetime) -> list[Rejected]:
        rows = self._fetch(self._nulls, self._params(now))
        tenant, obj, due = (int(n) for n in rows[0])
        reasons = (
            ("tenant_id missing", tenant),
            ("object_id missing", obj),
            ("due_at missing", due),
        )
        return [Rejected(None, reason) for reason, count in reasons for _ in range(count)]

    def read_page(self, cursor: Cursor | None, limit: int, now: datetime) -> Page:
        if cursor is None:
            rows = self._fetch(self._first, self._params(now, sweeper_limit=limit))
        else:
            rows = self._fetch(
                self._next,
                self._params(
                    now,
                    sweeper_limit=limit,
                    sweeper_due=cursor["due_at"],
                    sweeper_tenant=cursor["tenant_id"],
                    sweeper_object=cursor["object_id"],
                ),
            )
        names = self._config.param_columns
        found = [
            SourceRow(offset, row[0], row[1], row[2], _params(names, row[3:]) if names else None)
            for offset, row in enumerate(rows, start=1)
        ]
        next_cursor = cursor
        if rows:
            tenant, obj, due = rows[-1][:3]
            next_cursor = {"due_at": due, "tenant_id": tenant, "object_id": obj}
        return Page(found, next_cursor, exhausted=len(rows) < limit, scanned=len(rows))


def _compose(
    template: LiteralString, query: str, param_columns: Sequence[str] = ()
) -> sql.Composed:
    # The query is the operator's configuration (validated as one SELECT), not input: it is
    # composed as SQL once, and every value reaches it as a parameter. Param columns are
    # identifiers (quoted), read as JSON (a date becomes its ISO text, a number stays one).
    columns = sql.SQL("").join(
        sql.SQL(", to_jsonb(s.{})").format(sql.Identifier(name)) for name in param_columns
    )
    fields: dict[str, Any] = {"query": sql.SQL(query)}
    if "{param_columns}" in template:
        fields["param_columns"] = columns
    return sql.SQL(template).format(**fields)


def _params(names: Sequence[str], values: Sequence[Any]) -> dict[str, Any]:
    """A row's param columns as its params; a NULL column is left out."""
    return {name: value for name, value in zip(names, values, strict=True) if value is not None}

"""The ledger's executor: its one connection and its one transaction discipline.

Every part of the ledger (one module per caller, joined in `sweeper.ledger.store.Ledger`) runs
its statements through here: one connection per `Ledger`, opened on first use and reopened if it
broke, and one short transaction at a time under the ledger's lock. Time is passed in (`now`),
never read here, so the boundaries of due times and leases can be tested exactly.
"""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import Any, Concatenate, Final, LiteralString

import psycopg
from psycopg.rows import TupleRow

from sweeper.errors import LedgerError, LedgerUnavailableError
from sweeper.ledger.wake import WakeStore, lower_in
from sweeper.models import JobStatus, check_transition
from sweeper.redaction import describe_target, redact

#: The policy of one job, to lower the right wake item for a write by operation key.
POLICY_OF_JOB: Final = "SELECT policy FROM sweeper_jobs WHERE operation_key = %(key)s"

#: Builds the connection string; called with refresh=True after a failed login.
ConninfoProvider = Callable[[bool], str]


def _serialised[S: Executor, **P, R](
    method: Callable[Concatenate[S, P], R],
) -> Callable[Concatenate[S, P], R]:
    """Run a method that uses the connection while holding the ledger's lock.

    A psycopg connection runs one transaction at a time: two threads inside
    `conn.transaction()` at once would nest one in the other and commit out of order. Every
    method that opens a transaction carries this decorator (or goes through `_execute`).
    """

    @functools.wraps(method)
    def run(self: S, /, *args: P.args, **kwargs: P.kwargs) -> R:
        with self._lock:
            return method(self, *args, **kwargs)

    return run


class Executor:
    """The connection and the transaction discipline that every part of the ledger shares.

    Shared by the threads of one consumer batch (`consumer.parallel_calls`), which take turns on
    the connection: each statement is one short transaction, held under a lock, so ledger writes
    are serialised, never interleaved (a write takes milliseconds, a vendor call far longer).
    Separate processes and the local poller's workers each build their own.
    """

    def __init__(
        self,
        conninfo: str | ConninfoProvider,
        *,
        prepare_threshold: int | None = 5,
        sleep: Callable[[float], None] = time.sleep,
        wake: WakeStore | None = None,
        may_pause: bool = False,
    ) -> None:
        # prepare_threshold=None disables server-side prepared statements (needed behind RDS Proxy
        # or PgBouncer in transaction mode).
        self._conninfo = conninfo
        self._prepare_threshold = prepare_threshold
        self._sleep = sleep  # the backoff between schedule attempts
        self._conn: psycopg.Connection[TupleRow] | None = None
        self._lock = threading.RLock()
        #: Lowered by every write that can make work due earlier (sweeper.ledger.wake); None: the
        #: deployment keeps no wake item, and its producer connects on every run.
        self.wake = wake
        #: The cluster may pause (Aurora Serverless v2 at minimum 0 ACU): it pauses only after
        #: its auto-pause delay with no user connection, so a run closes its session at its end
        #: (`end_run`) instead of a warm environment holding it until Lambda reclaims it.
        self.may_pause = may_pause

    def _connection(self) -> psycopg.Connection[TupleRow]:
        if self._conn is None or self._conn.closed or self._conn.broken:
            try:
                try:
                    self._conn = self._connect(refresh=False)
                except psycopg.OperationalError:
                    if isinstance(self._conninfo, str):
                        raise
                    # A rotated password: fetch the credentials again, past any cache, once.
                    self._conn = self._connect(refresh=True)
            except psycopg.OperationalError as exc:
                raise LedgerUnavailableError(connect_failure(exc, self._target())) from exc
            except psycopg.Error as exc:
                raise LedgerError(connect_failure(exc, self._target())) from exc
        return self._conn

    def _target(self) -> str:
        """Where the ledger is, for an error message: host, port and database, no credentials."""
        if not isinstance(self._conninfo, str):
            return "the configured ledger"
        return describe_target(self._conninfo)

    def _connect(self, *, refresh: bool) -> psycopg.Connection[TupleRow]:
        conninfo = self._conninfo if isinstance(self._conninfo, str) else self._conninfo(refresh)
        return psycopg.connect(
            conninfo,
            autocommit=True,
            prepare_threshold=self._prepare_threshold,
            application_name="sweeper",
        )

    @_serialised
    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    @property
    def connected(self) -> bool:
        """Whether a session is open (on a cluster that may pause: one opened in this run)."""
        return self._conn is not None and not self._conn.closed

    def end_run(self) -> None:
        """A run (an invocation) ended: close the session when the cluster may pause, keep it
        otherwise (the next run of a warm environment reuses it)."""
        if self.may_pause:
            self.close()

    @contextmanager
    def transaction(self) -> Iterator[psycopg.Connection[TupleRow]]:
        """One transaction on the ledger's connection, for a store kept beside this one (the
        discovery store); a database error leaves as a LedgerError with its SQLSTATE only."""
        conn = self._connection()
        try:
            with conn.transaction():
                yield conn
        except psycopg.Error as exc:
            raise statement_failure(exc) from exc

    @_serialised
    def _execute(
        self,
        query: LiteralString,
        params: dict[str, Any],
        *,
        waking: datetime | None = None,
        policy: str | None = None,
    ) -> list[TupleRow]:
        """One statement in its own transaction. `waking`: a write that can make work claimable
        at that time or later, so the wake item of the policy (given, or the job's of
        `params["key"]`) is lowered to it first, in the same transaction."""
        conn = self._connection()
        try:
            with conn.transaction():
                if waking is not None:
                    if policy is None and self.wake is not None:
                        found = conn.execute(POLICY_OF_JOB, {"key": params["key"]}).fetchone()
                        policy = None if found is None else str(found[0])
                    self._lower_wake(conn, policy, waking)
                cur = conn.execute(query, params)
                return cur.fetchall() if cur.description is not None else []
        except psycopg.Error as exc:
            raise statement_failure(exc) from exc

    def _lower_wake(
        self, conn: psycopg.Connection[TupleRow], policy: str | None, at: datetime
    ) -> None:
        """In a write's transaction, before it changes a row: lower the policy's wake item to
        `at` (sweeper.ledger.wake.lower_in); nothing without an item or a policy."""
        if self.wake is not None and policy is not None:
            lower_in(conn, self.wake, policy, at)


def statement_failure(exc: psycopg.Error) -> LedgerError:
    """The error for a failed statement, with its SQLSTATE only (never the DETAIL):
    LedgerUnavailableError when the connection was lost or the server is shutting down or
    starting (psycopg's OperationalError: SQLSTATE class 08, 57P01-57P03), else LedgerError."""
    kind = LedgerUnavailableError if isinstance(exc, psycopg.OperationalError) else LedgerError
    return kind(f"ledger statement failed ({exc.sqlstate})")


def connect_failure(exc: psycopg.Error, target: str) -> str:
    """One line on a failed connection: where (no credentials), why, and what to check."""
    if isinstance(exc, psycopg.ProgrammingError):
        why = "the database URL is not a valid PostgreSQL URL or connection string"
    else:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        # libpq: 'connection failed: connection to server at "h", port 5432 failed: <why>'
        why = redact(first.rsplit("failed: ", 1)[-1])
    return (
        f"cannot connect to the ledger at {target} ({why}); check the database URL and that "
        "PostgreSQL is running there"
    )


def _moves(target: JobStatus, *sources: JobStatus) -> list[str]:
    """The source states of a guarded UPDATE, each checked against the state machine."""
    for source in sources:
        check_transition(source, target)
    return [s.value for s in sources]

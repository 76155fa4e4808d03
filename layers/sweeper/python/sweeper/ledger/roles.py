"""The login users the functions connect as: members of `sweeper_app` (migration 0004) or of
`sweeper_reader` (migration 0014).

The migrations create both roles, without a password; the migrations function then makes the
login user named in each role's secret, with that secret's password: the application secret's
user in `sweeper_app` (producer, consumer, redrive, the operator function), the reader secret's
in `sweeper_reader` (the read-only operator function). Running it again sets the same password
and membership (a secret that was replaced, a database restored from a snapshot). A multi-user
rotation later alternates between each user and a clone it makes itself, granted that user's
role, so both always hold their role's rights and nothing more.

The password never reaches the server: libpq computes its SCRAM-SHA-256 verifier on the client
(PQencryptPasswordConn) and the statement carries the verifier, which the server stores as it
is. A `CREATE/ALTER ROLE` statement may be written to the server's log (a failed statement,
`log_statement`), which Aurora exports to CloudWatch.
"""

from __future__ import annotations

import psycopg
from psycopg import sql
from psycopg.rows import TupleRow

from sweeper.errors import LedgerError

#: The NOLOGIN role migration 0004 creates and grants DML to.
APP_ROLE = "sweeper_app"
#: The NOLOGIN role migration 0014 creates and grants SELECT to, on what the reads read.
READER_ROLE = "sweeper_reader"
SWEEPER_ROLES = (APP_ROLE, READER_ROLE)
#: What libpq computes the verifier with; the server keeps whatever form it is sent.
PASSWORD_ALGORITHM = b"scram-sha-256"

ROLE_EXISTS = "SELECT rolsuper FROM pg_roles WHERE rolname = %s"
CURRENT_USER = "SELECT current_user"
#: Whether the user holds a role's rights (directly or through another role).
IS_MEMBER = "SELECT pg_has_role(%s, %s, 'MEMBER')"
# The password literal is the verifier: CREATE/ALTER ROLE take no parameters.
CREATE_LOGIN = "CREATE ROLE {user} WITH LOGIN PASSWORD {verifier} IN ROLE {role}"
ALTER_LOGIN = "ALTER ROLE {user} WITH LOGIN PASSWORD {verifier}"
GRANT_ROLE = "GRANT {role} TO {user}"


def scram_verifier(conn: psycopg.Connection[TupleRow], username: str, password: str) -> str:
    """The SCRAM-SHA-256 verifier of `password` for `username`, computed by libpq on the client
    (a random salt each time): what the server stores, never the password itself."""
    verifier = conn.pgconn.encrypt_password(
        password.encode(), username.encode(), PASSWORD_ALGORITHM
    )
    return verifier.decode("ascii")


def ensure_login(conninfo: str, username: str, password: str, role: str) -> bool:
    """Create or update the login user `username` in `role`; True when it was created.

    `conninfo` is the migrating (master) user's, which has CREATEROLE. Refuses to touch that
    user itself or any superuser, and a user already holding another of sweeper's roles (a
    reader secret naming the application user would make the reader hold DML): each secret
    must name a user of its own.
    """
    if role not in SWEEPER_ROLES:
        raise LedgerError(f"{role} is not one of sweeper's roles {SWEEPER_ROLES}")
    if not username or not password:
        raise LedgerError(f"the {role} secret needs a username and a password")
    user = sql.Identifier(username)
    with psycopg.connect(conninfo, autocommit=True) as conn, conn.transaction():
        me = conn.execute(CURRENT_USER).fetchone()
        if me is not None and me[0] == username:
            raise LedgerError(f"the {role} secret names the migrating user itself")
        existing = conn.execute(ROLE_EXISTS, (username,)).fetchone()
        if existing is not None and existing[0]:
            raise LedgerError(f"refusing to use the superuser {username} as the {role} user")
        others = [other for other in SWEEPER_ROLES if other != role]
        for other in others if existing is not None else []:
            member = conn.execute(IS_MEMBER, (username, other)).fetchone()
            if member is not None and member[0]:
                raise LedgerError(
                    f"the {role} secret names {username}, a user of {other}: give it a user "
                    "of its own"
                )
        verifier = sql.Literal(scram_verifier(conn, username, password))
        if existing is None:
            create = sql.SQL(CREATE_LOGIN).format(
                user=user, verifier=verifier, role=sql.Identifier(role)
            )
            conn.execute(create)
            return True
        conn.execute(sql.SQL(ALTER_LOGIN).format(user=user, verifier=verifier))
        conn.execute(sql.SQL(GRANT_ROLE).format(role=sql.Identifier(role), user=user))
        return False

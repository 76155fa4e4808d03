"""The login user the functions connect as: a member of the `sweeper_app` role (migration 0004).

The migrations create the role, without a password; the migrations function then makes the
login user named in the application secret, with that secret's password. Running it again sets
the same password and membership (a secret that was replaced, a database restored from a
snapshot). A multi-user rotation later alternates between this user and a clone it makes itself,
granted this user's role, so both always hold `sweeper_app`'s rights and nothing more.
"""

from __future__ import annotations

import psycopg
from psycopg import sql

from sweeper.errors import LedgerError

#: The NOLOGIN role migration 0004 creates and grants DML to.
APP_ROLE = "sweeper_app"

ROLE_EXISTS = "SELECT rolsuper FROM pg_roles WHERE rolname = %s"
CURRENT_USER = "SELECT current_user"
CREATE_LOGIN = "CREATE ROLE {user} WITH LOGIN PASSWORD {password} IN ROLE {role}"
ALTER_LOGIN = "ALTER ROLE {user} WITH LOGIN PASSWORD {password}"
GRANT_ROLE = "GRANT {role} TO {user}"


def ensure_app_login(conninfo: str, username: str, password: str) -> bool:
    """Create or update the login user `username` in `sweeper_app`; True when it was created.

    `conninfo` is the migrating (master) user's, which has CREATEROLE. Refuses to touch that
    user itself or any superuser: the application secret must name a user of its own.
    """
    if not username or not password:
        raise LedgerError("the application secret needs a username and a password")
    user = sql.Identifier(username)
    role = sql.Identifier(APP_ROLE)
    # CREATE/ALTER ROLE take no parameters; the literal is quoted by psycopg on the client.
    secret = sql.Literal(password)
    with psycopg.connect(conninfo, autocommit=True) as conn, conn.transaction():
        me = conn.execute(CURRENT_USER).fetchone()
        if me is not None and me[0] == username:
            raise LedgerError("the application secret names the migrating user itself")
        existing = conn.execute(ROLE_EXISTS, (username,)).fetchone()
        if existing is not None and existing[0]:
            raise LedgerError(f"refusing to use the superuser {username} as the application user")
        if existing is None:
            statement = sql.SQL(CREATE_LOGIN).format(user=user, password=secret, role=role)
            conn.execute(statement)
            return True
        conn.execute(sql.SQL(ALTER_LOGIN).format(user=user, password=secret))
        conn.execute(sql.SQL(GRANT_ROLE).format(role=role, user=user))
        return False

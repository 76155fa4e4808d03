"""Role passwords reach PostgreSQL as SCRAM-SHA-256 verifiers computed on the client (issue 40).

`CREATE/ALTER ROLE ... PASSWORD '<literal>'` is a statement the server may write to its error
log (a failed statement, `log_statement`), which Aurora exports to CloudWatch: only the verifier
may ever be in it. The local server trusts every local login, so that the role "can log in with
its password" is shown by checking the stored verifier against it as the server would
(RFC 5802 / RFC 7677), independently of libpq.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import uuid
from typing import Any, ClassVar

import psycopg
import pytest
from psycopg import sql

from sweeper.ledger.roles import APP_ROLE, READER_ROLE, ensure_login

pytestmark = pytest.mark.integration

PASSWORD = "a-Generated-password-0123456789"


def scram_accepts(verifier: str, password: str) -> bool:
    """Whether a SCRAM-SHA-256 verifier (`SCRAM-SHA-256$<i>:<salt>$<StoredKey>:<ServerKey>`) is
    the one of `password`: the keys the server checks a client's proof and signs with."""
    method, rest = verifier.split("$", 1)
    iterations_salt, keys = rest.split("$")
    iterations, salt = iterations_salt.split(":")
    stored_key, server_key = (base64.b64decode(part) for part in keys.split(":"))
    salted = hashlib.pbkdf2_hmac(
        "sha256", password.encode(), base64.b64decode(salt), int(iterations)
    )
    client_key = hmac.digest(salted, b"Client Key", "sha256")
    return (
        method == "SCRAM-SHA-256"
        and hmac.compare_digest(hashlib.sha256(client_key).digest(), stored_key)
        and hmac.compare_digest(hmac.digest(salted, b"Server Key", "sha256"), server_key)
    )


def test_the_verifier_check_knows_a_verifier_the_server_made(db_url: str) -> None:
    # A known answer for the check itself: a verifier PostgreSQL computed from a literal.
    name = f"sweeper_kat_t{uuid.uuid4().hex[:8]}"
    with psycopg.connect(db_url, autocommit=True) as conn:
        conn.execute("SET password_encryption = 'scram-sha-256'")
        conn.execute(
            sql.SQL("CREATE ROLE {} PASSWORD {}").format(
                sql.Identifier(name), sql.Literal(PASSWORD)
            )
        )
        stored = _stored(conn, name)
        conn.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(name)))
    assert scram_accepts(stored, PASSWORD)
    assert not scram_accepts(stored, PASSWORD + "x")


class _Recording(psycopg.Connection[Any]):
    """A connection that keeps the text of every statement it sends."""

    sent: ClassVar[list[str]] = []

    def execute(self, query: Any, params: Any = None, **kwargs: Any) -> Any:
        text = query.as_string(self) if isinstance(query, sql.Composable) else query
        _Recording.sent.append(text.decode() if isinstance(text, bytes) else str(text))
        return super().execute(query, params, **kwargs)


@pytest.fixture
def recorded(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    _Recording.sent.clear()
    monkeypatch.setattr(psycopg, "connect", _Recording.connect)
    return _Recording.sent


def _stored(conn: psycopg.Connection[Any], name: str) -> str:
    row = conn.execute("SELECT rolpassword FROM pg_authid WHERE rolname = %s", (name,)).fetchone()
    assert row is not None
    assert row[0] is not None
    return str(row[0])


@pytest.mark.parametrize("role", [APP_ROLE, READER_ROLE])
def test_creating_and_updating_a_login_never_sends_its_password(
    db_url: str, recorded: list[str], role: str
) -> None:
    name = f"sweeper_pw_t{uuid.uuid4().hex[:8]}"
    try:
        # When a login is created, then given a new password
        assert ensure_login(db_url, name, PASSWORD, role) is True
        assert ensure_login(db_url, name, PASSWORD + "-rotated", role) is False
        # Then no statement sent held either password, and the role statements were sent
        assert any("CREATE ROLE" in statement for statement in recorded)
        assert any("ALTER ROLE" in statement for statement in recorded)
        assert not [s for s in recorded if PASSWORD in s]
        # And the stored verifier is the last password's, SCRAM-SHA-256
        with psycopg.connect(db_url) as conn:
            stored = _stored(conn, name)
        assert scram_accepts(stored, PASSWORD + "-rotated")
    finally:
        with psycopg.connect(db_url, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(name)))

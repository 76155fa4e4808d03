"""Credentials are never printed: the one place that redacts database URLs and connection strings.

Every error, log line and report that could carry a database URL (or a message that quotes one,
as libpq's do) passes through `redact`; `describe_target` names where a ledger is without its
credentials. A password in the userinfo of any URL (`scheme://user:password@host`), in a query
parameter (`?password=`) or in a key=value connection string (`password=...`) becomes `***`.
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit

from psycopg.conninfo import conninfo_to_dict

REDACTED = "***"

# scheme://user:password@ -> scheme://user:***@ (the password may hold anything but '@' and
# whitespace; the user anything but ':', '/' and '@').
_URL_PASSWORD = re.compile(r"(?P<head>[A-Za-z][A-Za-z0-9+.-]*://[^:/@\s]*:)[^@\s]*(?=@)")
# password=value in a query string or a key=value connection string (quoted or not).
_KEY_PASSWORD = re.compile(r"(?i)(?P<head>\bpassword\s*=\s*)(?:'(?:[^'\\]|\\.)*'|[^&\s]+)")


def redact(text: str, *conninfos: str | None) -> str:
    """`text` with every password it shows replaced by `***`.

    The passwords of `conninfos` (the URLs the caller was given) are also replaced wherever they
    appear on their own, as in a message that quotes a field of an unparseable URL.
    """
    for conninfo in conninfos:
        for password in _passwords(conninfo):
            text = text.replace(password, REDACTED)
    text = _URL_PASSWORD.sub(lambda m: m["head"] + REDACTED, text)
    return _KEY_PASSWORD.sub(lambda m: m["head"] + REDACTED, text)


def describe_target(conninfo: str) -> str:
    """`host:port/dbname` of a connection string, never its user or password."""
    try:
        info = conninfo_to_dict(conninfo)
    except Exception:
        return "(an unparseable database URL)"
    host = info.get("host") or info.get("hostaddr") or "localhost"
    port = info.get("port") or "5432"
    dbname = info.get("dbname") or info.get("user") or "postgres"
    return redact(f"{host}:{port}/{dbname}", conninfo)


def _passwords(conninfo: str | None) -> list[str]:
    if not conninfo:
        return []
    found: list[str] = []
    try:
        password = conninfo_to_dict(conninfo).get("password")
        if password:
            found.append(str(password))
    except Exception:  # noqa: S110 - unparseable: the URL form below still applies
        pass
    try:
        password = urlsplit(conninfo).password
    except ValueError:
        password = None
    if password:
        found.append(password)
    # Not a short common string: replacing "a" everywhere would garble the message, not hide more.
    return [p for p in found if len(p) >= 3]

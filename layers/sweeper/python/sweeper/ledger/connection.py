"""How a deployed function connects to the ledger: from a Secrets Manager secret, over TLS that
verifies the server's certificate and host name against the RDS CA bundle shipped in the layer.

Locally the database URL decides everything (the disposable PostgreSQL has no TLS); this module
is for the secret-based connection only.
"""

from __future__ import annotations

from collections.abc import Mapping
from importlib import resources
from pathlib import Path
from typing import Any

from psycopg.conninfo import make_conninfo

from sweeper.errors import ConfigError

#: The CA bundle's place in the sweeper package (and so in the layer, under /opt/python).
CA_BUNDLE_PARTS = ("certs", "rds-ca-bundle.pem")
#: Certificate chain and host name both checked: `require` would accept any server.
SSL_MODE = "verify-full"
DEFAULT_PORT = 5432
DEFAULT_DBNAME = "postgres"
#: What a secret must hold to connect; host and port may come from the function's settings.
REQUIRED_SECRET_KEYS = ("username", "password")


def rds_ca_bundle() -> Path:
    """The path of the RDS CA bundle; a clear error when the layer was built without it."""
    path = Path(str(resources.files("sweeper.ledger").joinpath(*CA_BUNDLE_PARTS)))
    if not path.is_file():
        raise ConfigError(
            f"the RDS CA bundle sweeper/ledger/{'/'.join(CA_BUNDLE_PARTS)} is missing from the "
            "sweeper layer: TLS to the database cannot be verified (restore the file, then "
            "redeploy)"
        )
    return path


def secret_conninfo(
    secret: Mapping[str, Any],
    *,
    host: str | None,
    port: int | str | None,
    connect_timeout_seconds: int,
) -> str:
    """A libpq connection string from a database secret (RDS's JSON shape).

    `host` and `port`, when given (an RDS Proxy, an imported cluster), win over the secret's.
    The host must be the RDS name the server's certificate carries, not an alias.
    """
    missing = [key for key in REQUIRED_SECRET_KEYS if not secret.get(key)]
    if not (host or secret.get("host")):
        missing.append("host")
    if missing:
        raise ConfigError(f"the database secret has no {', '.join(missing)}")
    return make_conninfo(
        host=host or secret["host"],
        port=port or secret.get("port", DEFAULT_PORT),
        user=secret["username"],
        password=secret["password"],
        dbname=secret.get("dbname", DEFAULT_DBNAME),
        sslmode=SSL_MODE,
        sslrootcert=str(rds_ca_bundle()),
        connect_timeout=connect_timeout_seconds,
    )

"""The ledger connection built from a secret: TLS verified against the shipped RDS CA bundle."""

from __future__ import annotations

import ssl
from pathlib import Path
from typing import Any

import pytest
from aws_lambda_powertools.utilities import parameters
from psycopg.conninfo import conninfo_to_dict

from sweeper import runtime
from sweeper.config import Policy
from sweeper.errors import ConfigError
from sweeper.ledger import connection
from sweeper.ledger.connection import rds_ca_bundle, secret_conninfo

SECRET = {
    "engine": "postgres",
    "host": "sweeper-ledger.cluster-abc.eu-west-1.rds.amazonaws.com",
    "port": 5432,
    "username": "sweeper_app_user",
    "password": "p@ss word'\"",
    "dbname": "sweeper",
}


@pytest.fixture
def deployed_env(monkeypatch: pytest.MonkeyPatch) -> Any:
    """A function environment as the CDK app writes it, with the secret fetch answered here."""
    monkeypatch.setenv("SWEEPER_POLICY", Policy(name="p").model_dump_json())
    monkeypatch.delenv("SWEEPER_DATABASE_URL", raising=False)
    monkeypatch.setenv("SWEEPER_DATABASE_SECRET_ARN", "arn:aws:secretsmanager:eu-west-1:1:secret:a")
    monkeypatch.setattr(parameters, "get_secret", lambda arn, **_: dict(SECRET))
    runtime.reset()
    yield
    runtime.reset()


def test_a_secret_gives_verify_full_against_the_shipped_bundle(deployed_env: Any) -> None:
    # When a deployed function builds its conninfo from its secret
    info = conninfo_to_dict(runtime.database_conninfo())
    # Then the server's certificate and host name are both checked, against the layer's bundle
    assert info["sslmode"] == "verify-full"
    assert info["sslrootcert"] == str(rds_ca_bundle())
    assert Path(str(info["sslrootcert"])).is_file()
    assert info["host"] == SECRET["host"]
    assert info["user"] == SECRET["username"]
    assert info["password"] == SECRET["password"]
    assert info["dbname"] == "sweeper"


def test_an_endpoint_from_the_settings_wins_and_tls_stays_verified(
    deployed_env: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SWEEPER_DATABASE_HOST", "ledger.proxy-abc.eu-west-1.rds.amazonaws.com")
    monkeypatch.setenv("SWEEPER_DATABASE_PORT", "5433")
    runtime.reset()
    info = conninfo_to_dict(runtime.database_conninfo())
    assert info["host"] == "ledger.proxy-abc.eu-west-1.rds.amazonaws.com"
    assert info["port"] == "5433"
    assert info["sslmode"] == "verify-full"


def test_locally_the_url_decides(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SWEEPER_POLICY", Policy(name="p").model_dump_json())
    monkeypatch.delenv("SWEEPER_DATABASE_SECRET_ARN", raising=False)
    monkeypatch.setenv("SWEEPER_DATABASE_URL", "postgresql://me@localhost/db?sslmode=prefer")
    runtime.reset()
    try:
        assert runtime.database_conninfo() == "postgresql://me@localhost/db?sslmode=prefer"
    finally:
        runtime.reset()


def test_a_missing_bundle_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(connection, "CA_BUNDLE_PARTS", ("certs", "not-shipped.pem"))
    with pytest.raises(ConfigError, match=r"RDS CA bundle .*not-shipped\.pem is missing"):
        secret_conninfo(SECRET, host=None, port=None, connect_timeout_seconds=5)


def test_a_secret_without_credentials_names_what_is_missing_not_the_values() -> None:
    with pytest.raises(ConfigError, match="has no password, host") as caught:
        secret_conninfo(
            {"username": "sweeper_app_user"}, host=None, port=None, connect_timeout_seconds=5
        )
    assert "sweeper_app_user" not in str(caught.value)


def _name(rdns: Any) -> dict[str, str]:
    """`get_ca_certs()`'s nested ((key, value),) tuples as one mapping."""
    return {str(key): str(value) for rdn in rdns for key, value in rdn}


def test_the_bundle_holds_the_rds_and_proxy_roots() -> None:
    """What verify-full needs: the RDS regional roots (cluster) and Amazon's roots (proxy).

    Read by OpenSSL (as libpq reads it): some RDS roots carry serial numbers that stricter
    parsers reject, and OpenSSL is what will load the file.
    """
    bundle = rds_ca_bundle()
    context = ssl.create_default_context(cafile=str(bundle))
    roots = context.get_ca_certs()
    assert len(roots) == bundle.read_text(encoding="ascii").count("BEGIN CERTIFICATE")
    names = []
    for root in roots:
        subject = _name(root["subject"])
        issuer = _name(root["issuer"])
        assert subject == issuer  # self-signed roots only, no intermediates
        names.append(subject["commonName"])
    assert "Amazon RDS eu-west-1 Root CA RSA2048 G1" in names
    assert "Amazon RDS us-east-1 Root CA ECC384 G1" in names
    assert "Amazon Root CA 1" in names
    assert "Starfield Services Root Certificate Authority - G2" in names

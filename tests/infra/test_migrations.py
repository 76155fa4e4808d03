"""Migrations: a custom resource runs the ledger migrations on deploy, after the database."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from infra.migrations import RESOURCE_TYPE, migrations_digest
from tests.infra.conftest import REPO_ROOT, Synth

HANDLER_FILE = REPO_ROOT / "functions" / "migrate" / "app.py"


def test_custom_resource_carries_the_digest_of_the_migration_files(default: Synth) -> None:
    resources = default.resources(RESOURCE_TYPE)
    assert len(resources) == 1
    (resource,) = resources.values()
    assert resource["Properties"]["MigrationsDigest"] == migrations_digest()
    # A replaced application secret runs the function again, to give its user the new password.
    app_attachment = default.logical_id("Database/AppSecret/Attachment/Resource")
    assert resource["Properties"]["AppSecretArn"] == {"Ref": app_attachment}
    reader_attachment = default.logical_id("Database/ReaderSecret/Attachment/Resource")
    assert resource["Properties"]["ReaderSecretArn"] == {"Ref": reader_attachment}
    assert "ServiceToken" in resource["Properties"]


def test_migrations_wait_for_the_database_and_the_endpoints(default: Synth) -> None:
    (resource,) = default.resources(RESOURCE_TYPE).values()
    depends_on = set(resource["DependsOn"])
    assert default.logical_id("Database/Cluster/Resource") in depends_on
    assert default.logical_id("Database/Cluster/Writer/Resource") in depends_on
    assert default.logical_id("Network/Vpc/SecretsManagerEndpoint/Resource") in depends_on


def test_digest_changes_when_a_migration_changes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "0001_init.sql").write_text("CREATE TABLE a (id int);\n")
    monkeypatch.setattr("infra.migrations.MIGRATIONS_DIR", tmp_path)
    before = migrations_digest()
    (tmp_path / "0001_init.sql").write_text("CREATE TABLE a (id bigint);\n")
    assert migrations_digest() != before


def _load_handler() -> ModuleType:
    spec = importlib.util.spec_from_file_location("migrate_handler", HANDLER_FILE)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class _Context:
    function_name = "migrate"
    function_version = "$LATEST"
    invoked_function_arn = "arn:aws:lambda:eu-west-1:111122223333:function:migrate"
    memory_limit_in_mb = 512
    aws_request_id = "req-1"
    log_group_name = "/aws/lambda/migrate"
    log_stream_name = "stream"


SECRET = {
    "host": "ledger.cluster-abc.eu-west-1.rds.amazonaws.com",
    "port": 5432,
    "username": "sweeper_admin",
    "password": "s3cret",
    "dbname": "sweeper",
}


def test_create_runs_the_migrations_over_tls_with_the_secret(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    handler = _load_handler()
    seen: dict[str, Any] = {}
    monkeypatch.setenv("SWEEPER_DATABASE_SECRET_ARN", "arn:aws:secretsmanager:eu:1:secret:db")
    monkeypatch.delenv("SWEEPER_DATABASE_HOST", raising=False)
    monkeypatch.setattr(handler.parameters, "get_secret", lambda arn, **_: SECRET)

    def fake_migrate(conninfo: str) -> list[int]:
        seen["conninfo"] = conninfo
        return [1, 2]

    monkeypatch.setattr("sweeper.ledger.migrate.migrate", fake_migrate)

    result = handler.handler({"RequestType": "Create"}, _Context())

    assert result == {
        "PhysicalResourceId": handler.PHYSICAL_RESOURCE_ID,
        "Data": {"Applied": "1,2"},
    }
    assert "sslmode=verify-full" in seen["conninfo"]
    assert "sslrootcert=" in seen["conninfo"]
    assert f"host={SECRET['host']}" in seen["conninfo"]
    assert "dbname=sweeper" in seen["conninfo"]


def test_endpoint_from_the_environment_wins_over_the_secret(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    handler = _load_handler()
    monkeypatch.setenv("SWEEPER_DATABASE_SECRET_ARN", "arn:aws:secretsmanager:eu:1:secret:db")
    monkeypatch.setenv("SWEEPER_DATABASE_HOST", "imported.example.internal")
    monkeypatch.setenv("SWEEPER_DATABASE_PORT", "5433")
    monkeypatch.setattr(handler.parameters, "get_secret", lambda arn, **_: SECRET)

    conninfo: str = handler.database_conninfo()

    assert "host=imported.example.internal" in conninfo
    assert "port=5433" in conninfo


def test_delete_leaves_the_ledger_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    handler = _load_handler()

    def forbidden(conninfo: str) -> list[int]:
        raise AssertionError("delete must not migrate")

    monkeypatch.setattr("sweeper.ledger.migrate.migrate", forbidden)

    result = handler.handler(
        {"RequestType": "Delete", "PhysicalResourceId": handler.PHYSICAL_RESOURCE_ID}, _Context()
    )

    assert result == {"PhysicalResourceId": handler.PHYSICAL_RESOURCE_ID}


def test_create_makes_the_application_and_reader_users_from_their_own_secrets(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    handler = _load_handler()
    secrets = {
        "arn:master": SECRET,
        "arn:app": {**SECRET, "username": "sweeper_app_user", "password": "app-pass"},
        "arn:reader": {**SECRET, "username": "sweeper_reader_user", "password": "reader-pass"},
    }
    monkeypatch.setenv("SWEEPER_DATABASE_SECRET_ARN", "arn:master")
    monkeypatch.setenv("SWEEPER_APP_SECRET_ARN", "arn:app")
    monkeypatch.setenv("SWEEPER_READER_SECRET_ARN", "arn:reader")
    monkeypatch.delenv("SWEEPER_DATABASE_HOST", raising=False)
    monkeypatch.setattr(handler.parameters, "get_secret", lambda arn, **_: secrets[arn])
    monkeypatch.setattr("sweeper.ledger.migrate.migrate", lambda conninfo: [3])
    made: list[tuple[str, str, str, str]] = []

    def fake_login(conninfo: str, username: str, password: str, role: str) -> bool:
        made.append((conninfo, username, password, role))
        return True

    monkeypatch.setattr("sweeper.ledger.roles.ensure_login", fake_login)

    handler.handler({"RequestType": "Update"}, _Context())

    for conninfo, *_ in made:
        assert "user=sweeper_admin" in conninfo  # made by the master user
        assert "sslmode=verify-full" in conninfo
    assert [login[1:] for login in made] == [
        ("sweeper_app_user", "app-pass", "sweeper_app"),
        ("sweeper_reader_user", "reader-pass", "sweeper_reader"),
    ]

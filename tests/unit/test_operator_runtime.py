"""The operator functions read the policy file from their config layer's file, not from their
environment (Lambda's 4 KB would hold a few policies): `SWEEPER_CONFIG_FILE`."""

from __future__ import annotations

from pathlib import Path

import pytest

from infra.operator_api import config_file_text
from sweeper.config import SweeperConfig
from sweeper.errors import ConfigError
from sweeper.operator_api.runtime import OperatorSettings
from sweeper_tools.policy_file import load_config


@pytest.fixture
def environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SWEEPER_STACK_NAME", "Sweeper")
    monkeypatch.setenv("SWEEPER_OPERATOR_ACCESS", "read")
    monkeypatch.setenv("SWEEPER_DATABASE_SECRET_ARN", "arn:aws:secretsmanager:eu-west-1:1:secret:x")
    monkeypatch.delenv("SWEEPER_DATABASE_URL", raising=False)
    monkeypatch.delenv("SWEEPER_CONFIG", raising=False)


@pytest.mark.usefixtures("environment")
def test_the_policy_file_comes_from_the_config_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Every shipped shape: the examples name discovery kinds, limits, auth
    config = SweeperConfig(
        policies=[
            policy
            for source in [Path("sweeper.toml"), *sorted(Path("docs/examples").glob("*.toml"))]
            for policy in load_config(source).policies
            if policy.name != "exports" or source.name == "sweeper.toml"
        ]
    )
    path = tmp_path / "config.json"
    path.write_text(config_file_text(config), encoding="utf-8")
    monkeypatch.setenv("SWEEPER_CONFIG_FILE", str(path))
    settings = OperatorSettings()
    assert settings.config == config
    assert settings.config is settings.config  # read and validated once


@pytest.mark.usefixtures("environment")
def test_a_missing_config_file_is_one_line_naming_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SWEEPER_CONFIG_FILE", str(tmp_path / "absent.json"))
    with pytest.raises(ConfigError, match=r"absent\.json: No such file"):
        _ = OperatorSettings().config


@pytest.mark.usefixtures("environment")
def test_an_invalid_config_file_names_the_field(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "config.json"
    path.write_text('{"policies": [{"name": "Not A Name"}]}', encoding="utf-8")
    monkeypatch.setenv("SWEEPER_CONFIG_FILE", str(path))
    with pytest.raises(ConfigError, match=r"config\.json: .*name"):
        _ = OperatorSettings().config

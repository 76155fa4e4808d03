"""One configuration: the policy file is validated by the shared model, and a bad file (or a bad
context value) fails synth with a message that names the field."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from aws_cdk import App

from infra.options import DeploymentOptions
from sweeper.errors import ConfigError
from sweeper_tools.policy_file import load_config
from tests.infra.conftest import FIXTURES, REPO_ROOT


def _synth(tmp_path: Path, *context: str) -> subprocess.CompletedProcess[str]:
    """`python -m infra.app -c key=value …` as `make synth` runs it, into a scratch folder."""
    args = [arg for pair in context for arg in ("-c", pair)]
    env = {**os.environ, "CDK_OUTDIR": str(tmp_path / "cdk.out")}
    env.pop("CDK_CONTEXT_JSON", None)
    return subprocess.run(
        [sys.executable, "-m", "infra.app", *args],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )


def test_the_shipped_policy_file_is_valid() -> None:
    config = load_config(REPO_ROOT / "sweeper.toml")
    assert [policy.name for policy in config.policies] == ["exports"]


@pytest.mark.parametrize(
    ("fixture", "named"),
    [
        ("bad_max_concurrency.toml", "policies.0.consumer: Value error, max_concurrency"),
        ("bad_field_type.toml", "policies.0.lease_seconds"),
    ],
)
def test_bad_policy_file_fails_synth_naming_the_field(
    tmp_path: Path, fixture: str, named: str
) -> None:
    result = _synth(tmp_path, f"config={FIXTURES / fixture}")

    assert result.returncode == 2
    assert named in result.stderr
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "cdk.out" / "Sweeper.template.json").exists()


def test_missing_policy_file_fails_synth(tmp_path: Path) -> None:
    result = _synth(tmp_path, f"config={tmp_path / 'nowhere.toml'}")

    assert result.returncode == 2
    assert "does not exist" in result.stderr


def test_bad_context_value_fails_naming_the_key(tmp_path: Path) -> None:
    result = _synth(tmp_path, "database_port=not-a-port")

    assert result.returncode == 2
    assert "CDK context: database_port" in result.stderr


@pytest.mark.parametrize("value", ["Lean", "none", ""])
def test_an_unknown_network_profile_is_refused_naming_the_key(value: str) -> None:
    app = App(context={"network": value})

    with pytest.raises(ConfigError) as refused:
        DeploymentOptions.from_context(app.node)

    message = str(refused.value)
    assert message.startswith("CDK context: network: ")
    assert "'default' or 'lean'" in message
    assert "\n" not in message


def test_partial_vpc_import_is_refused() -> None:
    app = App(context={"vpc_id": "vpc-0123456789abcdef0"})

    with pytest.raises(ConfigError, match="imported VPC needs vpc_id, vpc_cidr"):
        DeploymentOptions.from_context(app.node)

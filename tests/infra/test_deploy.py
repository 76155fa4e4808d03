"""`make deploy`: `sweeper doctor` first, and nothing synthesized or deployed when it fails."""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests.infra.conftest import REPO_ROOT

#: `make` variables that stand in for the CLI and the CDK (the install stamp is taken as done).
STAMP = ".venv/.installed"


def _stub(path: Path, exit_code: int) -> Path:
    """A command that records its arguments in `<path>.args` and exits with `exit_code`."""
    path.write_text(f'#!/bin/sh\necho "$@" >> "{path}.args"\nexit {exit_code}\n')
    path.chmod(0o755)
    return path


def _make(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["make", "--no-print-directory", "-C", str(REPO_ROOT), "-o", STAMP, *args],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )


def test_make_deploy_refuses_when_doctor_fails(tmp_path: Path) -> None:
    # Given a doctor that finds a failing check (exit 1)
    doctor = _stub(tmp_path / "sweeper", 1)
    cdk = _stub(tmp_path / "cdk", 0)
    # When the deploy runs
    result = _make(
        "deploy", f"SWEEPER={doctor}", f"CDK={cdk}", "STACK=Staging", "CONFIG=staging.toml"
    )
    # Then doctor was asked about that stack and policy file, and nothing went further
    assert result.returncode != 0
    assert (tmp_path / "sweeper.args").read_text().split() == [
        "doctor",
        "--stack",
        "Staging",
        "--config",
        "staging.toml",
    ]
    assert not (tmp_path / "cdk.args").exists()
    assert "infra.app" not in result.stdout


def test_make_deploy_runs_doctor_then_synth_then_deploys_what_was_synthesized() -> None:
    result = _make(
        "-n", "deploy", "SWEEPER=sweeper", "CDK=cdk", "STACK=Staging", "CONTEXT=alarm_email=a@b.c"
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    doctor = next(i for i, line in enumerate(lines) if line.startswith("sweeper doctor"))
    synth = next(i for i, line in enumerate(lines) if "-m infra.app" in line)
    deploy = next(i for i, line in enumerate(lines) if line.startswith("cdk deploy"))
    assert doctor < synth < deploy
    assert "-c stack_name=Staging" in lines[synth]
    assert "-c alarm_email=a@b.c" in lines[synth]
    assert lines[deploy] == "cdk deploy --app cdk.out Staging"

"""The operator CLI: migrate and schedule, against the real ledger."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from sweeper.ledger.migrate import load_migrations
from sweeper.ledger.store import Ledger
from sweeper.models import JobStatus
from sweeper_cli import main

pytestmark = pytest.mark.integration

POLICY_FILE = """
[[policies]]
name = "exports"
[policies.scope]
kind = "tenant"
"""


@pytest.fixture
def config(tmp_path: Path) -> Path:
    path = tmp_path / "sweeper.toml"
    path.write_text(POLICY_FILE)
    return path


def test_migrate_reports_the_schema_version(fresh_db_url: str) -> None:
    first = CliRunner().invoke(main, ["migrate", "--database-url", fresh_db_url])
    second = CliRunner().invoke(main, ["migrate"], env={"DATABASE_URL": fresh_db_url})
    assert first.exit_code == 0, first.output
    versions = [m.version for m in load_migrations()]
    assert f"applied {versions}; schema version {versions[-1]}" in first.output
    assert "applied nothing" in second.output


def test_schedule_reports_params_replaced_before_the_claim_and_names_a_bad_params_line(
    db_url: str, config: Path, tmp_path: Path
) -> None:
    # Given an obligation scheduled with params, then again with other params
    csv_file = tmp_path / "due.csv"
    args = ["schedule", str(csv_file), "--policy", "exports", "--config", str(config)]
    args += ["--database-url", db_url, "--json"]
    csv_file.write_text('tenant_id,object_id,params\nt1,a.csv,"{""v"": 1}"\n')
    CliRunner().invoke(main, args)
    csv_file.write_text('tenant_id,object_id,params\nt1,a.csv,"{""v"": 2}"\n')
    second = CliRunner().invoke(main, args)
    # Then the second run says the params were replaced
    assert second.exit_code == 0, second.output
    assert json.loads(second.output)["params_replaced"] == 1
    # and a bad params cell is one line naming the file, the line and the rule, no value
    csv_file.write_text('tenant_id,object_id,params\nt1,a.csv,"[""secret-value""]"\n')
    refused = CliRunner().invoke(main, args)
    assert refused.exit_code != 0
    assert "line 2: invalid params" in refused.output
    assert "params_not_object" in refused.output
    assert "secret-value" not in refused.output
    assert "Traceback" not in refused.output


def test_schedule_from_csv_is_idempotent(db_url: str, config: Path, tmp_path: Path) -> None:
    csv_file = tmp_path / "due.csv"
    csv_file.write_text("tenant_id,object_id,due_at\nt1,a.csv,2026-11-01T00:00:00Z\nt2,b.csv,\n")
    args = [
        "schedule",
        str(csv_file),
        "--policy",
        "exports",
        "--config",
        str(config),
        "--database-url",
        db_url,
        "--json",
    ]
    first = CliRunner().invoke(main, args)
    second = CliRunner().invoke(main, args)
    assert first.exit_code == 0, first.output
    assert json.loads(first.output)["inserted"] == 2
    assert json.loads(second.output) == {
        "policy": "exports",
        "inserted": 0,
        "moved_earlier": 0,
        "unchanged": 2,
        "params_replaced": 0,
        "params_kept": 0,
    }
    ledger = Ledger(db_url)
    job = ledger.get("exports:t1:a.csv:v1")
    assert job is not None
    assert job.scope == "exports:t1"
    assert ledger.counts("exports")[JobStatus.PENDING] == 2
    ledger.close()


def test_schedule_from_json_lines_on_stdin(db_url: str, config: Path) -> None:
    lines = '{"tenant_id": "t1", "object_id": "x"}\n\n{"tenant_id": "t2", "object_id": "y"}\n'
    result = CliRunner().invoke(
        main,
        [
            "schedule",
            "--policy",
            "exports",
            "--config",
            str(config),
            "--database-url",
            db_url,
            "--json",
        ],
        input=lines,
    )
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["inserted"] == 2


def test_a_bad_line_names_its_number_and_schedules_nothing(db_url: str, config: Path) -> None:
    lines = '{"tenant_id": "t1", "object_id": "x"}\n{"tenant_id": "t2", "due_at": "soon"}\n'
    result = CliRunner().invoke(
        main,
        ["schedule", "--policy", "exports", "--config", str(config), "--database-url", db_url],
        input=lines,
    )
    assert result.exit_code == 1
    assert "line 2" in result.output
    assert "soon" not in result.output  # values are not echoed
    ledger = Ledger(db_url)
    assert sum(ledger.counts("exports").values()) == 0
    ledger.close()


def test_an_unknown_policy_is_a_clear_error(db_url: str, config: Path) -> None:
    result = CliRunner().invoke(
        main,
        ["schedule", "--policy", "nope", "--config", str(config), "--database-url", db_url],
        input="",
    )
    assert result.exit_code == 1
    assert "no policy named 'nope'" in result.output

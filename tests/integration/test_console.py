"""The operator's commands against the local stack, exactly as against AWS, and the scenarios."""

from __future__ import annotations

import io
import json
import zipfile
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import boto3
import psycopg
import pytest
from click.testing import CliRunner

from sweeper.ledger.store import Ledger
from sweeper.models import JobStatus, NewJob, OutcomeClass
from sweeper.scheduling import schedule_jobs
from sweeper_cli import main
from sweeper_local.aws import LocalAws
from sweeper_local.poller import run_until
from sweeper_local.scenarios import catch_up_scenario, dlq_scenario
from sweeper_local.vendor import VendorSimulator
from tests.integration.conftest import StartConsole

pytestmark = pytest.mark.integration


def sweeper(local_file: Path, *args: str, code: int = 0) -> Any:
    result = CliRunner().invoke(main, [*args, "--local-file", str(local_file), "--json"])
    assert result.exit_code == code, result.output
    return json.loads(result.output)


def test_the_dlq_scenario_redrives_an_incident_to_one_effect_per_key(
    start_console: StartConsole,
) -> None:
    # Given the local stack with its producer ticking every second
    stack, local_file = start_console(tick_seconds=1.0)
    # When a vendor incident pushes every message into the DLQ and the operator works it off
    report = dlq_scenario(stack, local_file)
    # Then status showed the letters and the closed gate, the dry run what would move, and
    # the redrive moved them: every job succeeded with one effect per key
    assert report.step("status")["policies"][0]["dlq"]["messages"] == 6
    assert report.checks["status: gate closed"] == [True]
    assert report.step("redrive --dry-run")["moved"] == 6
    assert report.step("redrive", 0)["kept_closed"] == 6  # while the gate was closed
    assert report.step("redrive", -1)["left"] == 0
    assert report.checks["effects per key"] == [1]
    assert report.checks["final: succeeded"] == 7


def test_a_stack_without_intake_consumers_starts_only_the_pipelines_environments(
    start_console: StartConsole,
) -> None:
    # Given the local stack as a drill starts it: no intake function on the intake queue
    stack, _ = start_console(intake_consumers=False)
    runtime = stack.policies["exports"]
    # Then no intake environment was started, and the pipeline's consumers were
    assert runtime.intake.source.environments == []
    assert [e.pid is not None for e in runtime.pipeline.source.environments] == [True, True]


def test_the_catch_up_scenario_releases_missed_runs_in_order(
    start_console: StartConsole,
) -> None:
    # Given the local stack (its producer on its schedule, a minute away)
    stack, local_file = start_console()
    # When paused while four scheduled runs pass and a fifth is lost, then resumed and caught up
    report = catch_up_scenario(stack, local_file, runs=4)
    # Then the five missed runs were released in order, each under its own batch id
    runs = report.step(
        "catch-up --since "
        + report.checks["catch-up: times in order"][0]
        + " --until "
        + report.checks["catch-up: times in order"][-1]
    )["runs"]
    assert [r["was"] for r in runs] == ["paused"] * 4 + ["missing"]
    assert len({r["batch_id"] for r in runs}) == 5
    times = [r["scheduled_at"] for r in runs]
    assert times == sorted(times)
    assert report.checks["catch-up: published"] == 5


def test_inspect_retry_and_prune_against_the_local_stack(
    start_console: StartConsole, db_url: str
) -> None:
    # Given a terminal job, a stuck one and an old settled one
    _, local_file = start_console()
    ledger = Ledger(db_url)
    long_ago = datetime.now(UTC) - timedelta(days=40)
    policy = load_policy(local_file)
    schedule_jobs(ledger, policy, [NewJob("t1", f"o{i}", long_ago) for i in range(3)], long_ago)
    ledger.pause("exports", "test", None, datetime.now(UTC))  # so nothing consumes them
    ledger.mark_failed(
        "exports:t1:o0:v1", OutcomeClass.PERMANENT, "http_400", long_ago, count_attempt=True
    )
    ledger.mark_succeeded("exports:t1:o1:v1", OutcomeClass.ACCEPTED, long_ago)
    # When inspecting, retrying the terminal one and pruning
    inspected = sweeper(local_file, "inspect")
    retried = sweeper(local_file, "retry", "--outcome", "permanent", "--reason", "fixed")
    pruned = sweeper(local_file, "prune", "--older-than-days", "30", "--reason", "cleanup")
    # Then each reports what it did, and the ledger agrees
    assert [(j["kind"], j["outcome"]) for j in inspected["jobs"]] == [
        ("terminal", "permanent"),
        ("stuck", None),
    ]
    assert retried == {"policy": "exports", "retried": 1, "keys": ["exports:t1:o0:v1"]}
    assert pruned["jobs_deleted"] == 1
    counts = ledger.counts("exports")
    assert (counts[JobStatus.PENDING], counts[JobStatus.SUCCEEDED]) == (2, 0)
    with psycopg.connect(db_url) as conn:
        actions = [a for (a,) in conn.execute("SELECT action FROM sweeper_operator_actions")]
    assert actions == ["pause", "retry", "prune"]
    ledger.close()


def load_policy(local_file: Path) -> Any:
    from sweeper_tools.policy_file import load_config

    config = json.loads(local_file.read_text())["config"]
    return load_config(config).policy("exports")


def test_status_pause_and_resume_for_people_and_the_local_poller(
    start_console: StartConsole,
) -> None:
    stack, local_file = start_console()
    paused = CliRunner().invoke(
        main, ["pause", "--reason", "incident", "--local-file", str(local_file)]
    )
    shown = CliRunner().invoke(main, ["status", "--local-file", str(local_file)])
    assert paused.exit_code == 0, paused.output
    assert "paused                 True" in paused.output
    assert "PAUSED since" in shown.output
    assert "gate exports" in shown.output
    runtime = stack.policies["exports"]
    assert run_until(lambda: runtime.paused, timeout_seconds=10)  # the poller stopped
    sweeper(local_file, "resume")
    assert sweeper(local_file, "status")["policies"][0]["paused"] is False
    assert run_until(lambda: not runtime.paused, timeout_seconds=10)


def test_a_console_command_without_a_ledger_is_a_clear_error(tmp_path: Path) -> None:
    config = tmp_path / "sweeper.toml"
    config.write_text('[[policies]]\nname = "exports"\n')
    result = CliRunner().invoke(
        main,
        ["inspect", "--config", str(config), "--local-file", str(tmp_path / "none.json")],
        env={"DATABASE_URL": "", "SWEEPER_DATABASE_URL": ""},
    )
    assert result.exit_code == 1
    assert "--database-url" in result.output


def test_pause_on_aws_disables_the_consumers_event_source_mapping(
    local_aws: LocalAws, aws_env: dict[str, str], db_url: str, tmp_path: Path
) -> None:
    # Given a consumer function with an SQS event source mapping (moto, no Docker needed)
    kwargs: dict[str, Any] = {
        "endpoint_url": local_aws.endpoint_url,
        "region_name": "us-east-1",
    }
    iam, lam = boto3.client("iam", **kwargs), boto3.client("lambda", **kwargs)
    role = iam.create_role(
        RoleName=f"consumer-{tmp_path.name}"[:60], AssumeRolePolicyDocument="{}"
    )["Role"]["Arn"]
    code = io.BytesIO()
    with zipfile.ZipFile(code, "w") as archive:
        archive.writestr("app.py", "def handler(event, context):\n    return None\n")
    name = f"sweeper-exports-consumer-{tmp_path.name}"[:64]
    lam.create_function(
        FunctionName=name,
        Runtime="python3.13",
        Role=role,
        Handler="app.handler",
        Code={"ZipFile": code.getvalue()},
    )
    # The queue on moto too: moto's Lambda checks a mapping's queue against its own SQS.
    sqs = boto3.client("sqs", **kwargs)
    queue = sqs.create_queue(QueueName=f"work-{tmp_path.name}"[:80])["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=queue, AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"
    ]
    mapping = lam.create_event_source_mapping(EventSourceArn=arn, FunctionName=name)["UUID"]
    config = tmp_path / "sweeper.toml"
    config.write_text('[[policies]]\nname = "exports"\n')
    args = [
        "--consumer-function",
        name,
        "--config",
        str(config),
        "--database-url",
        db_url,
        "--local-file",
        str(tmp_path / "absent.json"),
        "--json",
    ]
    # When pausing, then resuming, against "AWS"
    paused = CliRunner().invoke(main, ["pause", *args])
    state_paused = lam.get_event_source_mapping(UUID=mapping)["State"]
    resumed = CliRunner().invoke(main, ["resume", *args])
    # Then the mapping was disabled, then enabled again, and the ledger followed
    assert paused.exit_code == 0, paused.output
    assert json.loads(paused.output)["event_source_mappings"] == [mapping]
    assert state_paused == "Disabled"
    assert resumed.exit_code == 0, resumed.output
    assert lam.get_event_source_mapping(UUID=mapping)["State"] == "Enabled"
    ledger = Ledger(db_url)
    assert not ledger.is_paused("exports")
    ledger.close()


def test_local_up_runs_the_stack_in_the_background_and_local_down_stops_it(
    db_url: str, console_config: Path, tmp_path: Path, vendor: VendorSimulator
) -> None:
    local_file = tmp_path / "state" / "local.json"
    common = ["--local-file", str(local_file), "--json"]
    with_password = f"{db_url} password=s3cr3t-pw"  # the local server trusts: accepted
    up = CliRunner().invoke(
        main,
        [
            "local",
            "up",
            "--config",
            str(console_config),
            "--database-url",
            with_password,
            "--api-url",
            vendor.url,
            *common,
        ],
    )
    try:
        assert up.exit_code == 0, up.output
        written = json.loads(up.output)
        assert "s3cr3t-pw" not in up.output
        assert written["database_url"].endswith("password=***")
        assert written["vendor_url"] == vendor.url  # --api-url: no simulator of its own
        assert local_file.exists()
        assert set(written["policies"]) == {"exports"}
        # the webhook's URL is printed, its signing secret only written to the file
        on_disk = json.loads(local_file.read_text(encoding="utf-8"))
        assert written["webhook_url"] == on_disk["webhook_url"]
        assert len(on_disk["webhook_secret"]) == 64
        assert on_disk["webhook_secret"] not in up.output
        status = sweeper(local_file, "status")
        assert status["target"] == "local"
        assert status["policies"][0]["dlq"] == {"messages": 0, "in_flight": 0}
        again = CliRunner().invoke(main, ["local", "up", "--config", str(console_config), *common])
        assert again.exit_code == 1
        assert "already runs" in again.output
    finally:
        down = CliRunner().invoke(main, ["local", "down", *common])
    assert json.loads(down.output) == {"stopped": True, "pid": written["pid"]}
    assert not local_file.exists()

"""`schedule` reaches the local stack, `release` runs the producer now, `status` says when next.

Against the console's local stack (its consumers working, its producer ticking on a daily cron
schedule, so nothing runs by itself during the test), and against the AWS emulator's Lambda
Invoke for the deployed path.
"""

from __future__ import annotations

import json
import time
import urllib.request
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import boto3
import pytest
from click.testing import CliRunner

from functions.producer import app as producer_app
from sweeper.events import ScheduleEvent
from sweeper.ledger.store import Ledger
from sweeper.models import JobStatus
from sweeper_cli import main
from sweeper_local.aws import LocalAws
from sweeper_local.scenarios import SCENARIO_CONFIG
from tests.conftest import Pipeline, load_event
from tests.integration.conftest import StartConsole

pytestmark = pytest.mark.integration

#: The scenarios' policy, on a schedule that fires once a day at 03:00 UTC.
DAILY = SCENARIO_CONFIG.replace('schedule = "rate(1 minute)"', 'schedule = "cron(0 3 * * ? *)"')


@pytest.fixture
def console_config(tmp_path: Path) -> Path:
    """Overrides the console fixture's policy file: a daily schedule."""
    assert DAILY != SCENARIO_CONFIG
    path = tmp_path / "sweeper.toml"
    path.write_text(DAILY, encoding="utf-8")
    return path


def cli(*args: str) -> Any:
    result = CliRunner().invoke(main, list(args), prog_name="sweeper")
    assert result.exit_code == 0, result.output
    return result


def poll(check: Callable[[], bool], timeout_seconds: float) -> bool:
    deadline = time.monotonic() + timeout_seconds
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.2)
    return check()


def next_0300(now: datetime) -> datetime:
    today = now.replace(hour=3, minute=0, second=0, microsecond=0)
    return today if today > now else today + timedelta(days=1)


def test_schedule_reaches_the_local_stack_and_release_runs_its_producer_now(
    start_console: StartConsole, db_url: str, tmp_path: Path
) -> None:
    # Given the local stack running, and a file of one obligation due now
    _, local_file = start_console()
    due = tmp_path / "due.csv"
    due.write_text("tenant_id,object_id\nt1,o1\n")
    key = "exports:t1:o1:v1"
    ledger = Ledger(db_url)
    # When it is scheduled with no database URL or policy file named: the local stack's are used
    before = datetime.now(UTC)
    scheduled = cli("schedule", str(due), "--policy", "exports", "--local-file", str(local_file))
    # Then it is in the local ledger, and the command says when the producer runs and how not
    # to wait
    job = ledger.get(key)
    assert job is not None
    assert job.status is JobStatus.PENDING
    assert "inserted" in scheduled.stdout
    assert scheduled.stderr.strip() == (
        f"the local producer of exports releases due work at {next_0300(before).isoformat()}; "
        "`sweeper release --policy exports` releases it now"
    )
    # When the operator releases it
    released = json.loads(
        cli("release", "--policy", "exports", "--local-file", str(local_file), "--json").stdout
    )
    # Then the producer ran now, published it, and the local consumers settle it
    assert (released["discovered"], released["published"]) == (1, 1)
    assert released["batch_id"].startswith("release-")

    def settled() -> bool:
        found = ledger.get(key)
        return found is not None and found.status is JobStatus.SUCCEEDED

    assert poll(settled, timeout_seconds=60)
    # And status shows the release among the runs, and the next scheduled run
    status = json.loads(cli("status", "--local-file", str(local_file), "--json").stdout)
    shown = status["policies"][0]
    assert shown["next_run"] == next_0300(datetime.now(UTC)).isoformat()
    assert shown["schedule"] == "cron(0 3 * * ? *)"
    assert [r["batch_id"] for r in shown["runs"]] == [released["batch_id"]]
    people = cli("status", "--local-file", str(local_file)).stdout
    assert f"next run        {shown['next_run']}" in people
    ledger.close()


def test_release_is_refused_while_the_policy_is_paused(
    start_console: StartConsole, db_url: str
) -> None:
    _, local_file = start_console()
    cli("pause", "--local-file", str(local_file))
    result = CliRunner().invoke(main, ["release", "--local-file", str(local_file)])
    assert result.exit_code == 1
    assert result.stderr.strip() == (
        "Error: OperatorError: policy exports is paused: `sweeper resume` it first"
    )
    ledger = Ledger(db_url)
    assert ledger.runs("exports") == []
    ledger.close()


def test_a_release_never_anchors_a_rate_schedule(ledger: Ledger) -> None:
    # Given a scheduled run, then a release a little later
    scheduled = datetime(2026, 11, 29, 2, 0, tzinfo=UTC)
    released = scheduled + timedelta(minutes=2, microseconds=1)
    ledger.start_run("exports", scheduled, "batch-1", scheduled)
    ledger.start_run("exports", released, "release-1", released)
    # Then the series is still anchored at the scheduled run
    later = scheduled + timedelta(minutes=3)
    assert ledger.last_run_at_or_before("exports", later) == scheduled


def test_the_producer_handler_records_a_release_as_one(pipeline: Pipeline) -> None:
    pipeline.seed(3)
    report = producer_app.handler(
        load_event("release_event.json"), pipeline.lambda_context("producer")
    )
    assert report["published"] == 3
    assert report["batch_id"].startswith("release-")


@pytest.fixture
def lambda_emulator() -> Iterator[LocalAws]:
    """An AWS emulator of this test's own whose Lambda runs no code: Invoke answers with the
    payload it received, so the test sees exactly what the function would have been given."""
    with LocalAws() as aws:
        request = urllib.request.Request(
            f"{aws.endpoint_url}/moto-api/config",
            data=json.dumps({"lambda": {"use_docker": False}}).encode(),
            method="POST",
        )
        urllib.request.urlopen(request).close()
        yield aws


def test_release_on_aws_invokes_the_deployed_producer_with_a_release_event(
    lambda_emulator: LocalAws, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a deployed stack whose outputs name the producer function
    for name, value in lambda_emulator.env().items():
        monkeypatch.setenv(name, value)
    kwargs: dict[str, Any] = {"endpoint_url": lambda_emulator.endpoint_url}
    iam, lam = boto3.client("iam", **kwargs), boto3.client("lambda", **kwargs)
    role = iam.create_role(RoleName="producer", AssumeRolePolicyDocument="{}")["Role"]["Arn"]
    lam.create_function(
        FunctionName="sweeper-exports-producer",
        Runtime="python3.13",
        Role=role,
        Handler="app.handler",
        Code={"ZipFile": b"PK\x05\x06" + b"\x00" * 18},
    )
    template = {
        "Resources": {"Topic": {"Type": "AWS::SNS::Topic"}},
        "Outputs": {"ExportsProducerFunctionName": {"Value": "sweeper-exports-producer"}},
    }
    boto3.client("cloudformation", **kwargs).create_stack(
        StackName="Sweeper", TemplateBody=json.dumps(template)
    )
    config = tmp_path / "sweeper.toml"
    config.write_text('[[policies]]\nname = "exports"\n')
    # When the operator releases the policy on "AWS"
    before = datetime.now(UTC)
    result = CliRunner().invoke(
        main,
        [
            "release",
            "--config",
            str(config),
            "--local-file",
            str(tmp_path / "absent.json"),
            "--json",
        ],
        env={"DATABASE_URL": None, "SWEEPER_DATABASE_URL": None},
    )
    # Then the function was invoked with an event its handler parses as a release of now
    assert result.exit_code == 0, result.output
    received = ScheduleEvent.model_validate(json.loads(result.stdout))
    assert received.source == "sweeper.release"
    assert (received.detail.policy, received.detail.release) == ("exports", True)
    assert before <= received.time <= datetime.now(UTC)

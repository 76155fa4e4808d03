"""`sweeper schedule --stack S`: obligations through the stack's intake queue, no database."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import boto3
import pytest
from click.testing import CliRunner

from sweeper.config import Policy
from sweeper.intake.hints import parse_queue_body
from sweeper_cli import main
from sweeper_local.aws import LocalAws, provision_intake


def _stack(local_aws: LocalAws, name: str, outputs: dict[str, str]) -> None:
    template = {
        "Resources": {"Topic": {"Type": "AWS::SNS::Topic"}},
        "Outputs": {key: {"Value": value} for key, value in outputs.items()},
    }
    boto3.client("cloudformation", endpoint_url=local_aws.endpoint_url).create_stack(
        StackName=name, TemplateBody=json.dumps(template)
    )


def _schedule(tmp_path: Path, stack: str, text: str) -> Any:
    config = tmp_path / "sweeper.toml"
    config.write_text('[[policies]]\nname = "exports"\n')
    source = tmp_path / "jobs.csv"
    source.write_text(text)
    return CliRunner().invoke(
        main,
        [
            "schedule",
            str(source),
            "--policy",
            "exports",
            "--stack",
            stack,
            "--config",
            str(config),
            "--local-file",
            str(tmp_path / "absent.json"),
            "--json",
        ],
        env={"DATABASE_URL": None, "SWEEPER_DATABASE_URL": None},
    )


def test_schedule_with_a_stack_sends_the_file_through_its_intake_queue(
    local_aws: LocalAws, aws_env: dict[str, str], unique_name: str, tmp_path: Path
) -> None:
    # Given a deployed stack with an intake queue, and no database URL anywhere
    resources = provision_intake(
        local_aws.sqs(),
        local_aws.dynamodb(),
        local_aws.secretsmanager(),
        Policy(name="exports"),
        prefix=unique_name,
    )
    _stack(local_aws, unique_name, {"ExportsIntakeQueueUrl": resources.queue_url})

    # When the operator schedules a file with --stack
    result = _schedule(
        tmp_path, unique_name, "tenant_id,object_id,due_at\nt1,o1,2026-12-01T00:00:00Z\nt2,o2,\n"
    )

    # Then the hints are on the intake queue, as one message the intake function reads
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert (report["sent"], report["messages"], report["via"]) == (2, 1, "intake queue")
    messages = local_aws.sqs().receive_message(
        QueueUrl=resources.queue_url, MaxNumberOfMessages=10
    )["Messages"]
    source, jobs = parse_queue_body(messages[0]["Body"], "exports")
    assert source == "file"
    assert [(j.tenant_id, j.object_id) for j in jobs] == [("t1", "o1"), ("t2", "o2")]


def test_a_bad_file_sends_nothing(
    local_aws: LocalAws, aws_env: dict[str, str], unique_name: str, tmp_path: Path
) -> None:
    resources = provision_intake(
        local_aws.sqs(),
        local_aws.dynamodb(),
        local_aws.secretsmanager(),
        Policy(name="exports"),
        prefix=unique_name,
    )
    _stack(local_aws, unique_name, {"ExportsIntakeQueueUrl": resources.queue_url})

    result = _schedule(tmp_path, unique_name, "tenant_id,object_id\nt1,o1\nt2\n")

    assert result.exit_code == 1
    assert "line 3" in result.output
    assert "Traceback" not in result.output
    attributes = local_aws.sqs().get_queue_attributes(
        QueueUrl=resources.queue_url, AttributeNames=["ApproximateNumberOfMessages"]
    )["Attributes"]
    assert attributes["ApproximateNumberOfMessages"] == "0"


def test_a_stack_without_an_intake_queue_is_a_one_line_error(
    local_aws: LocalAws, aws_env: dict[str, str], unique_name: str, tmp_path: Path
) -> None:
    _stack(local_aws, unique_name, {"ExportsQueueUrl": "https://example.invalid/q"})

    result = _schedule(tmp_path, unique_name, "tenant_id,object_id\nt1,o1\n")

    assert result.exit_code != 0
    assert "no intake queue for policy 'exports'" in result.output
    assert len(result.output.strip().splitlines()) == 1


@pytest.fixture(autouse=True)
def _no_ambient_database(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DATABASE_URL", raising=False)


def test_status_shows_the_intake_queue_and_its_dlq(
    local_aws: LocalAws, aws_env: dict[str, str], unique_name: str, tmp_path: Path, db_url: str
) -> None:
    # Given a stack whose intake queue holds one message and whose DLQ holds none
    resources = provision_intake(
        local_aws.sqs(),
        local_aws.dynamodb(),
        local_aws.secretsmanager(),
        Policy(name="exports"),
        prefix=unique_name,
    )
    _stack(
        local_aws,
        unique_name,
        {
            "ExportsIntakeQueueUrl": resources.queue_url,
            "ExportsIntakeDeadLetterQueueUrl": resources.dlq_url,
        },
    )
    local_aws.sqs().send_message(QueueUrl=resources.queue_url, MessageBody="{}")
    config = tmp_path / "sweeper.toml"
    config.write_text('[[policies]]\nname = "exports"\n')

    # When the operator asks for the status
    result = CliRunner().invoke(
        main,
        [
            "status",
            "--stack",
            unique_name,
            "--config",
            str(config),
            "--database-url",
            db_url,
            "--local-file",
            str(tmp_path / "absent.json"),
            "--json",
        ],
    )

    # Then the intake queue and its DLQ are shown with their depths
    assert result.exit_code == 0, result.output
    (policy,) = json.loads(result.stdout)["policies"]
    assert policy["intake"] == {"messages": 1, "in_flight": 0}
    assert policy["intake_dlq"] == {"messages": 0, "in_flight": 0}

"""`sweeper doctor` against the local AWS endpoint (moto server): SSM, CloudFormation, STS, Lambda.

Each test uses a region of its own, so the bootstrap parameter and stacks of one test are not
seen by another on the shared emulator. Checks whose APIs moto lacks are in tests/unit.
"""

from __future__ import annotations

import itertools
import json
from datetime import date
from pathlib import Path
from typing import Any

import boto3
import pytest
from click.testing import CliRunner

from sweeper.config import SweeperConfig
from sweeper_cli import main
from sweeper_local.aws import LocalAws
from sweeper_tools.doctor import (
    CDK_BOOTSTRAP_VERSION_PARAMETER,
    Status,
    check_action_targets,
    check_cdk_bootstrap,
    check_stack,
    run_doctor,
    stack_reserved_concurrency,
)

pytestmark = pytest.mark.integration

_REGIONS = itertools.cycle(
    [
        "eu-west-2",
        "eu-west-3",
        "eu-north-1",
        "eu-south-1",
        "ap-south-1",
        "ap-northeast-1",
        "ap-northeast-2",
        "ap-southeast-1",
        "ap-southeast-2",
        "ca-central-1",
        "sa-east-1",
        "us-west-1",
    ]
)
ACCOUNT = "123456789012"  # moto's default account

#: A stack with one function that reserves 7: what a deployed stack's functions hold.
FUNCTION_STACK = {
    "Resources": {
        "Role": {
            "Type": "AWS::IAM::Role",
            "Properties": {
                "AssumeRolePolicyDocument": {
                    "Version": "2012-10-17",
                    "Statement": [
                        {
                            "Effect": "Allow",
                            "Principal": {"Service": "lambda.amazonaws.com"},
                            "Action": "sts:AssumeRole",
                        }
                    ],
                }
            },
        },
        "Consumer": {
            "Type": "AWS::Lambda::Function",
            "Properties": {
                "Runtime": "python3.13",
                "Handler": "index.handler",
                "Role": {"Fn::GetAtt": ["Role", "Arn"]},
                "Code": {"ZipFile": "def handler(event, context):\n    return None\n"},
                "ReservedConcurrentExecutions": 7,
            },
        },
    }
}
EMPTY_STACK = {"Resources": {"Nothing": {"Type": "AWS::CloudFormation::WaitConditionHandle"}}}


@pytest.fixture
def region(aws_env: dict[str, str]) -> str:
    return next(_REGIONS)


@pytest.fixture
def client(region: str) -> Any:
    """Clients of the emulator in this test's region (endpoint and keys from `aws_env`)."""
    return boto3.Session(region_name=region).client


def test_a_region_without_the_bootstrap_fails_with_the_bootstrap_command(
    client: Any, region: str
) -> None:
    result = check_cdk_bootstrap(client("ssm"), client("cloudformation"), ACCOUNT, region)
    assert result.status is Status.FAIL
    assert "not bootstrapped" in result.detail
    assert result.fix == f"npx aws-cdk@2 bootstrap aws://{ACCOUNT}/{region}"


@pytest.mark.parametrize(("version", "status"), [("5", Status.FAIL), ("6", Status.OK)])
def test_the_bootstrap_must_be_at_least_the_version_the_app_needs(
    client: Any, region: str, version: str, status: Status
) -> None:
    client("ssm").put_parameter(Name=CDK_BOOTSTRAP_VERSION_PARAMETER, Value=version, Type="String")
    result = check_cdk_bootstrap(client("ssm"), client("cloudformation"), ACCOUNT, region)
    assert result.status is status, result


def test_a_toolkit_stack_without_the_version_parameter_is_named(client: Any, region: str) -> None:
    client("cloudformation").create_stack(
        StackName="CDKToolkit", TemplateBody=json.dumps(EMPTY_STACK)
    )
    result = check_cdk_bootstrap(client("ssm"), client("cloudformation"), ACCOUNT, region)
    assert result.status is Status.FAIL
    assert "another qualifier" in result.detail


def test_a_stack_that_does_not_exist_is_a_first_deploy(client: Any) -> None:
    result = check_stack(client("cloudformation"), "Sweeper")
    assert result.status is Status.OK
    assert "first deploy" in result.detail


def test_a_complete_stack_can_be_deployed_to(client: Any) -> None:
    client("cloudformation").create_stack(StackName="Sweeper", TemplateBody=json.dumps(EMPTY_STACK))
    result = check_stack(client("cloudformation"), "Sweeper")
    assert (result.status, result.detail) == (Status.OK, "Sweeper is CREATE_COMPLETE")


def test_an_existing_stacks_reservations_are_read_from_its_functions(client: Any) -> None:
    client("cloudformation").create_stack(
        StackName="Sweeper", TemplateBody=json.dumps(FUNCTION_STACK)
    )
    assert stack_reserved_concurrency(client("cloudformation"), client("lambda"), "Sweeper") == 7
    assert stack_reserved_concurrency(client("cloudformation"), client("lambda"), "Other") == 0


def _policy_file(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "sweeper.toml"
    path.write_text(body, encoding="utf-8")
    return path


def test_doctor_runs_every_check_against_the_account(
    client: Any, region: str, tmp_path: Path
) -> None:
    # Given a bootstrapped region and a valid policy file
    client("ssm").put_parameter(Name=CDK_BOOTSTRAP_VERSION_PARAMETER, Value="30", Type="String")
    config = _policy_file(tmp_path, '[[policies]]\nname = "exports"\n')
    # When
    results = run_doctor(
        client, region=region, config_path=config, stack="Sweeper", today=date(2026, 11, 29)
    )
    # Then every check reports, and those moto can answer pass
    by_name = {r.name: r for r in results}
    assert list(by_name) == [
        "credentials",
        "policy file",
        "node.js",
        "stack",
        "cdk bootstrap",
        "lambda concurrency",
        "aurora engine",
    ]
    assert all(by_name[n].status is Status.OK for n in ("credentials", "stack", "cdk bootstrap"))
    # moto has no GetAccountSettings or DescribeDBEngineVersions: unverified, never passed
    assert by_name["lambda concurrency"].status is Status.WARN
    assert by_name["aurora engine"].status is Status.WARN


def test_the_cli_fails_one_line_per_problem_without_a_traceback(
    aws_env: dict[str, str], region: str, tmp_path: Path
) -> None:
    # Given an unbootstrapped region and a policy file with a bad field
    config = _policy_file(
        tmp_path, '[[policies]]\nname = "exports"\n[policies.consumer]\nbatch_size = 20000\n'
    )
    # When
    result = CliRunner().invoke(
        main, ["doctor", "--region", region, "--config", str(config), "--stack", "Sweeper"]
    )
    # Then
    assert result.exit_code == 1, result.output
    assert "Traceback" not in result.output
    failed = [line for line in result.output.splitlines() if line.startswith("fail")]
    assert any("policies.0.consumer.batch_size" in line for line in failed)
    assert any("not bootstrapped" in line for line in failed)
    assert f"fix: npx aws-cdk@2 bootstrap aws://{ACCOUNT}/{region}" in result.output


def test_the_cli_reports_json(aws_env: dict[str, str], region: str, tmp_path: Path) -> None:
    config = _policy_file(tmp_path, '[[policies]]\nname = "exports"\n')
    result = CliRunner().invoke(
        main, ["doctor", "--region", region, "--config", str(config), "--json"]
    )
    report = json.loads(result.output)
    assert result.exit_code == 1  # the region is not bootstrapped
    assert report["ok"] is False
    assert {c["name"]: c["status"] for c in report["checks"]}["cdk bootstrap"] == "fail"


def test_no_credentials_stop_the_account_checks(tmp_path: Path) -> None:
    # Given an endpoint that does not answer
    with LocalAws() as aws:
        endpoint = aws.endpoint_url
    session = boto3.Session(
        region_name="eu-west-1", aws_access_key_id="x", aws_secret_access_key="y"
    )
    config = _policy_file(tmp_path, '[[policies]]\nname = "exports"\n')

    def client(service: str) -> Any:
        return session.client(service, endpoint_url=endpoint)  # type: ignore[call-overload]

    results = run_doctor(
        client, region="eu-west-1", config_path=config, stack="S", today=date(2026, 11, 29)
    )
    assert [r.name for r in results] == ["credentials", "policy file", "node.js"]
    assert results[0].status is Status.FAIL


def test_each_action_kinds_target_is_checked(client: Any, region: str) -> None:
    # Given one policy per kind that calls something of the team's own: a bucket that exists,
    # a function that does not, a callable that imports
    fixtures = Path(__file__).resolve().parents[1] / "infra" / "fixtures"
    client("s3").create_bucket(
        Bucket="acme-doctor-exports", CreateBucketConfiguration={"LocationConstraint": region}
    )
    config = SweeperConfig.model_validate(
        {
            "policies": [
                {
                    "name": "exports",
                    "action": {
                        "kind": "s3_delete",
                        "bucket": "acme-doctor-exports",
                        "key_template": "exports/{tenant_id}/{object_id+}",
                    },
                },
                {
                    "name": "gone",
                    "action": {
                        "kind": "s3_delete",
                        "bucket": "acme-doctor-missing",
                        "key_template": "exports/{object_id}",
                    },
                },
                {
                    "name": "reconcile",
                    "action": {
                        "kind": "lambda",
                        "function_arn": f"arn:aws:lambda:{region}:{ACCOUNT}:function:acme-x",
                    },
                },
                {
                    "name": "cleanup",
                    "action": {
                        "kind": "python",
                        "callable": "acme_actions.cleanup:run",
                        "package_path": "actions_pkg",
                    },
                },
            ]
        }
    )
    # When doctor checks the actions' targets
    results = check_action_targets(config, client, fixtures)
    # Then each is named with what was found
    assert [(r.name, r.status, r.detail) for r in results] == [
        ("exports action", Status.OK, "bucket acme-doctor-exports: reachable"),
        ("gone action", Status.FAIL, "bucket acme-doctor-missing: does not exist"),
        ("reconcile action", Status.FAIL, "function acme-x: does not exist"),
        (
            "cleanup action",
            Status.OK,
            "callable acme_actions.cleanup:run: importable from actions_pkg",
        ),
    ]

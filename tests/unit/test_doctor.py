"""`sweeper doctor`'s checks where the local AWS emulator cannot answer.

moto (the local AWS endpoint) implements neither Lambda's GetAccountSettings nor RDS's
DescribeDBEngineVersions, and cannot put a stack into ROLLBACK_COMPLETE. These checks get real
botocore clients with a `Stubber`: requests and replies are validated against the service models,
nothing is sent. The Node.js check runs a real executable. The rest is in
tests/integration/test_doctor.py, against the emulator.
"""

from __future__ import annotations

import stat
from collections.abc import Iterator
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber

from sweeper.config import ConsumerConfig, IntakeConfig, Policy, SweeperConfig
from sweeper_tools.doctor import (
    AURORA_POSTGRES_ENGINE,
    AURORA_POSTGRES_VERSION,
    Status,
    check_account_concurrency,
    check_engine_version,
    check_node,
    check_policy_file,
    check_stack,
    render,
    required_reserved_concurrency,
)

TODAY = date(2026, 11, 29)


def _stubbed(service: str) -> tuple[Any, Stubber]:
    client = boto3.client(
        service,  # type: ignore[call-overload]
        region_name="eu-west-1",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    )
    return client, Stubber(client)


@pytest.fixture
def lambda_settings() -> Iterator[Any]:
    """A Lambda client whose next GetAccountSettings answers with the given limits."""
    client, stubber = _stubbed("lambda")

    def answer(total: int, unreserved: int) -> Any:
        stubber.add_response(
            "get_account_settings",
            {
                "AccountLimit": {
                    "ConcurrentExecutions": total,
                    "UnreservedConcurrentExecutions": unreserved,
                }
            },
            {},
        )
        stubber.activate()
        return client

    yield answer
    stubber.assert_no_pending_responses()


def _config(*reserved: int) -> SweeperConfig:
    return SweeperConfig(
        policies=[
            Policy(
                name=f"p{i}",
                consumer=ConsumerConfig(reserved_concurrency=r, max_concurrency=min(r, 2)),
            )
            for i, r in enumerate(reserved)
        ]
    )


def test_the_stack_reserves_each_consumer_redrive_intake_webhook_and_prune_function() -> None:
    # the operator API (5 + 5); consumer + redrive + prune + intake (2) + webhook (5), per policy
    assert required_reserved_concurrency(_config(4, 10)) == 10 + (4 + 1 + 1 + 2 + 5) + (
        10 + 1 + 1 + 2 + 5
    )


def test_a_policy_without_webhook_reserves_nothing_for_it() -> None:
    policy = Policy(name="p", intake=IntakeConfig(webhook=False, reserved_concurrency=3))
    assert required_reserved_concurrency(SweeperConfig(policies=[policy])) == 10 + 4 + 1 + 1 + 3


def test_an_account_limit_below_100_plus_the_reservations_fails(lambda_settings: Any) -> None:
    # Given a new account's limit of 10 and a stack that reserves 10 + 4 + 1 + 1 + 2 + 5
    client = lambda_settings(total=10, unreserved=10)
    # When
    result = check_account_concurrency(client, required_reserved_concurrency(_config(4)))
    # Then
    assert result.status is Status.FAIL
    assert "at least 123" in result.detail
    assert result.fix is not None
    assert "L-B99A9384" in result.fix
    assert "123" in result.fix


def test_other_functions_reservations_can_leave_too_little(lambda_settings: Any) -> None:
    client = lambda_settings(total=1000, unreserved=102)
    result = check_account_concurrency(client, 5)
    assert result.status is Status.FAIL
    assert result.fix is not None
    assert "free 3" in result.fix


def test_the_existing_stacks_own_reservations_are_credited(lambda_settings: Any) -> None:
    # Given a deployed stack that already reserves 5 of the account's 1000
    client = lambda_settings(total=1000, unreserved=100)
    # Then redeploying the same 5 leaves 100 unreserved: fine
    assert check_account_concurrency(client, 5, reserved_by_stack=5).status is Status.OK


def test_an_account_with_room_passes(lambda_settings: Any) -> None:
    assert check_account_concurrency(lambda_settings(1000, 1000), 5).status is Status.OK


def _engine_reply(*versions: dict[str, Any]) -> Any:
    client, stubber = _stubbed("rds")
    stubber.add_response(
        "describe_db_engine_versions",
        {"DBEngineVersions": list(versions)},
        {"Engine": AURORA_POSTGRES_ENGINE, "EngineVersion": AURORA_POSTGRES_VERSION},
    )
    stubber.activate()
    return client


def test_an_engine_version_the_region_does_not_offer_fails() -> None:
    result = check_engine_version(_engine_reply(), "eu-west-1")
    assert result.status is Status.FAIL
    assert f"{AURORA_POSTGRES_VERSION} not offered in eu-west-1" in result.detail
    assert result.fix is not None
    assert "describe-db-engine-versions" in result.fix


def test_an_offered_engine_version_passes_and_a_deprecated_one_warns() -> None:
    offered = {"Engine": AURORA_POSTGRES_ENGINE, "EngineVersion": AURORA_POSTGRES_VERSION}
    ok = check_engine_version(_engine_reply({**offered, "Status": "available"}), "eu-west-1")
    old = check_engine_version(_engine_reply({**offered, "Status": "deprecated"}), "eu-west-1")
    assert (ok.status, old.status) == (Status.OK, Status.WARN)


@pytest.mark.parametrize(
    ("stack_status", "fix_says"),
    [
        ("ROLLBACK_COMPLETE", "destroy -c stack_name=Sweeper"),
        ("ROLLBACK_FAILED", "--no-deletion-protection"),
        ("UPDATE_ROLLBACK_FAILED", "continue-update-rollback"),
        ("UPDATE_IN_PROGRESS", "wait"),
    ],
)
def test_a_stack_a_deploy_cannot_start_from_fails_with_its_way_out(
    stack_status: str, fix_says: str
) -> None:
    client, stubber = _stubbed("cloudformation")
    stubber.add_response(
        "describe_stacks",
        {
            "Stacks": [
                {
                    "StackName": "Sweeper",
                    "CreationTime": datetime(2026, 11, 29, tzinfo=UTC),
                    "StackStatus": stack_status,
                }
            ]
        },
        {"StackName": "Sweeper"},
    )
    stubber.activate()
    result = check_stack(client, "Sweeper")
    assert result.status is Status.FAIL
    assert stack_status in result.detail
    assert result.fix is not None
    assert fix_says in result.fix


def _fake_node(tmp_path: Path, prints: str) -> str:
    path = tmp_path / "node"
    path.write_text(f"#!/bin/sh\necho '{prints}'\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


@pytest.mark.parametrize(
    ("version", "status"),
    [
        ("v16.20.2", Status.FAIL),
        ("v18.20.4", Status.FAIL),
        ("v20.19.0", Status.WARN),  # the CDK's support ended 2026-10-30
        ("v22.11.0", Status.OK),
        ("v24.1.0", Status.OK),
        ("v23.3.0", Status.WARN),  # not an LTS
        ("not a version", Status.FAIL),
    ],
)
def test_node_versions_outside_the_cdks_support_are_flagged(
    tmp_path: Path, version: str, status: Status
) -> None:
    assert check_node(TODAY, _fake_node(tmp_path, version)).status is status


def test_no_node_on_the_path_fails(tmp_path: Path) -> None:
    result = check_node(TODAY, str(tmp_path / "absent"))
    assert result.status is Status.FAIL
    assert result.fix == "install Node.js 22 or 24 (LTS)"


def test_the_report_prints_each_check_and_the_fix_below_a_problem(tmp_path: Path) -> None:
    lines = render([check_node(TODAY, _fake_node(tmp_path, "v18.0.0"))], as_json=False)
    assert lines.splitlines() == [
        "fail  node.js  v18.0.0: not supported by the CDK",
        "               fix: install Node.js 22 or 24 (LTS)",
    ]


def test_a_binary_policy_file_fails_the_check_without_raising(tmp_path: Path) -> None:
    path = tmp_path / "sweeper.toml"
    path.write_bytes(b"\xff\xfe\x00binary")
    result, config = check_policy_file(path)
    assert (result.status, config) == (Status.FAIL, None)
    assert "UTF-8" in result.detail

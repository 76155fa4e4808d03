"""`sweeper doctor`: what would make a deploy into this account fail, found before deploying.

Each check is a small function over boto3 clients (or the local `node`) that returns one
`CheckResult`: ok, warn (could not be verified, or works but unsupported) or fail (the deploy
would fail, or could not roll back), with a one-line fix. The checks read; none writes.

The figures the CDK app deploys with (the Aurora engine version, the redrive function's reserved
concurrency) are restated here as plain values, because the CLI does not start the CDK;
tests/infra/test_doctor.py checks them against the synthesized template.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import asdict, dataclass
from datetime import date
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any

import boto3
from botocore.exceptions import BotoCoreError, ClientError
from botocore.parsers import ResponseParserError

from sweeper.actions.base import ActionContext
from sweeper.config import SweeperConfig
from sweeper.errors import ConfigError, OperatorError
from sweeper_tools.deploy import deploy_for
from sweeper_tools.policy_file import load_config

if TYPE_CHECKING:
    from mypy_boto3_lambda import LambdaClient

#: Where the CDK's default synthesizer (qualifier hnb659fds) reads the bootstrap version; the
#: template's CheckBootstrapVersion rule and the asset manifests name this parameter.
CDK_BOOTSTRAP_VERSION_PARAMETER = "/cdk-bootstrap/hnb659fds/version"
CDK_TOOLKIT_STACK = "CDKToolkit"
#: The oldest bootstrap the app accepts (aws-cdk-lib's DefaultStackSynthesizer; lookups would
#: need 8, and the app makes none).
MIN_CDK_BOOTSTRAP_VERSION = 6
#: Lambda refuses a reservation that leaves less than this unreserved in the account.
LAMBDA_MIN_UNRESERVED_CONCURRENCY = 100
#: What infra/database.py deploys for a new cluster (AURORA_ENGINE_VERSION).
AURORA_POSTGRES_ENGINE = "aurora-postgresql"
AURORA_POSTGRES_VERSION = "17.7"
#: What infra/redrive.py reserves for each policy's redrive function.
REDRIVE_RESERVED_CONCURRENCY = 1
PRUNE_RESERVED_CONCURRENCY = 1
DISCOVERY_RESERVED_CONCURRENCY = 1
#: The operator API: its read-only and its operator function, 5 each (infra/operator_api.py).
OPERATOR_API_RESERVED_CONCURRENCY = 2 * 5
#: Node.js majors the CDK supports, and when that support ends (the AWS CDK developer guide,
#: "Supported Node.js versions": an LTS is supported until 6 months after its end of life).
NODE_SUPPORT_ENDS = {20: date(2026, 10, 30), 22: date(2027, 10, 30), 24: date(2028, 10, 30)}
NODE_TIMEOUT_SECONDS = 10
#: How long the action checks wait on an outside endpoint (an OAuth2 token endpoint).
ACTION_CHECK_TIMEOUT_SECONDS = 10.0
#: What a read that did not succeed raises (an unparseable reply is not a ClientError).
_AWS_ERRORS = (ClientError, BotoCoreError, ResponseParserError)

#: A stack in one of these states cannot be deployed to as it is.
_STACK_BLOCKED = {
    "ROLLBACK_COMPLETE": "it never finished creating: delete it ({delete}), then deploy again",
    "ROLLBACK_FAILED": (
        "its rollback could not delete everything (a cluster with deletion protection?): lift "
        "the protection (aws rds modify-db-cluster --no-deletion-protection), then {delete}"
    ),
    "CREATE_FAILED": "delete it ({delete}), then deploy again",
    "DELETE_FAILED": (
        "lift the cluster's deletion protection (aws rds modify-db-cluster "
        "--no-deletion-protection), then {delete} again"
    ),
    "UPDATE_ROLLBACK_FAILED": (
        "continue the rollback (aws cloudformation continue-update-rollback --stack-name "
        "{stack}), then deploy again"
    ),
    "IMPORT_ROLLBACK_FAILED": "fix the import in the console, then deploy again",
}


class Status(StrEnum):
    OK = "ok"
    WARN = "warn"
    FAIL = "fail"


@dataclass(frozen=True)
class CheckResult:
    """One check: what it found, and the fix when it is not ok."""

    name: str
    status: Status
    detail: str
    fix: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "status": self.status.value}


def _error_code(exc: Exception) -> str:
    if isinstance(exc, ClientError):
        return str(exc.response.get("Error", {}).get("Code", type(exc).__name__))
    return type(exc).__name__


def _unverified(name: str, what: str, exc: Exception) -> CheckResult:
    return CheckResult(
        name,
        Status.WARN,
        f"could not read {what}: {_error_code(exc)}",
        "let the deploying identity read it, or check it by hand; the deploy may fail here",
    )


def check_identity(sts: Any) -> tuple[CheckResult, str | None]:
    """Credentials that reach AWS; returns the account id for the other checks' fixes."""
    try:
        account = str(sts.get_caller_identity()["Account"])
    except _AWS_ERRORS as exc:
        return (
            CheckResult(
                "credentials",
                Status.FAIL,
                f"no usable AWS credentials: {_error_code(exc)}",
                "pass --profile or set AWS credentials, and --region",
            ),
            None,
        )
    return CheckResult("credentials", Status.OK, f"account {account}"), account


def check_policy_file(path: str | Path) -> tuple[CheckResult, SweeperConfig | None]:
    """The policy file, validated by the same model synth uses."""
    fix = "correct the field named, or pass --config"
    try:
        config = load_config(path)
    except ConfigError as exc:
        return CheckResult("policy file", Status.FAIL, str(exc), fix), None
    except (UnicodeDecodeError, OSError) as exc:  # a binary file, a directory: never a traceback
        detail = f"policy file {path} cannot be read as UTF-8 TOML ({type(exc).__name__})"
        return CheckResult(
            "policy file", Status.FAIL, detail, "pass --config with a TOML file"
        ), None
    names = ", ".join(p.name for p in config.policies)
    return CheckResult("policy file", Status.OK, f"{path}: policies {names}"), config


def required_reserved_concurrency(config: SweeperConfig) -> int:
    """What the stack reserves: the operator API's two functions; each policy's consumer,
    redrive, intake and webhook functions, and its prune and discovery functions when it has
    them."""
    return OPERATOR_API_RESERVED_CONCURRENCY + sum(
        p.consumer.reserved_concurrency
        + REDRIVE_RESERVED_CONCURRENCY
        + p.intake.reserved_concurrency
        + (p.intake.webhook_reserved_concurrency if p.intake.webhook else 0)
        + (PRUNE_RESERVED_CONCURRENCY if p.retention.enabled else 0)
        + (DISCOVERY_RESERVED_CONCURRENCY if p.discovery is not None else 0)
        for p in config.policies
    )


def stack_reserved_concurrency(cloudformation: Any, lambda_client: LambdaClient, stack: str) -> int:
    """What an existing stack's functions reserve now (a redeploy replaces, not adds, it)."""
    total = 0
    try:
        pages = cloudformation.get_paginator("list_stack_resources").paginate(StackName=stack)
        names = [
            r["PhysicalResourceId"]
            for page in pages
            for r in page["StackResourceSummaries"]
            if r["ResourceType"] == "AWS::Lambda::Function" and r.get("PhysicalResourceId")
        ]
    except _AWS_ERRORS:
        return 0  # no such stack (or unreadable): nothing to credit
    for name in names:
        try:
            reserved = lambda_client.get_function_concurrency(FunctionName=name)
        except _AWS_ERRORS:
            continue  # gone meanwhile, or unreadable: credit nothing for it
        total += int(reserved.get("ReservedConcurrentExecutions", 0))
    return total


def check_account_concurrency(
    lambda_client: LambdaClient, required: int, reserved_by_stack: int = 0
) -> CheckResult:
    """The account's Lambda concurrency leaves 100 unreserved after the stack's reservations."""
    name = "lambda concurrency"
    try:
        limit = lambda_client.get_account_settings()["AccountLimit"]
    except _AWS_ERRORS as exc:
        return _unverified(name, "the Lambda account settings", exc)
    total = int(limit.get("ConcurrentExecutions", 0))
    unreserved = int(limit.get("UnreservedConcurrentExecutions", 0)) + reserved_by_stack
    need = LAMBDA_MIN_UNRESERVED_CONCURRENCY + required
    detail = (
        f"account limit {total}, unreserved {unreserved}; the stack reserves {required} and "
        f"Lambda keeps {LAMBDA_MIN_UNRESERVED_CONCURRENCY} unreserved"
    )
    if total < need:
        return CheckResult(
            name,
            Status.FAIL,
            f"{detail}: the limit must be at least {need}",
            f"request a Lambda 'Concurrent executions' quota of at least {need} (Service "
            "Quotas, code L-B99A9384), or lower consumer.reserved_concurrency or "
            "intake.reserved_concurrency / webhook_reserved_concurrency",
        )
    if unreserved < need:
        return CheckResult(
            name,
            Status.FAIL,
            f"{detail}: other functions' reservations leave {unreserved}, below {need}",
            f"free {need - unreserved} reserved concurrency elsewhere, raise the quota, or "
            "lower consumer.reserved_concurrency",
        )
    return CheckResult(name, Status.OK, detail)


def check_engine_version(
    rds: Any, region: str, version: str = AURORA_POSTGRES_VERSION
) -> CheckResult:
    """The Aurora PostgreSQL version the app deploys is offered in the region."""
    name = "aurora engine"
    try:
        found = rds.describe_db_engine_versions(
            Engine=AURORA_POSTGRES_ENGINE, EngineVersion=version
        )["DBEngineVersions"]
    except _AWS_ERRORS as exc:
        return _unverified(name, "the Aurora engine versions", exc)
    fix = (
        f"set AURORA_ENGINE_VERSION in infra/database.py (and {__name__}."
        "AURORA_POSTGRES_VERSION) to one listed by `aws rds describe-db-engine-versions "
        f"--engine {AURORA_POSTGRES_ENGINE} --region {region}`, or import a cluster"
    )
    if not found:
        return CheckResult(
            name, Status.FAIL, f"{AURORA_POSTGRES_ENGINE} {version} not offered in {region}", fix
        )
    status = str(found[0].get("Status", "available"))
    if status != "available":
        return CheckResult(
            name, Status.WARN, f"{AURORA_POSTGRES_ENGINE} {version} is {status} in {region}", fix
        )
    return CheckResult(name, Status.OK, f"{AURORA_POSTGRES_ENGINE} {version} offered in {region}")


def check_cdk_bootstrap(
    ssm: Any, cloudformation: Any, account: str | None, region: str
) -> CheckResult:
    """The CDK bootstrap (version parameter) is present and recent enough."""
    name = "cdk bootstrap"
    fix = f"npx aws-cdk@2 bootstrap aws://{account or 'ACCOUNT'}/{region}"
    try:
        value = ssm.get_parameter(Name=CDK_BOOTSTRAP_VERSION_PARAMETER)["Parameter"]["Value"]
    except ClientError as exc:
        if _error_code(exc) != "ParameterNotFound":
            return _unverified(name, CDK_BOOTSTRAP_VERSION_PARAMETER, exc)
        return CheckResult(name, Status.FAIL, _why_no_bootstrap(cloudformation, region), fix)
    except (BotoCoreError, ResponseParserError) as exc:
        return _unverified(name, CDK_BOOTSTRAP_VERSION_PARAMETER, exc)
    version = int(value) if str(value).isdigit() else 0
    if version < MIN_CDK_BOOTSTRAP_VERSION:
        return CheckResult(
            name,
            Status.FAIL,
            f"bootstrap version {value!s:.10}, the app needs {MIN_CDK_BOOTSTRAP_VERSION} or newer",
            fix,
        )
    return CheckResult(name, Status.OK, f"bootstrap version {version} in {region}")


def _why_no_bootstrap(cloudformation: Any, region: str) -> str:
    try:
        cloudformation.describe_stacks(StackName=CDK_TOOLKIT_STACK)
    except _AWS_ERRORS:
        return f"{region} is not bootstrapped (no {CDK_BOOTSTRAP_VERSION_PARAMETER})"
    return (
        f"stack {CDK_TOOLKIT_STACK} exists but {CDK_BOOTSTRAP_VERSION_PARAMETER} does not: "
        "bootstrapped with another qualifier or the legacy template"
    )


def check_stack(cloudformation: Any, stack: str) -> CheckResult:
    """An existing stack is in a state a deploy can start from."""
    name = "stack"
    try:
        found = cloudformation.describe_stacks(StackName=stack)["Stacks"]
    except ClientError as exc:
        if "does not exist" in str(exc.response.get("Error", {}).get("Message", "")):
            return CheckResult(name, Status.OK, f"{stack} does not exist yet: a first deploy")
        return _unverified(name, f"stack {stack}", exc)
    except (BotoCoreError, ResponseParserError) as exc:
        return _unverified(name, f"stack {stack}", exc)
    status = str(found[0]["StackStatus"])
    delete = f"npx aws-cdk@2 destroy -c stack_name={stack}"
    blocked = _STACK_BLOCKED.get(status)
    if blocked is not None:
        return CheckResult(
            name, Status.FAIL, f"{stack} is {status}", blocked.format(delete=delete, stack=stack)
        )
    if status.endswith("_IN_PROGRESS"):
        return CheckResult(
            name,
            Status.FAIL,
            f"{stack} is {status}",
            "wait until it finishes (aws cloudformation wait), then run doctor again",
        )
    return CheckResult(name, Status.OK, f"{stack} is {status}")


def check_action_targets(
    config: SweeperConfig, client: Callable[[str], Any], policy_dir: Path
) -> list[CheckResult]:
    """What each policy's action kind calls is there (sweeper_tools.deploy, `preflight`):
    the bucket reachable, the function present, the callable importable."""
    results = []
    for policy in config.policies:
        for found in deploy_for(policy.action).preflight(client, policy_dir):
            status = Status.OK if found.ok else Status.FAIL if found.ok is False else Status.WARN
            results.append(
                CheckResult(
                    f"{policy.name} action", status, f"{found.name}: {found.detail}", found.fix
                )
            )
    return results


NodeRunner = Callable[[list[str]], str]


def _run_node(argv: list[str]) -> str:
    done = subprocess.run(  # noqa: S603 - fixed argv, no shell
        argv, capture_output=True, text=True, timeout=NODE_TIMEOUT_SECONDS, check=True
    )
    return done.stdout


def check_node(today: date, node: str = "node", run: NodeRunner = _run_node) -> CheckResult:
    """The local Node.js is one the CDK CLI supports."""
    name = "node.js"
    newest = max(NODE_SUPPORT_ENDS)
    supported = [m for m, ends in sorted(NODE_SUPPORT_ENDS.items()) if today <= ends]
    upgrade = f"install Node.js {' or '.join(str(m) for m in supported) or newest} (LTS)"
    path = shutil.which(node)
    if path is None:
        return CheckResult(
            name, Status.FAIL, "node not found on PATH (the CDK CLI needs it)", upgrade
        )
    try:
        out = run([path, "--version"]).strip()
    except (OSError, subprocess.SubprocessError) as exc:
        return CheckResult(
            name, Status.FAIL, f"`node --version` failed: {type(exc).__name__}", upgrade
        )
    match = re.fullmatch(r"v(\d+)\.\d+\.\d+\S*", out)
    if match is None:
        return CheckResult(name, Status.FAIL, "`node --version` printed no version", upgrade)
    major = int(match.group(1))
    ends = NODE_SUPPORT_ENDS.get(major)
    if major < min(NODE_SUPPORT_ENDS):
        return CheckResult(name, Status.FAIL, f"{out}: not supported by the CDK", upgrade)
    if ends is None:
        return CheckResult(
            name, Status.WARN, f"{out}: not an LTS version the CDK supports", upgrade
        )
    if today > ends:
        return CheckResult(
            name, Status.WARN, f"{out}: the CDK's support for it ended on {ends}", upgrade
        )
    return CheckResult(name, Status.OK, f"{out}: supported by the CDK until {ends}")


def check_actions(config: SweeperConfig, secretsmanager: Any) -> list[CheckResult]:
    """Each policy's action, as its kind verifies it without an effect (sweeper.actions):
    e.g. an http action's secret readable and, for oauth2, a token issued."""
    from aws_lambda_powertools.utilities.parameters import SecretsProvider

    context = ActionContext(
        secrets=SecretsProvider(boto3_client=secretsmanager), secret_max_age_seconds=1
    )
    return [
        CheckResult(f"{policy.name}: {found.name}", Status(found.status), found.detail, found.fix)
        for policy in config.policies
        for found in deploy_for(policy.action).doctor_checks(context, ACTION_CHECK_TIMEOUT_SECONDS)
    ]


def run_doctor(
    client: Callable[[str], Any],
    *,
    region: str,
    config_path: str | Path,
    stack: str,
    today: date,
    node: str = "node",
) -> list[CheckResult]:
    """Every check, in the order a person would fix them; `client(service)` builds a client."""
    identity, account = check_identity(client("sts"))
    policy, config = check_policy_file(config_path)
    results = [identity, policy, check_node(today, node)]
    if account is None:
        return results  # nothing else can be read
    cloudformation = client("cloudformation")
    lambda_client = client("lambda")
    results.append(check_stack(cloudformation, stack))
    results.append(check_cdk_bootstrap(client("ssm"), cloudformation, account, region))
    if config is not None:
        results.append(
            check_account_concurrency(
                lambda_client,
                required_reserved_concurrency(config),
                stack_reserved_concurrency(cloudformation, lambda_client, stack),
            )
        )
        results.extend(check_action_targets(config, client, Path(config_path).parent))
    results.append(check_engine_version(client("rds"), region))
    if config is not None:
        results.extend(check_actions(config, client("secretsmanager")))
    return results


def aws_clients(region: str | None, profile: str | None) -> tuple[Callable[[str], Any], str]:
    """A client factory for the target account, and its region (required: checks are regional)."""
    try:
        session = boto3.Session(region_name=region, profile_name=profile)
    except BotoCoreError as exc:
        raise OperatorError(f"AWS session: {exc}") from exc
    if not session.region_name:
        raise OperatorError("no region: pass --region or set AWS_REGION")

    def client(service: str) -> Any:
        return session.client(service)  # type: ignore[call-overload]

    return client, session.region_name


def render(results: list[CheckResult], as_json: bool) -> str:
    """One line per check (`ok`, `warn`, `fail`), each fix on the line below; or one JSON object."""
    if as_json:
        failed = any(r.status is Status.FAIL for r in results)
        return json.dumps({"ok": not failed, "checks": [r.as_dict() for r in results]})
    width = max(len(r.name) for r in results)
    lines = []
    for r in results:
        lines.append(f"{r.status.value:<4}  {r.name.ljust(width)}  {r.detail}")
        if r.fix and r.status is not Status.OK:
            lines.append(f"{'':<4}  {''.ljust(width)}  fix: {r.fix}")
    return "\n".join(lines)

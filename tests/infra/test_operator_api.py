"""The operator API in the template: reachable with IAM only, in the VPC, and two managed
policies (read-only, operator) with exactly their grants, output for operators to attach."""

from __future__ import annotations

from typing import Any

from infra.packaging import CONFIG_FILE_PATH
from sweeper.config import SweeperConfig
from tests.infra.conftest import Synth
from tests.infra.test_database import _secret_reads
from tests.infra.test_security import _actions, _as_list, _role_of, _statements_of_role

READ_ONLY = "OperatorApiReadOnlyFunction"
OPERATOR = "OperatorApiOperatorFunction"
URL_ONLY = {"StringEquals": {"lambda:FunctionUrlAuthType": "AWS_IAM"}}
VIA_URL = {"Bool": {"lambda:InvokedViaFunctionUrl": "true"}}


def _logical_id(synth: Synth, pattern: str) -> str:
    import re

    (found,) = [
        logical_id
        for logical_id in synth.resources("AWS::Lambda::Function")
        if re.search(pattern, logical_id)
    ]
    return found


def _function_arn(synth: Synth, pattern: str) -> dict[str, Any]:
    return {"Fn::GetAtt": [_logical_id(synth, pattern), "Arn"]}


def _policy(synth: Synth, description_start: str) -> list[dict[str, Any]]:
    (policy,) = [
        p["Properties"]
        for p in synth.resources("AWS::IAM::ManagedPolicy").values()
        if p["Properties"].get("Description", "").startswith(description_start)
    ]
    statements: list[dict[str, Any]] = policy["PolicyDocument"]["Statement"]
    return statements


def _grants(statements: list[dict[str, Any]]) -> set[tuple[str, str, str]]:
    """(action, resource, condition) for every statement, comparable as a set."""
    import json

    return {
        (
            action,
            json.dumps(resource, sort_keys=True),
            json.dumps(s.get("Condition"), sort_keys=True),
        )
        for s in statements
        for action in _as_list(s["Action"])
        for resource in _as_list(s["Resource"])
    }


def _invoke_grants(synth: Synth, pattern: str) -> set[tuple[str, str, str]]:
    arn = _function_arn(synth, pattern)
    return _grants(
        [
            {"Action": "lambda:InvokeFunctionUrl", "Resource": arn, "Condition": URL_ONLY},
            {"Action": "lambda:InvokeFunction", "Resource": arn, "Condition": VIA_URL},
        ]
    )


def _describe_grant() -> set[tuple[str, str, str]]:
    return _grants(
        [{"Action": "cloudformation:DescribeStacks", "Resource": {"Ref": "AWS::StackId"}}]
    )


def test_the_operator_api_is_reachable_through_iam_only(default: Synth) -> None:
    urls = default.resources("AWS::Lambda::Url")
    targets = {
        str(url["Properties"]["TargetFunctionArn"]["Fn::GetAtt"][0]): url["Properties"]["AuthType"]
        for url in urls.values()
        if "OperatorApi" in str(url["Properties"]["TargetFunctionArn"])
    }
    # Two URLs, one per function, both AWS_IAM
    assert targets == {
        _logical_id(default, READ_ONLY): "AWS_IAM",
        _logical_id(default, OPERATOR): "AWS_IAM",
    }
    # And no resource policy opens either function to anyone: only identity policies grant it
    for permission in default.resources("AWS::Lambda::Permission").values():
        assert "OperatorApi" not in str(permission["Properties"]["FunctionName"]), permission


def test_both_operator_functions_run_in_the_vpc_with_their_access(default: Synth) -> None:
    for pattern, access in ((READ_ONLY, "read"), (OPERATOR, "operate")):
        props = default.function(pattern)["Properties"]
        assert props["VpcConfig"]["SubnetIds"]
        assert props["VpcConfig"]["SecurityGroupIds"]
        assert default.environment(pattern)["SWEEPER_OPERATOR_ACCESS"] == access
        assert default.environment(pattern)["SWEEPER_CONFIG_FILE"] == CONFIG_FILE_PATH


def test_the_operator_functions_read_the_policy_file_from_their_config_layer(
    default: Synth,
) -> None:
    # The whole policy file, in a layer: Lambda's 4 KB environment holds a few policies only
    layer = default.logical_id("OperatorApi/ConfigLayer/Resource")
    for pattern in (READ_ONLY, OPERATOR):
        assert {"Ref": layer} in default.function(pattern)["Properties"]["Layers"]
    key = default.template_json["Resources"][layer]["Properties"]["Content"]["S3Key"]
    asset = default.outdir / f"asset.{key.removesuffix('.zip')}"
    staged = asset / CONFIG_FILE_PATH.removeprefix("/opt/")
    assert SweeperConfig.model_validate_json(staged.read_text()) == default.config


def test_the_read_only_function_connects_as_the_reader_and_reads_its_secret_only(
    default: Synth,
) -> None:
    # The reader (migration 0014: SELECT only), not the pipeline's DML credential
    reader = default.logical_id("Database/ReaderSecret/Attachment/Resource")
    app = default.logical_id("Database/AppSecret/Attachment/Resource")
    read_only, operator = (default.function(p) for p in (READ_ONLY, OPERATOR))
    assert default.environment(READ_ONLY)["SWEEPER_DATABASE_SECRET_ARN"] == {"Ref": reader}
    assert _secret_reads(default, read_only) == {reader}
    # while the operator function keeps the application user's
    assert default.environment(OPERATOR)["SWEEPER_DATABASE_SECRET_ARN"] == {"Ref": app}
    assert _secret_reads(default, operator) == {app}


def test_the_read_only_policy_reaches_the_read_only_function_and_nothing_else(
    default: Synth,
) -> None:
    granted = _grants(_policy(default, "sweeper operator API, read-only"))
    assert granted == _invoke_grants(default, READ_ONLY) | _describe_grant()


def test_the_operator_policy_reaches_both_functions_and_nothing_else(default: Synth) -> None:
    granted = _grants(_policy(default, "sweeper operator API: every"))
    expected = _invoke_grants(default, READ_ONLY) | _invoke_grants(default, OPERATOR)
    assert granted == expected | _describe_grant()


def test_the_stack_outputs_both_urls_and_both_policies(default: Synth) -> None:
    outputs = default.template_json["Outputs"]
    policies = {
        logical_id: p["Properties"]["Description"]
        for logical_id, p in default.resources("AWS::IAM::ManagedPolicy").items()
    }
    assert policies[outputs["OperatorPolicyArn"]["Value"]["Ref"]].startswith(
        "sweeper operator API: every"
    )
    assert policies[outputs["OperatorReadOnlyPolicyArn"]["Value"]["Ref"]].startswith(
        "sweeper operator API, read-only"
    )
    url_of = {
        logical_id: str(url["Properties"]["TargetFunctionArn"])
        for logical_id, url in default.resources("AWS::Lambda::Url").items()
    }
    operator_url = outputs["OperatorApiUrl"]["Value"]["Fn::GetAtt"][0]
    read_only_url = outputs["OperatorApiReadOnlyUrl"]["Value"]["Fn::GetAtt"][0]
    assert _logical_id(default, OPERATOR) in url_of[operator_url]
    assert _logical_id(default, READ_ONLY) in url_of[read_only_url]


def test_the_read_only_function_can_change_no_queue_and_no_function(default: Synth) -> None:
    role = _role_of(default.function(READ_ONLY))
    actions = _actions(_statements_of_role(default, role))
    changing = {
        a for a in actions if a.startswith(("sqs:", "lambda:")) and a != "sqs:GetQueueAttributes"
    }
    assert changing == set(), changing
    # while the operator function may send, redrive, release and switch consumers
    operator = _actions(_statements_of_role(default, _role_of(default.function(OPERATOR))))
    assert {
        "sqs:SendMessage",
        "lambda:InvokeFunction",
        "lambda:UpdateEventSourceMapping",
    } <= operator


def test_both_operator_functions_read_the_limiter_gates_and_change_nothing_there(
    default: Synth,
) -> None:
    limiter = default.logical_id("Tables/Limiter/Resource")
    for pattern in (READ_ONLY, OPERATOR):
        statements = _statements_of_role(default, _role_of(default.function(pattern)))
        dynamodb = {a for a in _actions(statements) if a.startswith("dynamodb:")}
        # a gate by its key, and the Scan `status` lists the closed keys of further limits by;
        # the operator function also lowers the wake items its writes make due (unhold...)
        wake = {"dynamodb:UpdateItem"} if pattern == OPERATOR else set()
        assert dynamodb == {"dynamodb:GetItem", "dynamodb:Scan", *wake}, pattern
        for statement in statements:
            if {"dynamodb:GetItem", "dynamodb:Scan"} & set(_as_list(statement["Action"])):
                assert limiter in str(statement["Resource"])

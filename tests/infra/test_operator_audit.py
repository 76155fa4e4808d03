"""Who acted through the operator API: the guard statement that closes direct invocation, and
the CloudTrail data events that record every invocation's real caller.

Lambda puts nothing in an event that a direct invoker cannot write (the function URL's
`requestContext.authorizer.iam` is part of the payload), so the stack cannot refuse a forged
event itself; it outputs the statement an administrator applies, and records the invocations.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

import pytest

from tests.infra.conftest import REPO_ROOT, Synth
from tests.infra.policy_eval import decision, iam_request

INVOKE = "lambda:InvokeFunction"
ADMIN = "arn:aws:iam::111122223333:role/Admin"
FUNCTIONS = ("OperatorApiReadOnlyFunction", "OperatorApiOperatorFunction")
PSEUDO = {"AWS::Partition": "aws", "AWS::Region": "eu-west-1", "AWS::AccountId": "111122223333"}


@pytest.fixture(scope="module")
def untrailed(synth_variant: Callable[[dict[str, Any]], Synth]) -> Synth:
    return synth_variant({"config": "sweeper.toml", "operator_trail": "false"})


def _arn(logical_id: str) -> str:
    """What a function's `Fn::GetAtt [id, Arn]` renders to, in these tests."""
    return f"arn:aws:lambda:eu-west-1:111122223333:function:{logical_id}"


def _render(value: Any) -> Any:
    """A template value with its references rendered as the tests' fixed ARNs and names."""
    if isinstance(value, dict) and len(value) == 1:
        (function, argument), *_ = value.items()
        if function == "Fn::Join":
            return argument[0].join(str(_render(part)) for part in argument[1])
        if function == "Fn::GetAtt":
            return _arn(argument[0])
        if function == "Ref":
            return PSEUDO.get(argument, argument)
    if isinstance(value, list):
        return [_render(v) for v in value]
    return value


def _operator_functions(synth: Synth) -> list[str]:
    found = [
        logical_id
        for logical_id in synth.resources("AWS::Lambda::Function")
        if any(re.match(f"^{name}[0-9A-F]{{8}}$", logical_id) for name in FUNCTIONS)
    ]
    assert len(found) == len(FUNCTIONS)
    return found


def _guard(synth: Synth) -> dict[str, Any]:
    document: dict[str, Any] = json.loads(
        _render(synth.template_json["Outputs"]["OperatorDirectInvokeGuard"]["Value"])
    )
    return document


def _invoke(function: str, **context: Any) -> dict[str, Any]:
    request = iam_request(INVOKE, ADMIN, **context)
    request["resource"] = function
    return request


def test_the_guard_denies_exactly_the_direct_invocation_of_the_operator_functions(
    default: Synth,
) -> None:
    guard = _guard(default)
    assert guard["Version"] == "2012-10-17"
    (statement,) = guard["Statement"]
    assert statement["Effect"] == "Deny"
    assert statement["Action"] == INVOKE
    arns = [_arn(f) for f in _operator_functions(default)]
    assert sorted(statement["Resource"]) == sorted([*arns, *(f"{a}:*" for a in arns)])
    statements = guard["Statement"]
    for arn in arns:
        for qualified in (arn, f"{arn}:$LATEST"):
            # A direct Invoke (the key absent, or false) is denied, whoever calls ...
            assert decision(statements, _invoke(qualified)) == "deny"
            direct = _invoke(qualified, **{"lambda:InvokedViaFunctionUrl": "false"})
            assert decision(statements, direct) == "deny"
            # ... while a call through the function URL is left to the managed policies.
            via_url = _invoke(qualified, **{"lambda:InvokedViaFunctionUrl": "true"})
            assert decision(statements, via_url) == "identity"
    # Any other function is no business of the guard's.
    producer = _arn(default.logical_id("Pipeline-exports/Producer/Function/Resource"))
    assert decision(statements, _invoke(producer)) == "identity"


def test_cloudtrail_records_the_invocations_of_exactly_the_operator_functions(
    default: Synth,
) -> None:
    (trail,) = default.resources("AWS::CloudTrail::Trail").values()
    props = trail["Properties"]
    assert "EventSelectors" not in props  # no management events: another trail's business
    (selector,) = props["AdvancedEventSelectors"]
    fields = {f["Field"]: f["Equals"] for f in selector["FieldSelectors"]}
    assert fields["eventCategory"] == ["Data"]
    assert fields["resources.type"] == ["AWS::Lambda::Function"]
    arns = [_arn(f) for f in _operator_functions(default)]
    assert sorted(_render(fields["resources.ARN"])) == sorted(
        [*arns, *(f"{a}:$LATEST" for a in arns)]
    )
    assert set(fields) == {"eventCategory", "resources.type", "resources.ARN"}
    assert props["IsLogging"] is True
    assert props["EnableLogFileValidation"] is True
    assert props["IsMultiRegionTrail"] is False


def test_the_trail_writes_to_a_private_encrypted_tls_only_bucket_that_outlives_the_stack(
    default: Synth,
) -> None:
    (trail,) = default.resources("AWS::CloudTrail::Trail").values()
    bucket_id = trail["Properties"]["S3BucketName"]["Ref"]
    bucket = default.template_json["Resources"][bucket_id]
    props = bucket["Properties"]
    assert bucket["DeletionPolicy"] == "Retain"
    assert props["BucketEncryption"]["ServerSideEncryptionConfiguration"]
    assert set(props["PublicAccessBlockConfiguration"].values()) == {True}
    assert props["VersioningConfiguration"] == {"Status": "Enabled"}
    (policy,) = [
        p
        for p in default.resources("AWS::S3::BucketPolicy").values()
        if p["Properties"]["Bucket"] == {"Ref": bucket_id}
    ]
    statements = policy["Properties"]["PolicyDocument"]["Statement"]
    assert any(
        s["Effect"] == "Deny" and s.get("Condition") == {"Bool": {"aws:SecureTransport": "false"}}
        for s in statements
    )
    writers = [s for s in statements if s["Effect"] == "Allow" and s["Action"] == "s3:PutObject"]
    assert [s["Principal"] for s in writers] == [{"Service": "cloudtrail.amazonaws.com"}]
    outputs = default.template_json["Outputs"]
    assert outputs["OperatorTrailBucketName"]["Value"] == {"Ref": bucket_id}


def test_the_trail_can_be_left_out_and_the_guard_stays(untrailed: Synth) -> None:
    assert untrailed.resources("AWS::CloudTrail::Trail") == {}
    assert untrailed.resources("AWS::S3::Bucket") == {}
    assert "OperatorTrailBucketName" not in untrailed.template_json["Outputs"]
    assert _guard(untrailed)["Statement"][0]["Effect"] == "Deny"


def test_the_runbook_says_what_the_recorded_actor_proves_on_each_path() -> None:
    runbook = (REPO_ROOT / "docs" / "runbook.md").read_text(encoding="utf-8")
    section = runbook.split("## Who acted", 1)[1].split("\n## ", 1)[0]
    for needed in (
        "OperatorDirectInvokeGuard",
        "OperatorTrailBucketName",
        "lambda:InvokedViaFunctionUrl",
        "`--stack`",
        "`--database-url`",
        "`--actor`",
    ):
        assert needed in section, needed

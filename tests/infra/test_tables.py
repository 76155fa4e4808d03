"""Tables: idempotency (Powertools defaults) and limiter, on demand, encrypted, recoverable."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from infra.tables import LIMITER_ACTIONS
from sweeper import limiter
from tests.infra.conftest import Synth


@pytest.mark.parametrize(
    ("name", "key", "ttl"),
    [("TablesIdempotency", "id", "expiration"), ("TablesLimiter", "pk", "expires_at")],
)
def test_table_is_on_demand_encrypted_recoverable_and_expires_items(
    default: Synth, name: str, key: str, ttl: str
) -> None:
    props = default.resource(name, "AWS::DynamoDB::Table")["Properties"]
    assert props["KeySchema"] == [{"AttributeName": key, "KeyType": "HASH"}]
    assert props["AttributeDefinitions"] == [{"AttributeName": key, "AttributeType": "S"}]
    assert props["TimeToLiveSpecification"] == {"AttributeName": ttl, "Enabled": True}
    assert props["BillingMode"] == "PAY_PER_REQUEST"
    assert props["SSESpecification"]["SSEEnabled"] is True
    assert props["PointInTimeRecoverySpecification"]["PointInTimeRecoveryEnabled"] is True


def test_the_idempotency_table_outlives_a_replacement_or_a_deleted_stack(default: Synth) -> None:
    """Losing its records while jobs are in flight would let a redelivery call the vendor again."""
    logical_id = default.logical_id("Tables/Idempotency/Resource")
    table = default.template_json["Resources"][logical_id]
    assert table["DeletionPolicy"] == "Retain"
    assert table["UpdateReplacePolicy"] == "Retain"


def test_consumer_gets_both_table_names(default: Synth) -> None:
    variables = default.environment("Consumer")
    idempotency = default.logical_id("Tables/Idempotency/Resource")
    limiter = default.logical_id("Tables/Limiter/Resource")
    assert variables["SWEEPER_IDEMPOTENCY_TABLE"] == {"Ref": idempotency}
    assert variables["SWEEPER_LIMITER_TABLE"] == {"Ref": limiter}


def _limiter_grants(synth: Synth) -> dict[str, set[str]]:
    """Per IAM policy: the DynamoDB actions it allows on the limiter table."""
    limiter = synth.logical_id("Tables/Limiter/Resource")
    grants: dict[str, set[str]] = {}
    for logical_id, policy in synth.resources("AWS::IAM::Policy").items():
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]:
            actions = statement["Action"]
            actions = actions if isinstance(actions, list) else [actions]
            if limiter in json.dumps(statement["Resource"]):
                grants.setdefault(logical_id, set()).update(
                    a for a in actions if a.startswith("dynamodb:")
                )
    return grants


def test_nobody_may_put_whole_items_into_the_limiter_table(default: Synth) -> None:
    grants = _limiter_grants(default)
    assert grants, "no policy grants the limiter table"
    for policy, actions in grants.items():
        assert "dynamodb:PutItem" not in actions, policy
        # Scan: the producer lists the closed gates (read only); BatchGetItem: a consumer's
        # look at several gates
        reads = {"dynamodb:GetItem", "dynamodb:BatchGetItem", "dynamodb:Scan"}
        assert actions <= reads | {"dynamodb:UpdateItem"}, policy


def test_the_limiter_code_calls_only_what_its_grant_allows() -> None:
    """Every DynamoDB call in sweeper.limiter is one of the actions granted on its table."""
    package = Path(limiter.__file__).parent  # every module of the package, not its facade only
    called = {
        node.func.attr
        for module in sorted(package.glob("*.py"))
        for node in ast.walk(ast.parse(module.read_text(encoding="utf-8")))
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and isinstance(node.func.value, ast.Attribute)
        and node.func.value.attr == "_client"
    }
    as_actions = {"dynamodb:" + "".join(p.capitalize() for p in op.split("_")) for op in called}
    assert as_actions, "the limiter makes no DynamoDB call?"
    assert as_actions <= set(LIMITER_ACTIONS)

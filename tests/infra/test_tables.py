"""Tables: idempotency (Powertools defaults) and limiter, on demand, encrypted, recoverable."""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from aws_cdk.assertions import Annotations, Match

from infra.tables import (
    IDEMPOTENCY_ACTIONS,
    LIMITER_ACTIONS,
    LIVE_READ_ACTIONS,
    LIVE_WRITE_ACTIONS,
    WAKE_ACTIONS,
)
from sweeper import limiter
from sweeper.ledger.wake import WAKE_KEY_PREFIX, wake_key
from sweeper.limiter.live import LIVE_KEY_PREFIX
from tests.infra.conftest import FIXTURES, Synth
from tests.infra.test_security import (
    _as_list,
    _function_statements,
    _role_of,
    _statements_of_role,
)


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


def _consumer_table_grants(synth: Synth, policy_name: str) -> dict[str, list[dict[str, Any]]]:
    """The consumer's DynamoDB statements, by the table they name (Idempotency, Limiter)."""
    prefix = f"Pipeline{policy_name.replace('-', '')}"
    statements = _function_statements(synth, f"^{prefix}ConsumerFunction[0-9A-F]{{8}}$")
    tables = {
        name: synth.logical_id(f"Tables/{name}/Resource") for name in ("Idempotency", "Limiter")
    }
    by_table: dict[str, list[dict[str, Any]]] = {}
    for statement in statements:
        if not any(a.startswith("dynamodb:") for a in _as_list(statement["Action"])):
            continue
        rendered = json.dumps(statement["Resource"])
        (table,) = [name for name, logical_id in tables.items() if logical_id in rendered]
        by_table.setdefault(table, []).append(statement)
    return by_table


def _leading_keys(statement: dict[str, Any]) -> list[str]:
    condition = statement.get("Condition")
    assert condition is not None, f"an unconditioned grant: {statement}"
    assert list(condition) == ["ForAllValues:StringLike"], condition
    keys: list[str] = _as_list(condition["ForAllValues:StringLike"]["dynamodb:LeadingKeys"])
    return keys


@pytest.mark.parametrize(
    ("variant", "policy", "limiter_keys"),
    [
        # a bucket per tenant, `{policy}:{tenant_id}`; and the latest closure's end
        ("default", "exports", ["scope#exports:*", "closures#latest"]),
        ("proxied", "exports", ["scope#exports", "closures#latest"]),  # one, `{policy}`
        ("proxied", "stale-sessions", ["scope#stale-sessions", "closures#latest"]),
    ],
)
def test_each_consumer_may_touch_only_its_own_policys_items(
    request: pytest.FixtureRequest, variant: str, policy: str, limiter_keys: list[str]
) -> None:
    synth: Synth = request.getfixturevalue(variant)
    grants = _consumer_table_grants(synth, policy)
    assert sorted(grants) == ["Idempotency", "Limiter"]
    # Powertools' records are `sweeper:<policy>#<hash>`: its own prefix, on every statement
    for statement in grants["Idempotency"]:
        assert _leading_keys(statement) == [f"sweeper:{policy}#*"]
        assert set(_as_list(statement["Action"])) <= set(IDEMPOTENCY_ACTIONS)
    # And its policy's wake item (sweeper.ledger.wake), read and updated, besides its limits
    wake = [s for s in grants["Limiter"] if _leading_keys(s) == [wake_key(policy)]]
    assert [set(_as_list(s["Action"])) for s in wake] == [set(WAKE_ACTIONS)]
    for statement in _limit_grants(grants["Limiter"]):
        assert _leading_keys(statement) == limiter_keys
        assert set(_as_list(statement["Action"])) <= set(LIMITER_ACTIONS)


def _limit_grants(statements: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The limiter grants but the wake item's (every ledger function holds its own) and the
    live limits' (read only, test_a_consumer_only_reads_its_own_policys_live_limits)."""
    return [
        s
        for s in statements
        if not _leading_keys(s)[0].startswith((WAKE_KEY_PREFIX, LIVE_KEY_PREFIX))
    ]


def test_a_consumer_only_reads_its_own_policys_live_limits(default: Synth) -> None:
    # Given the consumer's grants on the limiter table
    grants = _consumer_table_grants(default, "exports")["Limiter"]
    # Then its policy's live limits are read, never written, and no other policy's
    live = [s for s in grants if _leading_keys(s)[0].startswith(LIVE_KEY_PREFIX)]
    assert [_leading_keys(s) for s in live] == [["live#exports#*"]]
    assert [set(_as_list(s["Action"])) for s in live] == [set(LIVE_READ_ACTIONS)]


def test_only_the_operator_function_changes_live_limits_and_in_place(default: Synth) -> None:
    # Given every function's grants that name a live limit's key and may write
    writers: dict[str, tuple[set[str], list[str]]] = {}
    for name, function in default.python_functions().items():
        for statement in _statements_of_role(default, _role_of(function)):
            condition = statement.get("Condition", {}).get("ForAllValues:StringLike", {})
            keys = _as_list(condition.get("dynamodb:LeadingKeys", []))
            actions = set(_as_list(statement["Action"]))
            if any(k.startswith(LIVE_KEY_PREFIX) for k in keys) and actions - {
                "dynamodb:GetItem",
                "dynamodb:BatchGetItem",
            }:
                writers[name] = (actions, keys)
    # Then only the operator function writes them, in place (UpdateItem), its policies' only
    assert len(writers) == 1, writers
    ((name, (actions, keys)),) = writers.items()
    assert name.startswith("OperatorApiOperatorFunction"), name
    assert actions == set(LIVE_WRITE_ACTIONS)
    assert keys == ["live#exports#*"]


def test_a_limit_shared_by_design_is_granted_by_its_own_key(
    synth_variant: Callable[[dict[str, Any]], Synth],
) -> None:
    # Given shared-a and shared-b, which share the app limit `shared-app`; shared-a's scope is
    # `{tenant_id}` alone (a store's calls shared by every policy), shared-b's `{policy}:...`
    synth = synth_variant({"config": str(FIXTURES / "limits_reach.toml")})
    shared_a = _limit_grants(_consumer_table_grants(synth, "shared-a")["Limiter"])
    shared_b = _limit_grants(_consumer_table_grants(synth, "shared-b")["Limiter"])
    # Then each holds the shared key by its name, and shared-b nothing else of shared-a's
    assert [_leading_keys(s) for s in shared_b] == [
        ["scope#shared-b:*", "scope#app:shared-app", "closures#latest"]
    ]
    # And shared-a's scope has no prefix to confine it to: every scope key, and synth says so
    assert [_leading_keys(s) for s in shared_a] == [
        ["scope#*", "scope#app:shared-app", "closures#latest"]
    ]
    found = Annotations.from_stack(synth.stack).find_warning(
        "*", Match.string_like_regexp("may touch every limiter scope")
    )
    assert sorted(re.findall(r"/Pipeline-([^/]+)/", "".join(f"{e.id}/" for e in found))) == [
        "listings-slow",
        "shared-a",
    ]

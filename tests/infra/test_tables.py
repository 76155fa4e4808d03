"""Tables: idempotency (Powertools defaults) and limiter, on demand, encrypted, recoverable."""

from __future__ import annotations

import pytest

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


def test_consumer_gets_both_table_names(default: Synth) -> None:
    variables = default.environment("Consumer")
    idempotency = default.logical_id("Tables/Idempotency/Resource")
    limiter = default.logical_id("Tables/Limiter/Resource")
    assert variables["SWEEPER_IDEMPOTENCY_TABLE"] == {"Ref": idempotency}
    assert variables["SWEEPER_LIMITER_TABLE"] == {"Ref": limiter}

"""A queue message body that is not a job message: rejected by id, with the names of the
fields at fault and never their values (the reason is logged)."""

from __future__ import annotations

import json

import pytest

from sweeper.consumer import parse_body
from sweeper.errors import MalformedMessageError

GOOD = {
    "v": 1,
    "key": "k-1",
    "policy": "exports",
    "policy_version": 1,
    "tenant_id": "t",
    "object_id": "o",
    "scope": "s",
    "attempt": 0,
    "batch_id": "b-1",
}


def test_a_valid_body_parses() -> None:
    assert parse_body("m-1", json.dumps(GOOD)).key == "k-1"


def test_a_body_with_bad_fields_names_them_sorted_and_echoes_no_value() -> None:
    body = {**GOOD, "key": "", "attempt": -1, "tenant_id": "customer-4711" * 100}
    with pytest.raises(MalformedMessageError) as err:
        parse_body("m-1", json.dumps(body))
    assert err.value.message_id == "m-1"
    assert err.value.reason == "invalid fields ['attempt', 'key', 'tenant_id']"
    assert "customer-4711" not in str(err.value)


@pytest.mark.parametrize("body", ["not json", "[1, 2]", '"a string"', ""])
def test_a_body_that_is_no_object_at_all_is_named_as_the_body(body: str) -> None:
    with pytest.raises(MalformedMessageError) as err:
        parse_body("m-2", body)
    assert err.value.reason == "invalid fields ['(body)']"

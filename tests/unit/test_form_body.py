"""`body_encoding = "form"`: a form body filled by structure, Stripe's nested keys included."""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qsl

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from sweeper.actions.body_encoding import check_form_template, encode_body
from sweeper.actions.http import HttpAction, HttpActionConfig
from sweeper.actions.templates import TemplateError
from sweeper.models import ActionCall
from tests.calls import action_call

REFUND_BODY: dict[str, Any] = {
    "charge": "{object_id}",
    "amount": "{params.amount}",
    "reason": "requested_by_customer",
    "metadata": {"tenant": "{tenant_id}", "note": "{params.note}"},
    "items": [{"id": "{params.item}", "qty": 1}, "{params.note}"],
}
#: The fields of REFUND_BODY as a form, each with the field whose value it carries.
REFUND_KEYS = [
    ("charge", "object_id"),
    ("amount", "params.amount"),
    ("reason", None),
    ("metadata[tenant]", "tenant_id"),
    ("metadata[note]", "params.note"),
    ("items[0][id]", "params.item"),
    ("items[0][qty]", None),
    ("items[1]", "params.note"),
]

#: Text a form would split or nest by, if it were spliced: separators, brackets, escapes.
TRICKY = st.sampled_from(
    ["&", "=", "a=b&c=d", "[", "]", "x]&y[", "metadata[tenant]=evil", "%26", "%", "+", " ", ""]
)
ANY_TEXT = st.one_of(
    TRICKY, st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=30)
)
SCALARS = st.one_of(
    ANY_TEXT, st.integers(min_value=-(2**53), max_value=2**53), st.booleans(), st.floats(-1e9, 1e9)
)


def _job(object_id: str, tenant_id: str = "acct_1", **params: Any) -> ActionCall:
    return action_call("refunds", tenant_id, object_id, **params)


def _form_action(body: dict[str, Any]) -> HttpAction:
    return HttpAction(
        HttpActionConfig(
            method="POST",
            api_url="https://api.example.com",
            url_template="{api_url}/v1/refunds",
            body=body,
            body_encoding="form",
        )
    )


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return value if isinstance(value, str) else repr(value)


@given(object_id=ANY_TEXT, tenant_id=ANY_TEXT, amount=SCALARS, note=SCALARS, item=SCALARS)
def test_no_param_changes_the_forms_structure(
    object_id: str, tenant_id: str, amount: Any, note: Any, item: Any
) -> None:
    # Given a Stripe-like form template, and ids and params of any content
    action = _form_action(REFUND_BODY)
    call = _job(object_id or "x", tenant_id or "t", amount=amount, note=note, item=item)
    # When its body is made
    body = action.body_for(call)
    # Then parsed back it has exactly the template's keys, in order, each value the field's
    assert body is not None
    fields = parse_qsl(body.decode("ascii"), keep_blank_values=True, strict_parsing=False)
    values = {
        "object_id": call.object_id,
        "tenant_id": call.tenant_id,
        "params.amount": amount,
        "params.note": note,
        "params.item": item,
    }
    expected = [
        (key, _text(values[field]) if field else _text(_literal(key))) for key, field in REFUND_KEYS
    ]
    assert fields == expected


def _literal(key: str) -> Any:
    return {"reason": "requested_by_customer", "items[0][qty]": 1}[key]


FORM_KEYS = st.text("abcdefghij_-.", min_size=1, max_size=5)
FORM_VALUES = st.recursive(
    st.sampled_from(["{params.p}", "{object_id}", "fixed", 7, True]),
    lambda children: st.one_of(
        st.lists(children, min_size=1, max_size=3),
        st.dictionaries(FORM_KEYS, children, min_size=1, max_size=3),
    ),
    max_leaves=8,
)


@given(template=st.dictionaries(FORM_KEYS, FORM_VALUES, min_size=1, max_size=4), value=ANY_TEXT)
def test_a_param_fills_one_value_of_any_template_and_adds_no_key(
    template: dict[str, Any], value: str
) -> None:
    # Given any nested form template, and a param and id of any text
    assert check_form_template(template) == []
    plain = encode_body(template, lambda name: "v", "form")
    # When it is filled with that text instead
    filled = encode_body(template, lambda name: value, "form")
    # Then the keys are those the template alone gives, and each placeholder's value is the text
    plain_fields = parse_qsl(plain.decode(), keep_blank_values=True)
    filled_fields = parse_qsl(filled.decode(), keep_blank_values=True)
    assert [k for k, _ in filled_fields] == [k for k, _ in plain_fields]
    for (_, before), (_, after) in zip(plain_fields, filled_fields, strict=True):
        assert after == (value if before == "v" else before)


def test_stripes_nested_keys_are_made_from_a_nested_template() -> None:
    body = encode_body(
        {"amount": "{params.amount}", "metadata": {"order_id": "6735"}, "expand": ["charge"]},
        lambda name: 1200,
        "form",
    )
    assert body == b"amount=1200&metadata%5Border_id%5D=6735&expand%5B0%5D=charge"


@pytest.mark.parametrize("value", [None, ["a"], {"k": "v"}])
def test_a_param_that_is_no_one_value_cannot_fill_a_form_field(value: Any) -> None:
    action = _form_action({"amount": "{params.amount}"})
    with pytest.raises(TemplateError) as raised:
        action.body_for(_job("ch_1", amount=value))
    assert raised.value.code == "param_not_a_form_value"


@pytest.mark.parametrize(
    ("body", "problem"),
    [
        (["{object_id}"], "a table of fields"),
        ({"metadata[tenant]": "{tenant_id}"}, "without . or ."),
        ({"metadata": {}}, "is empty"),
        ({"items": []}, "is empty"),
    ],
)
def test_a_template_a_form_cannot_carry_is_refused_when_read(body: Any, problem: str) -> None:
    with pytest.raises(ValidationError, match=problem):
        HttpActionConfig(method="POST", body=body, body_encoding="form")

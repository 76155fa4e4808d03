"""The answer matcher: a header's value and a JSON path of the body, read the one safe way."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sweeper.actions.answer_match import (
    MAX_ANSWER_BODY_BYTES,
    MISSING,
    Answer,
    HeaderEquals,
    JsonPathEquals,
    PathError,
    PathStep,
    header_number,
    json_value,
    parse_json_path,
)

KEYS = st.from_regex(r"[A-Za-z_][A-Za-z0-9_-]{0,8}", fullmatch=True)
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**53), max_value=2**53),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=10),
)
DOCUMENTS = st.recursive(
    SCALARS,
    lambda children: st.lists(children, max_size=3) | st.dictionaries(KEYS, children, max_size=3),
    max_leaves=10,
)


def _text_of(steps: tuple[PathStep, ...]) -> str:
    return "$" + "".join(f"[{s}]" if isinstance(s, int) else f".{s}" for s in steps)


def _paths(document: Any, prefix: tuple[PathStep, ...] = ()) -> list[tuple[PathStep, ...]]:
    """Every path that leads somewhere in `document`."""
    found = [prefix] if prefix else []
    if isinstance(document, dict):
        for key, value in document.items():
            found += _paths(value, (*prefix, key))
    elif isinstance(document, list):
        for index, value in enumerate(document):
            found += _paths(value, (*prefix, index))
    return found


def _answer(document: Any) -> Answer:
    return Answer.of(400, {}, json.dumps(document).encode())


@given(document=DOCUMENTS, data=st.data())
def test_a_path_to_a_value_finds_exactly_that_value(document: Any, data: st.DataObject) -> None:
    # Given a JSON document and a path to one of its values, written as a policy writes it
    paths = _paths(document)
    if not paths:
        return
    steps = data.draw(st.sampled_from(paths))
    expected = document
    for step in steps:
        expected = expected[step]
    # When the path is read back from its text and looked up
    parsed = parse_json_path(_text_of(steps))
    # Then it finds the value, and a rule comparing with that scalar matches it
    assert parsed == steps
    assert json_value(document, parsed) == expected
    if not isinstance(expected, dict | list):
        assert JsonPathEquals(parsed, expected).holds(_answer(document))


@given(document=DOCUMENTS, steps=st.lists(st.one_of(KEYS, st.integers(0, 5)), min_size=1))
def test_a_path_not_in_the_document_matches_nothing(document: Any, steps: list[PathStep]) -> None:
    path = tuple(steps)
    if path in _paths(document):
        return
    assert json_value(document, path) is MISSING
    assert not JsonPathEquals(path, None).holds(_answer(document))


@given(body=st.binary(max_size=200), path=st.sampled_from(["error", "a.b[0]", "[0]"]))
def test_any_body_is_read_without_raising(body: bytes, path: str) -> None:
    # a vendor's body of any bytes: no match, or a match, never an error
    JsonPathEquals(parse_json_path(path), "x").holds(Answer.of(500, {}, body))


@given(value=SCALARS, other=SCALARS)
def test_equals_compares_type_and_value(value: Any, other: Any) -> None:
    # Given a body holding `value`, a rule for `other` matches only the same JSON scalar
    answer = _answer({"error": {"code": value}})
    holds = JsonPathEquals(("error", "code"), other).holds(answer)
    same_kind = isinstance(value, bool) == isinstance(other, bool) and (
        type(value) is type(other)
        or (isinstance(value, int | float) and isinstance(other, int | float))
    )
    assert holds == (same_kind and value == other)


def test_a_json_false_is_not_the_text_false_nor_zero() -> None:
    answer = _answer({"retry": False, "n": 0})
    assert JsonPathEquals(("retry",), False).holds(answer)
    assert not JsonPathEquals(("retry",), "false").holds(answer)
    assert not JsonPathEquals(("n",), False).holds(answer)


def test_a_body_over_the_cap_matches_no_path() -> None:
    big = json.dumps({"code": "x", "pad": "p" * MAX_ANSWER_BODY_BYTES}).encode()
    assert not JsonPathEquals(("code",), "x").holds(Answer.of(400, {}, big))


@given(
    name=st.sampled_from(["X-RateLimit-Remaining", "x-ratelimit-remaining"]),
    sent=st.sampled_from(["X-RATELIMIT-REMAINING", "x-ratelimit-remaining"]),
    value=st.text(st.characters(codec="latin-1", exclude_categories=["Cc"]), max_size=8),
)
def test_a_header_matches_by_name_in_any_case_and_its_exact_value(
    name: str, sent: str, value: str
) -> None:
    answer = Answer.of(403, {sent: f" {value} "})
    assert HeaderEquals(name, value.strip()).holds(answer)
    assert not HeaderEquals(name, value.strip() + "x").holds(answer)
    assert not HeaderEquals("x-other", value.strip()).holds(answer)


@pytest.mark.parametrize(
    ("text", "steps"),
    [
        ("error.code", ("error", "code")),
        ("$.errors[0].type", ("errors", 0, "type")),
        ("[2]", (2,)),
        ("$[0][1]", (0, 1)),
        ("x-ratelimit", ("x-ratelimit",)),
    ],
)
def test_the_path_subset(text: str, steps: tuple[PathStep, ...]) -> None:
    assert parse_json_path(text) == steps


@pytest.mark.parametrize(
    "text",
    ["", "$", "a..b", "a.", "a[*]", "a[-1]", "a[?(@.x)]", "..a", "a['b']", "$a", "a[01]", "a b"],
)
def test_a_path_outside_the_subset_is_refused(text: str) -> None:
    with pytest.raises(PathError):
        parse_json_path(text)


@pytest.mark.parametrize(
    ("value", "number"),
    [("1712345678", 1712345678.0), (" 0.5 ", 0.5), ("soon", None), ("1e999", None), ("", None)],
)
def test_a_header_is_read_as_a_number_or_not_at_all(value: str, number: float | None) -> None:
    assert header_number(Answer.of(403, {"X-Reset": value}), "x-reset") == number

"""The demo's sql door makes up a value for each param a policy's schema requires."""

from __future__ import annotations

import pytest

from sweeper_local.doors import sample_literal


@pytest.mark.parametrize(
    ("schema", "literal"),
    [
        ({"type": "integer", "minimum": 1}, "1"),
        ({"type": "integer", "minimum": 3, "maximum": 5}, "3"),
        ({"type": "number", "exclusiveMinimum": 2.5}, "3"),
        ({"type": "boolean"}, "true"),
        ({"type": "string"}, "'demo'"),
        ({"enum": ["it's"]}, "'it''s'"),
    ],
)
def test_a_sample_is_a_literal_its_schema_accepts(schema: dict[str, object], literal: str) -> None:
    assert sample_literal(schema) == literal


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "integer", "maximum": 0},
        {"type": "integer", "minimum": 1, "exclusiveMaximum": 1},
        {"type": "string", "format": "date"},
        {"type": "object"},
        "not a schema",
    ],
)
def test_no_sample_is_made_up_where_none_fits(schema: object) -> None:
    # the door then refuses the policy's rows, and the demo says what it refused
    assert sample_literal(schema) is None

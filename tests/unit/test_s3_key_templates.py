"""S3 key templates keep each field in its own path segment: a template whose fields share a
segment (`e/{tenant_id}{object_id+}`, `e/{tenant_id}-{object_id}`) is refused when the policy
file loads, for discovery and for the s3_delete action alike. Such a key splits more than one way
(two obligations, one key), and matching one backtracks quadratically in the key's length."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from sweeper.config import S3Discovery
from sweeper.discovery.s3 import _SEGMENTS, key_pattern
from sweeper.errors import ConfigError
from sweeper_tools.policy_file import load_config

DISCOVERY = 'discovery = {{ kind = "s3", bucket = "my-bucket", key_template = "{}" }}'
ACTION = 'action = {{ kind = "s3_delete", bucket = "acme", key_template = "{}" }}'
SHARED_SEGMENT = [
    (DISCOVERY, "discovery.s3.key_template", "e/{tenant_id}{object_id+}"),
    (DISCOVERY, "discovery.s3.key_template", "e/{tenant_id}{object_id}"),
    (DISCOVERY, "discovery.s3.key_template", "e/{tenant_id}-{object_id+}"),
    (DISCOVERY, "discovery.s3.key_template", "e/x{tenant_id}.{object_id}.csv"),
    (ACTION, "action.s3_delete.key_template", "exports/{tenant_id}{object_id}"),
    (ACTION, "action.s3_delete.key_template", "exports/{tenant_id}/{params.date}{object_id+}"),
    (ACTION, "action.s3_delete.key_template", "exports/{object_id}-{params.v}"),
]


@pytest.mark.parametrize(("table", "where", "template"), SHARED_SEGMENT)
def test_a_template_whose_fields_share_a_segment_is_refused_at_load(
    tmp_path: Path, table: str, where: str, template: str
) -> None:
    # Given a policy file whose S3 discovery or s3_delete action puts two fields in one segment
    path = tmp_path / "sweeper.toml"
    policy = table.format(template)
    path.write_text(f'[[policies]]\nname = "exports"\n{policy}\n', encoding="utf-8")
    # When it is loaded, then it is refused, naming the key and what to write instead
    with pytest.raises(ConfigError) as refused:
        load_config(path)
    assert where in str(refused.value)
    assert "own path segment" in str(refused.value)


@pytest.mark.parametrize(
    "template",
    [
        "exports/{tenant_id}/{object_id+}",
        "exports/t={tenant_id}/x-{object_id}.csv",
        "exports/{tenant_id}/a/b/{object_id+}",
    ],
)
def test_a_template_with_each_field_in_its_own_segment_is_accepted(template: str) -> None:
    assert S3Discovery(bucket="my-bucket", key_template=template).key_template == template


#: Pieces a template is made of: fixed text (with or without a "/") and the two fields.
LITERALS = st.sampled_from(["", "/", "-", "x", "a/", "/b", ".csv", "_", "x/y"])
#: The two bodies key_pattern gives a field: one segment, or several.
GROUP = re.compile(rf"\(\?P<(?:tenant_id|object_id)>(?:\[\^/\]\+|{re.escape(_SEGMENTS)})\)")


@st.composite
def templates(draw: st.DrawFn) -> str:
    first, second = draw(st.permutations(["tenant_id", "object_id"]))
    plus = draw(st.sampled_from(["", "+"]))
    return (
        "e/"
        + draw(LITERALS)
        + f"{{{first}}}"
        + draw(LITERALS)
        + f"{{{second}{plus}}}"
        + draw(LITERALS)
    )


@given(templates())
def test_every_accepted_template_builds_a_pattern_whose_groups_a_slash_keeps_apart(
    template: str,
) -> None:
    # Given any template the config accepts
    try:
        S3Discovery(bucket="my-bucket", key_template=template)
    except ValidationError:
        return
    # When its key pattern is built
    pattern = key_pattern(template).pattern
    # Then a literal "/" lies between any two of its unbounded groups: neither group can take
    # a character of the other's segment, so a key splits one way and the match never tries
    # more than one split (matching stays linear in the key's length)
    between = GROUP.split(pattern)
    assert len(between) == 3, pattern
    assert "/" in between[1], pattern

"""The `{field}` of a scope's or a limit's key template: one pattern for the whole product."""

from __future__ import annotations

from sweeper.config.key_template import KEY_FIELD_RE
from tests.unit.test_import_graph import PACKAGE_DIR

#: The pattern's text as a module would write it again.
PATTERN_TEXT = r"{([A-Za-z_][\w.]*)}"


def test_a_key_field_is_a_name_or_a_dotted_param_name() -> None:
    template = "{policy}:{params.account}:{tenant_id}:{1x}:{}:{host"

    assert KEY_FIELD_RE.findall(template) == ["policy", "params.account", "tenant_id"]


def test_the_key_field_pattern_is_written_once_in_the_product() -> None:
    # Given every module of the shipped package, When each is searched for the pattern's text
    writers = sorted(
        str(path.relative_to(PACKAGE_DIR))
        for path in PACKAGE_DIR.rglob("*.py")
        if PATTERN_TEXT in path.read_text(encoding="utf-8")
    )

    # Then only its home writes it: the config, the limiter and `failing` read the same fields
    assert writers == ["config/key_template.py"]

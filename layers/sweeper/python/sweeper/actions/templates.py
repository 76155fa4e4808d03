"""Templates over a job, filled by structure, never by splicing text.

A template names fields in braces: `{api_url}`, `{tenant_id}`, `{object_id}`, `{operation_key}`
and `{params.NAME}` (one of the job's params). Two shapes use them:

- a URL template, where each field but `{api_url}` fills one path segment or one query value
  (`sweeper.actions.url_template` encodes it, checks the sent path's shape and its authority);
- a JSON body template, a JSON value whose strings that are exactly one `{field}` are replaced
  by that field's JSON value (a param may be a number, a list, an object). Nothing else is
  filled: keys are never templated and a string naming a field beside other text is refused
  when the policy is validated. So no id or param can add a field, change a key or break the
  JSON: it only ever becomes one value where its placeholder stood.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, Final

from sweeper.errors import SweeperError
from sweeper.models import ActionCall

#: Fields every template may name besides `params.NAME`.
JOB_FIELDS: Final = frozenset({"api_url", "tenant_id", "object_id", "operation_key"})
PARAMS_PREFIX: Final = "params."
#: The tenant's field: the one a per-tenant api_url's host or secret name may hold.
TENANT_FIELD: Final = "{tenant_id}"
#: Any `{...}` in a template: what it names is checked against the known fields.
PLACEHOLDER_RE: Final = re.compile(r"{([^{}]*)}")
#: A field in a body string: `{name}` or `{params.name}`. Braces around anything else (a
#: GraphQL query's `{ id }`, `(input: {id: $id})`) are the string's text.
BODY_FIELD_RE: Final = re.compile(r"{([A-Za-z_][A-Za-z0-9_.-]*)}")
_PARAM_NAME_RE: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*")
#: How deep a body template may nest (a policy's body is small; this bounds the walk).
MAX_BODY_DEPTH: Final = 16


class TemplateError(SweeperError):
    """A job cannot fill its action's template (`code`): a param missing or of the wrong type.

    Never carries the value.
    """

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


def unknown_fields(text: str) -> list[str]:
    """The fields `text` names that no template may use, sorted."""
    return sorted({name for name in PLACEHOLDER_RE.findall(text) if not _known(name)})


def _known(name: str) -> bool:
    if name in JOB_FIELDS:
        return True
    return name.startswith(PARAMS_PREFIX) and bool(
        _PARAM_NAME_RE.fullmatch(name.removeprefix(PARAMS_PREFIX))
    )


def field_value(name: str, job: ActionCall, api_url: str = "") -> Any:
    """The JSON value of field `name` for `job`; TemplateError when a param is missing."""
    match name:
        case "api_url":
            return api_url
        case "tenant_id":
            return job.tenant_id
        case "object_id":
            return job.object_id
        case "operation_key":
            return job.key
    param = name.removeprefix(PARAMS_PREFIX)
    if param not in job.params:
        raise TemplateError("param_missing", f"the job has no param {param!r}")
    return job.params[param]


def check_body_template(template: Any, depth: int = 0) -> list[str]:
    """What is wrong with a JSON body template (an empty list: nothing)."""
    if depth > MAX_BODY_DEPTH:
        return [f"the body template nests deeper than {MAX_BODY_DEPTH}"]
    problems: list[str] = []
    if isinstance(template, dict):
        for key, value in template.items():
            if PLACEHOLDER_RE.search(key):
                problems.append(f"body key {key!r}: keys are never filled, name a field in a value")
            problems.extend(check_body_template(value, depth + 1))
    elif isinstance(template, list):
        for item in template:
            problems.extend(check_body_template(item, depth + 1))
    elif isinstance(template, str):
        names = BODY_FIELD_RE.findall(template)
        if names and not BODY_FIELD_RE.fullmatch(template):
            problems.append(
                f"body string {template!r}: a string is either exactly one {{field}} (replaced "
                "by its JSON value) or text without one; fields are never spliced into text"
            )
        problems.extend(
            f"body names unknown field {{{name}}}" for name in names if not _known(name)
        )
    elif not (template is None or isinstance(template, bool | int | float)):
        problems.append(f"body holds a {type(template).__name__}, not a JSON value")
    return problems


def fill_body(template: Any, value_of: Callable[[str], Any]) -> Any:
    """A copy of a checked body template with each `{field}` string replaced by its value."""
    if isinstance(template, dict):
        return {key: fill_body(value, value_of) for key, value in template.items()}
    if isinstance(template, list):
        return [fill_body(item, value_of) for item in template]
    if isinstance(template, str):
        match = BODY_FIELD_RE.fullmatch(template)
        return value_of(match.group(1)) if match else template
    return template


def scalar_text(value: Any) -> str | None:
    """A string, number or boolean as one value's text (`true`, `12.5`); None for anything
    else (null, a list, an object: no one value)."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    return None


def segment_text(value: Any) -> str:
    """A field's value as the text of one URL segment: a string, a number or a boolean.

    TemplateError for anything else (null, a list, an object): it has no one segment.
    """
    text = scalar_text(value)
    if text is None:
        raise TemplateError("param_not_a_segment", "a URL field's param is not a string or number")
    return text

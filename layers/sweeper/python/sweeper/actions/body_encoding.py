"""How the `http` kind's body template is sent: as JSON, or as a form (Stripe's nested keys).

Both are filled by structure (`sweeper.actions.templates`): the template gives every key, an id
or a param only ever one value where its placeholder stood.

`body_encoding = "form"` sends `application/x-www-form-urlencoded`. The template is a table;
a nested table or array becomes bracketed keys as Stripe reads them:

    body = { charge = "{object_id}", amount = "{params.amount}",
             metadata = { tenant = "{tenant_id}" }, items = [{ id = "{params.item}" }] }
    ->  charge=ch_1&amount=1200&metadata[tenant]=acct_1&items[0][id]=it_9  (brackets encoded)

Each key is built from the template alone and each value is percent-encoded whole, so a `&`,
`=`, `[` or `%` in an id or param is text of its value and can add or rename no field. A param
fills a form field only with a string, number or boolean (`true`/`false`); a list, an object or
null has no one value's text and the job is `permanent` (`param_not_a_form_value`), nothing sent.
A template key holding `[` or `]`, and an empty table or array (which sends no field at all),
are refused when the policy is read.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, Final, Literal
from urllib.parse import urlencode

from sweeper.actions.templates import BODY_FIELD_RE, TemplateError, fill_body, scalar_text

BodyEncoding = Literal["json", "form"]
CONTENT_TYPES: Final[dict[str, str]] = {
    "json": "application/json",
    "form": "application/x-www-form-urlencoded",
}


def check_form_template(template: Any) -> list[str]:
    """What keeps a (checked) body template from being sent as a form; empty: nothing."""
    if not isinstance(template, dict):
        return ["a form body is a table of fields (body = { name = ... }), not an array"]
    return _form_problems(template, "body")


def _form_problems(template: Any, where: str) -> list[str]:
    problems: list[str] = []
    if isinstance(template, dict | list) and not template:
        problems.append(f"{where} is empty: a form has no field for it; leave it out")
    if isinstance(template, dict):
        for key, value in template.items():
            if not key or "[" in key or "]" in key:
                problems.append(
                    f"form key {key!r} in {where}: keys are names without [ or ] (nest a "
                    "table for metadata[key])"
                )
            problems.extend(_form_problems(value, f"{where}.{key}"))
    elif isinstance(template, list):
        for index, item in enumerate(template):
            problems.extend(_form_problems(item, f"{where}[{index}]"))
    return problems


def form_pairs(template: Any, value_of: Callable[[str], Any]) -> list[tuple[str, str]]:
    """The (key, value) fields of a checked form template filled for one job, in order."""
    pairs: list[tuple[str, str]] = []
    _walk(template, "", value_of, pairs)
    return pairs


def _walk(
    template: Any, prefix: str, value_of: Callable[[str], Any], pairs: list[tuple[str, str]]
) -> None:
    if isinstance(template, dict):
        for key, value in template.items():
            _walk(value, f"{prefix}[{key}]" if prefix else key, value_of, pairs)
    elif isinstance(template, list):
        for index, item in enumerate(template):
            _walk(item, f"{prefix}[{index}]", value_of, pairs)
    else:
        match = BODY_FIELD_RE.fullmatch(template) if isinstance(template, str) else None
        value = value_of(match.group(1)) if match else template
        text = scalar_text(value)
        if text is None:
            raise TemplateError(
                "param_not_a_form_value", "a form field's param is not a string, number or bool"
            )
        pairs.append((prefix, text))


def encode_body(template: Any, value_of: Callable[[str], Any], encoding: BodyEncoding) -> bytes:
    """The body of one call: the checked template filled by structure, then encoded."""
    if encoding == "form":
        try:
            return urlencode(form_pairs(template, value_of)).encode("ascii")
        except UnicodeEncodeError as exc:  # a lone surrogate has no UTF-8
            raise TemplateError("param_not_form_text", "a form value is not text") from exc
    filled = fill_body(template, value_of)
    return json.dumps(filled, ensure_ascii=False, separators=(",", ":")).encode()

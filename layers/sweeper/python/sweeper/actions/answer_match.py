"""What a vendor's answer says, read the one safe way: a header's value, a JSON path of the body.

Outcome rules (`sweeper.actions.outcome_rules`) use it to class an answer by more than its
status, and the limits a vendor states in its answers may read the same fields. The interface:

- `Answer`: the status, the headers (names compared without case) and the body's first bytes;
- `HeaderEquals` / `JsonPathEquals` (and `HeaderPresent` / `JsonPathPresent`): one condition
  each, `holds(answer)` answers only whether it matched, so a value read from an answer goes
  nowhere but into that comparison;
- `parse_json_path` / `json_value`: the path subset (`error.code`, `errors[0].type`, an
  optional leading `$`): dotted keys and `[index]`, nothing that filters, recurses or
  evaluates, so a path's cost is its length and it cannot fail at run time;
- `header_number`: a header read as a finite number (a reset time, a count), or None.

Nothing here raises for what a vendor sent: a missing header, a body that is not JSON, a path
through a missing key or past a list's end all simply do not match.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

#: One path step: a key (`.name`, or the first step without a dot) or an `[index]`.
_STEP_RE: Final = re.compile(r"\.([A-Za-z_][A-Za-z0-9_-]*)|\[(0|[1-9][0-9]{0,5})\]")
#: How many steps a path may take (a vendor's error document is shallow).
MAX_PATH_STEPS: Final = 16
#: How much of a body is read for a JSON path; a longer body matches no path.
MAX_ANSWER_BODY_BYTES: Final = 64 * 1024
_NUMBER_RE: Final = re.compile(r"[+-]?\d+(?:\.\d+)?")

PathStep = str | int


class PathError(ValueError):
    """A JSON path outside the subset (raised when a policy is read, never for an answer)."""


def parse_json_path(text: str) -> tuple[PathStep, ...]:
    """The steps of a path such as `error.code` or `$.errors[0].type`; PathError otherwise."""
    # `$` is the document; without it a path begins with its first key (or an [index])
    rest = text[1:] if text.startswith("$") else text if text.startswith("[") else f".{text}"
    steps: list[PathStep] = []
    position = 0
    while position < len(rest):
        match = _STEP_RE.match(rest, position)
        if match is None:
            raise PathError(
                f"json_path {text!r}: use dotted keys and [index] only, e.g. error.code or "
                "errors[0].type"
            )
        key, index = match.group(1), match.group(2)
        steps.append(key if key is not None else int(index))
        position = match.end()
    if not steps:
        raise PathError(f"json_path {text!r} names nothing: e.g. error.code")
    if len(steps) > MAX_PATH_STEPS:
        raise PathError(f"json_path {text!r} takes more than {MAX_PATH_STEPS} steps")
    return tuple(steps)


class _Missing:
    """No value at a path (distinct from a JSON null)."""

    def __repr__(self) -> str:
        return "MISSING"


MISSING: Final = _Missing()


def json_value(document: Any, steps: tuple[PathStep, ...]) -> Any:
    """The value at `steps` in a parsed JSON document, or MISSING."""
    value = document
    for step in steps:
        in_object = isinstance(step, str) and isinstance(value, dict) and step in value
        in_array = isinstance(step, int) and isinstance(value, list) and step < len(value)
        if not (in_object or in_array):
            return MISSING
        value = value[step]
    return value


@dataclass(frozen=True, slots=True)
class Answer:
    """One answer as a rule sees it: its status, its headers (by lower-case name) and the
    first bytes of its body (None when not read). Built per call, never stored or logged."""

    status: int
    headers: Mapping[str, str]
    body: bytes | None = None
    _document: list[Any] = field(default_factory=list, repr=False, compare=False)

    @classmethod
    def of(cls, status: int, headers: Mapping[str, str], body: bytes | None = None) -> Answer:
        """An answer whose header names are looked up without case."""
        return cls(status, {name.lower(): value for name, value in headers.items()}, body)

    def header(self, name: str) -> str | None:
        """The header's value (surrounding whitespace removed), or None when absent."""
        value = self.headers.get(name.lower())
        return None if value is None else value.strip()

    def document(self) -> Any:
        """The body parsed as JSON once, or MISSING (no body, too long, not JSON)."""
        if not self._document:
            self._document.append(_parsed(self.body))
        return self._document[0]


def _parsed(body: bytes | None) -> Any:
    if body is None or len(body) > MAX_ANSWER_BODY_BYTES:
        return MISSING
    try:
        return json.loads(body)
    except (ValueError, RecursionError):
        return MISSING


def header_number(answer: Answer, name: str) -> float | None:
    """A header read as a finite decimal number (`1712345678`, `0.5`), or None."""
    text = answer.header(name)
    if text is None or not _NUMBER_RE.fullmatch(text):
        return None
    number = float(text)
    return number if math.isfinite(number) else None


@dataclass(frozen=True, slots=True)
class HeaderEquals:
    """The answer has header `name` (any case) whose value, trimmed, is exactly `equals`."""

    name: str
    equals: str

    def holds(self, answer: Answer) -> bool:
        return answer.header(self.name) == self.equals


@dataclass(frozen=True, slots=True)
class HeaderPresent:
    """The answer has header `name` (any case), whatever its value (GitHub's secondary limit
    is a 403 with `Retry-After`; a 403 without one is a refusal)."""

    name: str

    def holds(self, answer: Answer) -> bool:
        return answer.header(self.name) is not None


@dataclass(frozen=True, slots=True)
class JsonPathPresent:
    """The answer's body is JSON with a value other than null at `steps` (Shopify's
    `userErrors[0]`: a mutation that failed)."""

    steps: tuple[PathStep, ...]

    def holds(self, answer: Answer) -> bool:
        return json_value(answer.document(), self.steps) not in (MISSING, None)


JsonScalar = str | int | float | bool | None


@dataclass(frozen=True, slots=True)
class JsonPathEquals:
    """The answer's body is JSON and holds `equals` at `steps`: the same type and value (a
    JSON `false` is not the text "false", `1` is not `true`)."""

    steps: tuple[PathStep, ...]
    equals: JsonScalar

    def holds(self, answer: Answer) -> bool:
        found = json_value(answer.document(), self.steps)
        if found is MISSING or isinstance(found, dict | list):
            return False
        if isinstance(found, bool) or isinstance(self.equals, bool):
            return type(found) is type(self.equals) and found == self.equals
        if isinstance(found, int | float) and isinstance(self.equals, int | float):
            return found == self.equals
        return type(found) is type(self.equals) and found == self.equals

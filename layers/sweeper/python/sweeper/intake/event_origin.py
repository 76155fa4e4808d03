"""Is an EventBridge-shaped intake body one that the policy's own rules could have delivered?

The intake queue admits events from the policy's rules only (its resource policy), but the
body is checked too: an event whose `source` and `detail-type` none of the policy's
`intake.event_patterns` match did not come through one of its rules, and is refused. A policy
without patterns has no rules, so every event-shaped body is refused.

Only the two fields are checked, with EventBridge's matchers for string values (exact value,
`prefix`, `suffix`, `equals-ignore-case`, `wildcard`, `anything-but`, `exists`); a matcher this
module does not know never matches, so an unknown shape is refused rather than let through.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any, Final

from sweeper.errors import HintRejectedError

#: The reason an event whose origin the policy's patterns do not match is refused with.
EVENT_NOT_IN_POLICY: Final = "event_not_in_policy"
#: The envelope fields checked, by their EventBridge (and pattern) names.
CHECKED_FIELDS: Final = ("source", "detail-type")


def check_event_origin(body: str, patterns: Sequence[Mapping[str, Any]]) -> None:
    """Raise HintRejectedError(EVENT_NOT_IN_POLICY) unless one pattern matches the event body's
    `source` and `detail-type`. Call it for a body already read as an event."""
    try:
        event: Any = json.loads(body)
    except (ValueError, RecursionError) as exc:
        raise HintRejectedError(EVENT_NOT_IN_POLICY) from exc
    if not isinstance(event, dict):
        raise HintRejectedError(EVENT_NOT_IN_POLICY)
    if not any(pattern_matches(pattern, event) for pattern in patterns):
        raise HintRejectedError(EVENT_NOT_IN_POLICY)


def pattern_matches(pattern: Mapping[str, Any], event: Mapping[str, Any]) -> bool:
    """Whether `pattern` admits the event's `source` and `detail-type` (a field the pattern does
    not name is admitted, as EventBridge does)."""
    for field in CHECKED_FIELDS:
        if field not in pattern:
            continue
        matchers = pattern[field]
        if not isinstance(matchers, list):
            return False
        if not any(_matches(matcher, event.get(field)) for matcher in matchers):
            return False
    return True


def _matches(matcher: Any, value: Any) -> bool:
    if not isinstance(matcher, dict):
        return isinstance(value, str) and matcher == value
    if len(matcher) != 1:
        return False
    ((kind, operand),) = matcher.items()
    if kind == "exists":
        return operand is (value is not None)
    if not isinstance(value, str):
        return False
    if kind == "anything-but":
        return not _any_of(operand, value)
    return _string_matcher(kind, operand, value)


def _any_of(operand: Any, value: str) -> bool:
    """`anything-but`'s operand: a value, a list of values, or one string matcher."""
    if isinstance(operand, str):
        return operand == value
    if isinstance(operand, list):
        return any(isinstance(o, str) and o == value for o in operand)
    if isinstance(operand, dict) and len(operand) == 1:
        ((kind, inner),) = operand.items()
        if isinstance(inner, list):
            return any(_string_matcher(kind, o, value) for o in inner)
        return _string_matcher(kind, inner, value)
    # Unknown: treat as matching, so `anything-but` refuses rather than admits.
    return True


def _string_matcher(kind: str, operand: Any, value: str) -> bool:
    if isinstance(operand, dict) and len(operand) == 1 and "equals-ignore-case" in operand:
        # `{"prefix": {"equals-ignore-case": "x"}}` and the same for `suffix`.
        inner = operand["equals-ignore-case"]
        if not isinstance(inner, str):
            return False
        return _string_matcher(kind, inner.casefold(), value.casefold())
    if not isinstance(operand, str):
        return False
    if kind == "prefix":
        return value.startswith(operand)
    if kind == "suffix":
        return value.endswith(operand)
    if kind == "equals-ignore-case":
        return value.casefold() == operand.casefold()
    if kind == "wildcard":
        return re.fullmatch(_wildcard_regex(operand), value, flags=re.DOTALL) is not None
    return False


def _wildcard_regex(pattern: str) -> str:
    """EventBridge's wildcard: `*` is any run of characters, `\\*` a literal star."""
    parts = re.split(r"(\\\*|\*)", pattern)
    return "".join(
        ".*" if part == "*" else re.escape("*") if part == "\\*" else re.escape(part)
        for part in parts
    )

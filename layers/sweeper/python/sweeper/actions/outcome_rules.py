"""The `http` kind's outcome rules: an answer classed by a header's value or a JSON path of its
body, before its status alone decides (`action.outcomes` and the vendor contract's table).

    [[policies.action.outcome_rules]]      # GitHub: an exhausted limit is a 403, not a refusal
    status = [403, 429]
    header = { name = "x-ratelimit-remaining", equals = "0" }
    outcome = "throttled"
    retry_at_header = "x-ratelimit-reset"  # epoch seconds: closed until then

    [[policies.action.outcome_rules]]      # Stripe says whether a retry can succeed
    header = { name = "Stripe-Should-Retry", equals = "false" }
    outcome = "permanent"

    [[policies.action.outcome_rules]]      # GitHub's secondary limit: a 403 naming a wait
    status = [403, 429]
    header = { name = "retry-after", present = true }
    outcome = "throttled"

The first rule whose conditions all hold decides. A rule without `status` applies to every
status but 2xx (an accepted call is reclassed only by a rule that names its status). What was
matched never leaves the rule: the result carries the rule's `code` (else `http_<status>`) and,
for `retry_at_header`, the wait it names, bounded; never a header's or the body's text.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from sweeper.actions.answer_match import (
    Answer,
    HeaderEquals,
    HeaderPresent,
    JsonPathEquals,
    JsonPathPresent,
    JsonScalar,
    header_number,
    parse_json_path,
)
from sweeper.actions.base import OutcomeName
from sweeper.actions.http_auth import HEADER_NAME_PATTERN
from sweeper.models import OutcomeClass
from sweeper.vendor_reading import MAX_WAIT_SECONDS

#: How many rules a policy may list (each is tried per answer).
MAX_OUTCOME_RULES: Final = 16
_CODE_PATTERN: Final = r"^[a-z][a-z0-9_]{0,47}$"


class _RuleModel(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class HeaderCondition(_RuleModel):
    """`header = { name = "...", equals = "..." }`: the header's value, trimmed, is exactly it;
    `present = true` instead: the answer has the header, whatever its value."""

    name: str = Field(pattern=HEADER_NAME_PATTERN, max_length=128)
    equals: str | None = Field(default=None, max_length=256)
    present: Literal[True] | None = None

    @model_validator(mode="after")
    def _one_test(self) -> Self:
        if (self.equals is None) == (self.present is None):
            raise ValueError(f'header {self.name!r}: give equals = "..." or present = true')
        return self

    def compiled(self) -> HeaderEquals | HeaderPresent:
        if self.equals is None:
            return HeaderPresent(self.name)
        return HeaderEquals(self.name, self.equals)


class JsonPathCondition(_RuleModel):
    """`json_path = { path = "error.code", equals = "..." }`: the body is JSON with that value
    (same type: `equals = false` matches a JSON false, not the text "false") at the path."""

    path: str = Field(max_length=256)
    equals: JsonScalar = None
    #: `present = true` instead of `equals`: any value but null is there.
    present: Literal[True] | None = None

    @field_validator("path")
    @classmethod
    def _path_in_subset(cls, value: str) -> str:
        parse_json_path(value)  # PathError is a ValueError: pydantic reports its message
        return value

    @field_validator("equals")
    @classmethod
    def _short_text(cls, value: JsonScalar) -> JsonScalar:
        if isinstance(value, str) and len(value) > 256:
            raise ValueError("json_path.equals is longer than 256 characters")
        return value

    @model_validator(mode="after")
    def _one_test(self) -> Self:
        # A present rule dumped whole (a function's environment) carries equals = null.
        given = "equals" in self.model_fields_set
        if (self.present and self.equals is not None) or not (self.present or given):
            raise ValueError(f"json_path {self.path!r}: give equals = ... or present = true")
        return self

    def compiled(self) -> JsonPathEquals | JsonPathPresent:
        steps = parse_json_path(self.path)
        if self.present:
            return JsonPathPresent(steps)
        return JsonPathEquals(steps, self.equals)


class OutcomeRule(_RuleModel):
    """One `[[action.outcome_rules]]` entry: when its conditions hold, the answer's outcome."""

    #: A status or a list of them; none: every status but 2xx.
    status: int | list[int] | None = None
    header: HeaderCondition | None = None
    json_path: JsonPathCondition | None = None
    outcome: OutcomeName
    #: The short code the job records (default `http_<status>`).
    code: str | None = Field(default=None, pattern=_CODE_PATTERN)
    #: A header naming when to call again, in epoch seconds (`x-ratelimit-reset`); for a
    #: throttled or snooze outcome. A missing or unreadable one leaves Retry-After to decide.
    retry_at_header: str | None = Field(default=None, pattern=HEADER_NAME_PATTERN, max_length=128)

    @field_validator("status")
    @classmethod
    def _statuses_are_http(cls, value: int | list[int] | None) -> int | list[int] | None:
        statuses = [value] if isinstance(value, int) else value or []
        bad = sorted(s for s in statuses if not 100 <= s <= 599)
        if bad:
            raise ValueError(f"outcome rule status: not HTTP statuses: {bad}")
        if isinstance(value, list) and not value:
            raise ValueError("outcome rule status: an empty list matches nothing; leave it out")
        return value

    @model_validator(mode="after")
    def _has_a_condition(self) -> Self:
        if self.header is None and self.json_path is None:
            raise ValueError(
                "an outcome rule needs header = {name, equals} or json_path = {path, equals}; "
                "a status alone is action.outcomes"
            )
        if self.retry_at_header is not None and self.outcome not in ("throttled", "snooze"):
            raise ValueError("retry_at_header is for a throttled or snooze outcome")
        return self

    @property
    def statuses(self) -> frozenset[int] | None:
        if self.status is None:
            return None
        return frozenset([self.status] if isinstance(self.status, int) else self.status)


@dataclass(frozen=True, slots=True)
class RuledOutcome:
    """What a matching rule makes of an answer: its class, code and wait (seconds)."""

    outcome: OutcomeClass
    code: str
    retry_after_seconds: float | None


_Condition = HeaderEquals | HeaderPresent | JsonPathEquals | JsonPathPresent


@dataclass(frozen=True, slots=True)
class _Compiled:
    statuses: frozenset[int] | None
    conditions: tuple[_Condition, ...]
    outcome: OutcomeClass
    code: str | None
    retry_at_header: str | None


class OutcomeRules:
    """A policy's rules, compiled once: `classify(answer, now)` is the first match, or None."""

    def __init__(self, rules: Sequence[OutcomeRule]) -> None:
        compiled: list[_Compiled] = []
        for rule in rules:
            conditions: list[_Condition] = []
            if rule.header is not None:
                conditions.append(rule.header.compiled())
            if rule.json_path is not None:
                conditions.append(rule.json_path.compiled())
            compiled.append(
                _Compiled(
                    rule.statuses,
                    tuple(conditions),
                    OutcomeClass(rule.outcome),
                    rule.code,
                    rule.retry_at_header,
                )
            )
        self._rules = tuple(compiled)

    def __bool__(self) -> bool:
        return bool(self._rules)

    def reads_body(self, status: int) -> bool:
        """Whether a rule that may apply to `status` looks into the body (then it is read)."""
        return any(
            _applies(rule, status)
            and any(isinstance(c, JsonPathEquals | JsonPathPresent) for c in rule.conditions)
            for rule in self._rules
        )

    def classify(self, answer: Answer, now: float) -> RuledOutcome | None:
        """The first rule whose status and conditions hold; `now` in epoch seconds."""
        for rule in self._rules:
            if _applies(rule, answer.status) and all(c.holds(answer) for c in rule.conditions):
                wait = None
                if rule.retry_at_header is not None:
                    wait = retry_at_wait(answer, rule.retry_at_header, now)
                code = rule.code or f"http_{answer.status}"
                return RuledOutcome(rule.outcome, code, wait)
        return None


def _applies(rule: _Compiled, status: int) -> bool:
    if rule.statuses is None:
        return not 200 <= status <= 299
    return status in rule.statuses


def retry_at_wait(answer: Answer, header: str, now: float) -> float | None:
    """Seconds from `now` to the epoch time `header` names, within [0, MAX_WAIT_SECONDS];
    None when the header is missing or not a number."""
    reset = header_number(answer, header)
    if reset is None:
        return None
    return min(max(0.0, reset - now), MAX_WAIT_SECONDS)

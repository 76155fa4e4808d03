"""A limit's `learn`: where the vendor states the limit in its answers, what a call costs, and
how much of a shared quota sweeper leaves to others (`sweeper.vendor_limits` reads and paces).

    learn = "ratelimit"                      # the IETF RateLimit-Policy / RateLimit fields
    learn = "x-ratelimit"                    # X-RateLimit-Limit / -Remaining / -Reset
    learn = { source = "x-ratelimit", reset = "epoch", reserve_fraction = 0.2 }   # GitHub
    learn = { header = "Sforce-Limit-Info", pattern = 'api-usage=(?P<used>\\d+)/(?P<quota>\\d+)',
              reserve_fraction = 0.2 }                                            # Salesforce
    learn = { cost = { reserve = 10, actual = { json_path = "extensions.cost.actualQueryCost" },
                       bucket = "shopify" } }                                      # Shopify

A string is short for `{ source = ... }`; a table with `header` and `pattern` is short for
`{ source = { header, pattern }, ... }`. Every refusal is one line naming the key.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Annotated, Any, Final, Literal, Self

from pydantic import BeforeValidator, Discriminator, Field, Tag, field_validator, model_validator

from sweeper.actions.answer_match import parse_json_path
from sweeper.actions.http_auth import HEADER_NAME_PATTERN
from sweeper.config.base import _Strict
from sweeper.errors import SweeperError
from sweeper.vendor_limits import (
    SHOPIFY_COST,
    CostSource,
    PatternSource,
    RateLimitSource,
    Reader,
    Source,
    ValueAt,
    XRateLimitFields,
    XRateLimitSource,
    compile_pattern,
)
from sweeper.vendor_reading import MAX_COUNT, MAX_SECONDS

#: A cost reserved from a job's param: exactly `{params.NAME}`.
_PARAM_COST_RE: Final = re.compile(r"^\{params\.([A-Za-z_][A-Za-z0-9_-]{0,63})\}$")
_HeaderName = Annotated[str, Field(pattern=HEADER_NAME_PATTERN, max_length=128)]


class CostError(SweeperError):
    """A job's expected cost cannot be read from its params (`code`); never carries the value."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


class PatternConfig(_Strict):
    """`{ header = "...", pattern = "..." }`: a header read by a pattern with named groups."""

    header: _HeaderName
    pattern: str = Field(max_length=256)

    @field_validator("pattern")
    @classmethod
    def _compiles(cls, value: str) -> str:
        compile_pattern(value)  # a ValueError with one line of its own
        return value


class XRateLimitHeaders(_Strict):
    """The `X-RateLimit-*` header names, when a vendor spells them otherwise (GitHub's by
    default); `resource` and `used` may be switched off with an empty string."""

    limit: _HeaderName = "x-ratelimit-limit"
    remaining: _HeaderName = "x-ratelimit-remaining"
    reset: _HeaderName = "x-ratelimit-reset"
    resource: Annotated[str, Field(pattern=rf"^$|{HEADER_NAME_PATTERN}", max_length=128)] = (
        "x-ratelimit-resource"
    )
    used: Annotated[str, Field(pattern=rf"^$|{HEADER_NAME_PATTERN}", max_length=128)] = (
        "x-ratelimit-used"
    )


class ValueAtConfig(_Strict):
    """Where an answer states a number: `{ header = "..." }` or `{ json_path = "a.b[0].c" }`."""

    header: _HeaderName | None = None
    json_path: str | None = Field(default=None, max_length=256)

    @field_validator("json_path")
    @classmethod
    def _path_in_subset(cls, value: str | None) -> str | None:
        if value is not None:
            parse_json_path(value)  # PathError is a ValueError: pydantic reports its message
        return value

    @model_validator(mode="after")
    def _one_place(self) -> Self:
        if (self.header is None) == (self.json_path is None):
            raise ValueError('give header = "..." or json_path = "...", one of them')
        return self

    def to_value_at(self) -> ValueAt:
        if self.json_path is not None:
            return ValueAt.json(self.json_path)
        return ValueAt(header=self.header)


class BucketConfig(_Strict):
    """JSON paths of a points bucket's level, maximum and restore rate per second."""

    level: str = Field(max_length=256)
    maximum: str | None = Field(default=None, max_length=256)
    restore_rate: str | None = Field(default=None, max_length=256)

    @field_validator("level", "maximum", "restore_rate")
    @classmethod
    def _paths_in_subset(cls, value: str | None) -> str | None:
        if value is not None:
            parse_json_path(value)
        return value


class CostConfig(_Strict):
    """What a call costs: `reserve` (a constant, the query's requested cost when the vendor
    states one, or `"{params.NAME}"`) is taken with the call's slot; `actual` (a header or a
    JSON path) corrects it from the answer both ways, a lower cost given back
    (sweeper.admission.costs); `bucket` resynchronises the level from the vendor's
    (`"shopify"`: its `throttleStatus`)."""

    reserve: float | str
    actual: ValueAtConfig | None = None
    requested: ValueAtConfig | None = None
    bucket: Literal["shopify"] | BucketConfig | None = None

    @field_validator("reserve")
    @classmethod
    def _constant_or_param(cls, value: float | str) -> float | str:
        if isinstance(value, str):
            if not _PARAM_COST_RE.match(value):
                raise ValueError('cost.reserve: a number or "{params.NAME}", e.g. "{params.cost}"')
        elif not (math.isfinite(value) and 0 < value <= MAX_COUNT):
            raise ValueError(f"cost.reserve must be a number in (0, {MAX_COUNT}]")
        return value

    def expected(self, params: Mapping[str, Any]) -> float:
        """The cost to reserve for a job with these params; CostError when its param is missing
        or not a number within bounds."""
        if not isinstance(self.reserve, str):
            return float(self.reserve)
        name = self.reserve.removeprefix("{params.").removesuffix("}")  # its shape was checked
        if name not in params:
            raise CostError("cost_param_missing", f"the job has no param {name!r} for its cost")
        value = params[name]
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise CostError("cost_param_not_a_number", f"param {name!r} is not a number")
        if not (math.isfinite(value) and 0 < value <= MAX_COUNT):
            raise CostError("cost_param_out_of_range", f"param {name!r} is not in (0, {MAX_COUNT}]")
        return float(value)

    def source(self) -> CostSource:
        """The reader of this cost from an answer."""
        if self.bucket == "shopify":
            bucket = SHOPIFY_COST
        elif self.bucket is None:
            bucket = CostSource()
        else:
            bucket = CostSource(
                level=ValueAt.json(self.bucket.level),
                maximum=None if self.bucket.maximum is None else ValueAt.json(self.bucket.maximum),
                restore_rate=(
                    None
                    if self.bucket.restore_rate is None
                    else ValueAt.json(self.bucket.restore_rate)
                ),
            )
        return CostSource(
            requested=self.requested.to_value_at() if self.requested else bucket.requested,
            actual=self.actual.to_value_at() if self.actual else bucket.actual,
            level=bucket.level,
            maximum=bucket.maximum,
            restore_rate=bucket.restore_rate,
        )


def _source_kind(value: object) -> str:
    return "named" if isinstance(value, str) else "pattern"


#: A named source, or a header with a pattern: chosen by the value's type, so that a refusal
#: names what was wrong with the one meant, not with both.
_Source = Annotated[
    Annotated[Literal["ratelimit", "x-ratelimit"], Tag("named")]
    | Annotated[PatternConfig, Tag("pattern")],
    Discriminator(_source_kind),
]


class LearnConfig(_Strict):
    """What a limit learns from the vendor's answers (see the module docstring)."""

    source: _Source | None = None
    #: How an x-ratelimit or pattern reset is sent: seconds to wait, or an epoch time (GitHub).
    reset: Literal["seconds", "epoch"] = "seconds"
    headers: XRateLimitHeaders | None = None
    #: The IETF policy this limit follows (default: the one named as the limit, else the one
    #: whose window is the limit's).
    policy: str | None = Field(default=None, pattern=r"^[!-~]{1,64}$")
    #: The window a source that states none counts over (X-RateLimit-*, a pattern), when the
    #: limit has no told rate to take it from.
    window_seconds: float | None = Field(default=None, gt=0, le=MAX_SECONDS)
    #: A shared quota: the share of it (or the count) sweeper leaves untouched for others.
    #: Stating either (0 included) says others spend the quota too (`shared`).
    reserve_fraction: float = Field(default=0.0, ge=0.0, lt=1.0)
    reserve: int | None = Field(default=None, ge=0, le=MAX_COUNT)
    cost: CostConfig | None = None

    @model_validator(mode="before")
    @classmethod
    def _budget_moved(cls, data: Any) -> Any:
        if isinstance(data, Mapping) and "budget" in data:
            raise ValueError(
                "learn.budget is gone: give the limit budget = { limit = N, window = "
                '"fixed" | "rolling" } (sweeper.config.budget)'
            )
        return data

    @model_validator(mode="after")
    def _consistent(self) -> Self:
        if self.source is None and self.cost is None:
            raise ValueError(
                'learn needs a source ("ratelimit", "x-ratelimit", a header and pattern) or a cost'
            )
        if self.reset == "epoch" and self.source in (None, "ratelimit"):
            raise ValueError(
                'learn.reset = "epoch" is for x-ratelimit or a pattern: the IETF fields send '
                "seconds"
            )
        if self.headers is not None and self.source != "x-ratelimit":
            raise ValueError(
                'learn.headers names X-RateLimit-* headers: use source = "x-ratelimit"'
            )
        if self.policy is not None and self.source != "ratelimit":
            raise ValueError('learn.policy names an IETF policy: use source = "ratelimit"')
        if self.reserve is not None and self.reserve_fraction:
            raise ValueError(
                "learn: give reserve (a count) or reserve_fraction (a share), not both"
            )
        return self

    @property
    def shared(self) -> bool:
        """Others spend this quota too: the limit states a reserve for them (0 included)."""
        return self.reserve is not None or self.reserve_fraction > 0

    def reserved(self, quota: int) -> float:
        """How much of `quota` is left to others: `reserve`, or `reserve_fraction` of it."""
        if self.reserve is not None:
            return float(min(self.reserve, quota))
        return quota * self.reserve_fraction

    def reader(self, limit_name: str) -> Reader:
        """The reader of this limit's answers; a pattern's limit is named as the limit."""
        sources: list[Source] = []
        if self.source == "ratelimit":
            sources.append(RateLimitSource())
        elif self.source == "x-ratelimit":
            names = self.headers or XRateLimitHeaders()
            fields = XRateLimitFields(
                names.limit,
                names.remaining,
                names.reset,
                names.resource or None,
                names.used or None,
            )
            sources.append(XRateLimitSource(fields, self.reset, limit_name))
        elif isinstance(self.source, PatternConfig):
            sources.append(
                PatternSource(
                    self.source.header,
                    compile_pattern(self.source.pattern),
                    self.reset,
                    limit_name,
                    self.window_seconds,
                )
            )
        if self.cost is not None:
            sources.append(self.cost.source())
        return Reader(tuple(sources))


def _shorthand(value: object) -> object:
    """`"ratelimit"` -> `{source = "ratelimit"}`; a table with `pattern` -> its header and
    pattern under `source`."""
    if isinstance(value, str):
        return {"source": value}
    if isinstance(value, Mapping) and "pattern" in value and "source" not in value:
        rest = {k: v for k, v in value.items() if k not in ("header", "pattern")}
        return {**rest, "source": {"header": value.get("header"), "pattern": value["pattern"]}}
    return value


#: The type of a limit's `learn` field: `learn: Learn | None = None`.
Learn = Annotated[LearnConfig, BeforeValidator(_shorthand)]


def check_learn_against_limit(
    learn: LearnConfig, limit_name: str, told_window_seconds: float | None
) -> None:
    """What a limit's learn needs of the limit it is on (ValueError, one line): a source that
    states no window needs the window from the limit's told rate or `window_seconds`."""
    states_no_window = learn.source == "x-ratelimit" or isinstance(learn.source, PatternConfig)
    if states_no_window and not (told_window_seconds or learn.window_seconds):
        raise ValueError(
            f"limit {limit_name!r}: learn from {_describe(learn)} needs the window it counts "
            "over: give the limit a rate (its period) or learn.window_seconds"
        )


def _describe(learn: LearnConfig) -> str:
    return "a header pattern" if isinstance(learn.source, PatternConfig) else str(learn.source)

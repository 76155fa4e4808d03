"""What a call cost, read from its answer: a header or a JSON path of the body (the path
subset of `sweeper.actions.answer_match`, read the same way outcome rules read it).

Shopify's GraphQL Admin API is the model (`SHOPIFY_COST`): every answer carries
`extensions.cost.requestedQueryCost`, `actualQueryCost` (null when the call was throttled) and
`throttleStatus {maximumAvailable, currentlyAvailable, restoreRate}`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from sweeper.actions.answer_match import (
    MISSING,
    Answer,
    PathStep,
    json_value,
    parse_json_path,
)
from sweeper.vendor_limits.headers import ascii_number
from sweeper.vendor_reading import BucketReading, CostReading, VendorReading, amount


@dataclass(frozen=True, slots=True)
class ValueAt:
    """Where an answer states a number: a header, or a JSON path of the body (one of them)."""

    header: str | None = None
    path: tuple[PathStep, ...] | None = None

    @classmethod
    def json(cls, path: str) -> ValueAt:
        """A JSON path such as `extensions.cost.actualQueryCost` (PathError when outside the
        subset: raised when a policy is read, never for an answer)."""
        return cls(path=parse_json_path(path))

    def look(self, answer: Answer) -> tuple[float | None, bool]:
        """The number there, within bounds, or None; and whether something was there that is
        not one (a boolean, a string, a list, a negative or huge number: the answer's fault).
        Nothing there, or a JSON null (a throttled call's actual cost), is no fault."""
        if self.header is not None:
            number = amount(ascii_number(answer, self.header))
            return number, number is None and answer.header(self.header) is not None
        if self.path is None:
            return None, False
        value = json_value(answer.document(), self.path)
        if value is MISSING or value is None:
            return None, False
        number = amount(value)
        return number, number is None

    @property
    def field(self) -> str:
        """The header or JSON path read (configuration, never an answer's text)."""
        if self.header is not None:
            return self.header
        steps = self.path or ()
        return "".join(
            f"[{step}]" if isinstance(step, int) else (step if n == 0 else f".{step}")
            for n, step in enumerate(steps)
        )


@dataclass(frozen=True, slots=True)
class CostSource:
    """Reads a call's cost, and the bucket it was charged to, where the spec says."""

    requested: ValueAt | None = None
    actual: ValueAt | None = None
    level: ValueAt | None = None
    maximum: ValueAt | None = None
    restore_rate: ValueAt | None = None

    @property
    def reads_body(self) -> bool:
        places = (self.requested, self.actual, self.level, self.maximum, self.restore_rate)
        return any(place is not None and place.path is not None for place in places)

    def read(self, answer: Answer, now_epoch: float) -> VendorReading:
        del now_epoch  # a cost has no time in it
        unread: list[str] = []
        requested, actual = (
            _read(self.requested, answer, unread),
            _read(self.actual, answer, unread),
        )
        bucket = BucketReading(
            _read(self.level, answer, unread),
            _read(self.maximum, answer, unread),
            _read(self.restore_rate, answer, unread),
        )
        diagnostics = tuple(f"{field}: not a number within bounds" for field in unread)
        if bucket == BucketReading():
            if requested is None and actual is None:
                return VendorReading(diagnostics=diagnostics)
            return VendorReading(cost=CostReading(requested, actual, None), diagnostics=diagnostics)
        return VendorReading(cost=CostReading(requested, actual, bucket), diagnostics=diagnostics)


def _read(where: ValueAt | None, answer: Answer, unread: list[str]) -> float | None:
    if where is None:
        return None
    number, bad = where.look(answer)
    if bad:
        unread.append(where.field)
    return number


_THROTTLE: Final = "extensions.cost.throttleStatus."
#: Shopify's GraphQL Admin API: the cost and the bucket, from every answer's body.
SHOPIFY_COST: Final = CostSource(
    requested=ValueAt.json("extensions.cost.requestedQueryCost"),
    actual=ValueAt.json("extensions.cost.actualQueryCost"),
    level=ValueAt.json(_THROTTLE + "currentlyAvailable"),
    maximum=ValueAt.json(_THROTTLE + "maximumAvailable"),
    restore_rate=ValueAt.json(_THROTTLE + "restoreRate"),
)

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

    def read(self, answer: Answer) -> float | None:
        """The number there, within bounds, or None."""
        if self.header is not None:
            return amount(ascii_number(answer, self.header))
        if self.path is None:
            return None
        value = json_value(answer.document(), self.path)
        return None if value is MISSING else amount(value)


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
        requested, actual = _read(self.requested, answer), _read(self.actual, answer)
        bucket = BucketReading(
            _read(self.level, answer), _read(self.maximum, answer), _read(self.restore_rate, answer)
        )
        if bucket == BucketReading():
            if requested is None and actual is None:
                return VendorReading()
            return VendorReading(cost=CostReading(requested, actual, None))
        return VendorReading(cost=CostReading(requested, actual, bucket))


def _read(where: ValueAt | None, answer: Answer) -> float | None:
    return None if where is None else where.read(answer)


_THROTTLE: Final = "extensions.cost.throttleStatus."
#: Shopify's GraphQL Admin API: the cost and the bucket, from every answer's body.
SHOPIFY_COST: Final = CostSource(
    requested=ValueAt.json("extensions.cost.requestedQueryCost"),
    actual=ValueAt.json("extensions.cost.actualQueryCost"),
    level=ValueAt.json(_THROTTLE + "currentlyAvailable"),
    maximum=ValueAt.json(_THROTTLE + "maximumAvailable"),
    restore_rate=ValueAt.json(_THROTTLE + "restoreRate"),
)

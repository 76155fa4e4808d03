"""A GraphQL API charged in points, Shopify-like, served by the vendor simulator beside its
delete API: a hand-written contract, not derived from any vendor's code.

* `POST /admin/api/graphql.json` with a JSON body `{"query": str, "variables": {"id": str}}`
  (or `{"input": {"id": str}}`, as `productDelete(input: $input)` takes it):
  the product `id` is deleted once (`data.productDelete.deletedProductId`); a product already
  gone answers `data.productDelete = null` and a `userErrors` entry, without effect; a body
  that is not such JSON answers 400;
* one bucket of points per store (the first label of the host a rehearsed call was for; one
  for every call that names none), as Shopify keeps one per app and store: it holds `maximum`
  points, regains `restore_rate` per second, and a call needs `requested_cost` points in it to
  run; it is then charged its actual cost, drawn from `cost_range` (seeded; never above what
  it requested);
* the path may name an API version, as Shopify's do (`/admin/api/2025-01/graphql.json`);
* every answer is HTTP 200 and states the cost in `extensions.cost` (`requestedQueryCost`,
  `actualQueryCost`, `throttleStatus {maximumAvailable, currentlyAvailable, restoreRate}`); a
  call the bucket cannot pay is throttled: no effect, `actualQueryCost: null` and
  `errors[0].extensions.code = "THROTTLED"`;
* `audit()`: calls, throttled calls, points charged and effects per product.
"""

from __future__ import annotations

import json
import random
import re
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Final

GRAPHQL_PATH: Final = "/admin/api/graphql.json"
_VERSIONED_PATH: Final = re.compile(r"^/admin/api/[0-9]{4}-[0-9]{2}/graphql\.json$")
#: Shopify's standard bucket: 1,000 points, restoring 50 a second (the issue's target (h)).
DEFAULT_MAXIMUM: Final = 1000.0
DEFAULT_RESTORE_RATE: Final = 50.0
DEFAULT_COST_RANGE: Final = (1, 20)
#: The store the local stack's simulator serves (docs/examples/shopify-graphql.toml's): a
#: store on Shopify's Standard plan as its rate-limit page states it today, restoring 100
#: points a second (Advanced 200, Plus 1,000, Enterprise 2,000), its bucket 20 seconds of that
#: (as the 1,000 at 50 Shopify once published); a productDelete requests 10 and is charged 10.
STANDARD_STORE_MAXIMUM: Final = 2000.0
STANDARD_STORE_RESTORE_RATE: Final = 100.0
PRODUCT_DELETE_COST: Final = 10


@dataclass(frozen=True, slots=True)
class GraphqlAnswer:
    """The status and JSON body of one answer."""

    status: int
    body: bytes


@dataclass(frozen=True, slots=True)
class GraphqlAudit:
    """What the GraphQL API saw."""

    calls_total: int
    throttled_total: int
    points_charged: float
    effects_by_id: dict[str, int]
    #: Each store's bucket level at the audit, restored to that instant, and the first call's
    #: arrival (monotonic; None before it): what the restore rate's use is read from.
    levels: dict[str, float] = field(default_factory=dict)
    first_call_at: float | None = None

    def to_json(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self.__slots__}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> GraphqlAudit:
        return cls(**data)


class PointsApi:
    """The GraphQL API and its bucket, behind one lock (see the module docstring)."""

    def __init__(
        self,
        *,
        maximum: float = DEFAULT_MAXIMUM,
        restore_rate: float = DEFAULT_RESTORE_RATE,
        cost_range: tuple[int, int] = DEFAULT_COST_RANGE,
        requested_cost: int | None = None,
        seed: int = 0,
    ) -> None:
        low, high = cost_range
        if not (maximum > 0 and restore_rate > 0 and 1 <= low <= high <= maximum):
            raise ValueError("the points bucket needs maximum, restore_rate > 0, 1 <= costs <= max")
        self.maximum, self.restore_rate = maximum, restore_rate
        self.cost_range = cost_range
        self.requested_cost = high if requested_cost is None else requested_cost
        if not high <= self.requested_cost <= maximum:
            raise ValueError("requested_cost must be at least the highest cost, at most maximum")
        self._seed = seed
        self._lock = threading.Lock()
        self._clear()

    def _clear(self) -> None:
        self._rng = random.Random(f"{self._seed}/graphql-cost")
        self._buckets: dict[str, tuple[float, float]] = {}  # store -> (level, read at)
        self._deleted: set[str] = set()
        self._effects: Counter[str] = Counter()
        self._calls = self._throttled = 0
        self._charged = 0.0
        self._first_call_at: float | None = None

    @classmethod
    def standard_store(cls, seed: int = 0) -> PointsApi:
        """A Standard plan's store charging a productDelete's cost (see the constants)."""
        cost = (PRODUCT_DELETE_COST, PRODUCT_DELETE_COST)
        return cls(
            maximum=STANDARD_STORE_MAXIMUM,
            restore_rate=STANDARD_STORE_RESTORE_RATE,
            cost_range=cost,
            seed=seed,
        )

    def reset(self) -> None:
        with self._lock:
            self._clear()

    def call(self, body: bytes, store: str = "") -> GraphqlAnswer:
        """Answer one POST's body, charged to `store`'s bucket."""
        product = _product_id(body)
        if product is None:
            return GraphqlAnswer(400, json.dumps({"errors": [{"message": "Bad Request"}]}).encode())
        with self._lock:
            self._calls += 1
            now = time.monotonic()
            if self._first_call_at is None:
                self._first_call_at = now
            level, at = self._buckets.get(store, (self.maximum, now))
            level = min(self.maximum, level + (now - at) * self.restore_rate)
            if level < self.requested_cost:
                self._buckets[store] = (level, now)
                self._throttled += 1
                return self._answer(None, None, level)
            actual = self._rng.randint(*self.cost_range)
            level -= actual
            self._buckets[store] = (level, now)
            self._charged += actual
            if product in self._deleted:
                gone = {"deletedProductId": None, "userErrors": [_GONE]}
                return self._answer(gone, actual, level)
            self._deleted.add(product)
            self._effects[product] += 1
            return self._answer({"deletedProductId": product, "userErrors": []}, actual, level)

    def _answer(
        self, deleted: dict[str, Any] | None, actual: int | None, level: float
    ) -> GraphqlAnswer:
        cost = {
            "requestedQueryCost": self.requested_cost,
            "actualQueryCost": actual,
            "throttleStatus": {
                "maximumAvailable": self.maximum,
                "currentlyAvailable": int(level),
                "restoreRate": self.restore_rate,
            },
        }
        document: dict[str, Any] = {"extensions": {"cost": cost}}
        if actual is None:
            document["errors"] = [{"message": "Throttled", "extensions": {"code": "THROTTLED"}}]
        else:
            document["data"] = {"productDelete": deleted}
        return GraphqlAnswer(200, json.dumps(document).encode())

    def audit(self) -> GraphqlAudit:
        with self._lock:
            now = time.monotonic()
            levels = {
                store: min(self.maximum, level + (now - at) * self.restore_rate)
                for store, (level, at) in self._buckets.items()
            }
            return GraphqlAudit(
                self._calls,
                self._throttled,
                self._charged,
                dict(self._effects),
                levels,
                self._first_call_at,
            )


_GONE: Final = {"field": ["id"], "message": "Product does not exist"}


def is_graphql_path(path: str) -> bool:
    """Whether `path` is the GraphQL API's, with or without an API version."""
    return path == GRAPHQL_PATH or _VERSIONED_PATH.match(path) is not None


def _product_id(body: bytes) -> str | None:
    try:
        document = json.loads(body)
    except ValueError:
        return None
    if not isinstance(document, dict) or not isinstance(document.get("query"), str):
        return None
    variables = document.get("variables")
    if isinstance(variables, dict) and isinstance(variables.get("input"), dict):
        variables = variables["input"]  # `productDelete(input: $input)`, as Shopify names it
    product = variables.get("id") if isinstance(variables, dict) else None
    return product if isinstance(product, str) and product else None

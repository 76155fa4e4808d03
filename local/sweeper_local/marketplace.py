"""The marketplace of docs/examples/listings.toml, served by the vendor simulator beside its
delete API: a hand-written contract with a vendor's layered limits, not derived from any vendor.

* `DELETE /v1/stores/{store_id}/listings/{listing_id}` (percent-encoded parts, decoded) with an
  API key in `X-Api-Key`: 204 and one effect the first time, 404 once the listing is gone or
  for a listing registered absent (`add_absent`); another method 405;
* a missing API key, or one not registered (`add_api_key`), 401 (no effect, not counted);
* two strict sliding windows, both counting every authenticated call that arrives, a refused
  one included: `store_rate` per store (from the path) and `app_rate` for all calls. A call
  over either is answered 429 with `Retry-After` (whole seconds until that window admits a call)
  and `X-RateLimit-Scope: app` or `store` naming it (the app when both are over);
* `throttle_next(scope, store=...)` (`POST /_listings/throttle?scope=S[&store=S][&times=N]
  [&retry_after=N]`): the next matching calls answered 429 naming `scope`, counted apart from
  the windows' own 429s; `add_absent` is `POST /_listings/absent?store=S&listing=L`;
* `audit()` (`GET /_listings_audit`): the arrival time of every counted call, per store, so a
  test can count the calls in any window; 429s per scope; effects and calls per listing.
"""

from __future__ import annotations

import math
import threading
import time
from collections import Counter, deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal, get_args
from urllib.parse import unquote

#: The path prefix the vendor simulator routes here.
STORES_PREFIX: Final = "/v1/stores/"
API_KEY_HEADER: Final = "X-Api-Key"
SCOPE_HEADER: Final = "X-RateLimit-Scope"
#: The marketplace's published limits: (calls, period in seconds), each a sliding window.
DEFAULT_STORE_RATE: Final = (2, 1.0)
DEFAULT_APP_RATE: Final = (40, 1.0)

LimitScope = Literal["store", "app"]
Listing = tuple[str, str]  # (store_id, listing_id), decoded


def max_in_window(arrivals: Iterable[float], window_seconds: float) -> int:
    """The most arrivals in any window `(t - window_seconds, t]` (times in any order)."""
    ordered = sorted(arrivals)
    best = start = 0
    for end, at in enumerate(ordered):
        while ordered[start] <= at - window_seconds:
            start += 1
        best = max(best, end - start + 1)
    return best


@dataclass(frozen=True, slots=True)
class MarketplaceAnswer:
    """What the marketplace answers one call."""

    status: int
    error: str | None = None
    headers: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True, slots=True)
class ListingsAudit:
    """What the marketplace saw. Listings are "store/listing"; times are the simulator's
    `time.monotonic()` readings, in arrival order, of every call its windows counted."""

    calls_total: int
    responses_by_status: dict[int, int]
    #: 429s the windows caused, by the scope each named (never an injected one).
    throttled_by_scope: dict[str, int]
    #: The arrival times of the 429s `throttle_next` injected.
    forced_at: list[float]
    effects_by_listing: dict[str, int]
    calls_by_listing: dict[str, int]
    arrivals_by_store: dict[str, list[float]]
    store_rate: tuple[int, float]
    app_rate: tuple[int, float]

    @property
    def forced_throttles(self) -> int:
        return len(self.forced_at)

    @property
    def arrivals(self) -> list[float]:
        """Every counted call's arrival, all stores together (the app's window)."""
        return sorted(t for times in self.arrivals_by_store.values() for t in times)

    def most_in_a_store_window(self) -> int:
        """The most calls any one store drew in any window of the store limit's period."""
        period = self.store_rate[1]
        return max((max_in_window(t, period) for t in self.arrivals_by_store.values()), default=0)

    def most_in_an_app_window(self) -> int:
        """The most calls of all stores in any window of the app limit's period."""
        return max_in_window(self.arrivals, self.app_rate[1])

    def to_json(self) -> dict[str, Any]:
        data = {name: getattr(self, name) for name in self.__slots__}
        data["responses_by_status"] = {str(k): v for k, v in self.responses_by_status.items()}
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ListingsAudit:
        fields = {**data}
        fields["responses_by_status"] = {
            int(k): int(v) for k, v in data["responses_by_status"].items()
        }
        fields["store_rate"] = (int(data["store_rate"][0]), float(data["store_rate"][1]))
        fields["app_rate"] = (int(data["app_rate"][0]), float(data["app_rate"][1]))
        return cls(**fields)


@dataclass(frozen=True, slots=True)
class _Forced:
    scope: LimitScope
    store: str | None  # None: any store's call
    retry_after_seconds: int


def _listing(path: str) -> Listing | None:
    """`/v1/stores/{s}/listings/{l}` -> decoded (s, l), else None."""
    parts = path.split("/")
    if len(parts) != 6 or parts[:3] != ["", "v1", "stores"] or parts[4] != "listings":
        return None
    store, listing = unquote(parts[3]), unquote(parts[5])
    return (store, listing) if store and listing else None


def _check_rate(name: str, rate: tuple[int, float]) -> tuple[int, float]:
    if rate[0] < 1 or not rate[1] > 0:
        raise ValueError(f"{name} must be (limit >= 1, period_seconds > 0)")
    return int(rate[0]), float(rate[1])


class Marketplace:
    """The marketplace's state, behind one lock (see the module docstring)."""

    def __init__(
        self,
        *,
        store_rate: tuple[int, float] = DEFAULT_STORE_RATE,
        app_rate: tuple[int, float] = DEFAULT_APP_RATE,
    ) -> None:
        self.store_rate = _check_rate("store_rate", store_rate)
        self.app_rate = _check_rate("app_rate", app_rate)
        self._lock = threading.Lock()
        self._api_keys: set[str] = set()
        self._absent: set[Listing] = set()
        self._clear()

    def _clear(self) -> None:
        self._deleted: set[Listing] = set()
        self._app_window: deque[float] = deque()
        self._store_windows: dict[str, deque[float]] = {}
        self._arrivals: dict[str, list[float]] = {}
        self._forced: list[_Forced] = []
        self._forced_at: list[float] = []
        self._responses: Counter[int] = Counter()
        self._throttled: Counter[str] = Counter()
        self._effects: Counter[Listing] = Counter()
        self._calls: Counter[Listing] = Counter()
        self._calls_total = 0

    def reset(self) -> None:
        """Forget calls, deletions and injected 429s (API keys and absent listings stay)."""
        with self._lock:
            self._clear()

    def add_api_key(self, key: str) -> None:
        with self._lock:
            self._api_keys.add(key)

    def add_absent(self, store: str, listing: str) -> None:
        """A listing that never existed: its DELETE answers 404."""
        with self._lock:
            self._absent.add((store, listing))

    def throttle_next(
        self,
        scope: LimitScope,
        *,
        store: str | None = None,
        times: int = 1,
        retry_after_seconds: int = 1,
    ) -> None:
        """Answer the next `times` authenticated calls (of `store`, if given) 429 naming
        `scope`, without effect."""
        if scope not in get_args(LimitScope):
            raise ValueError("scope must be 'store' or 'app'")
        if times < 0 or retry_after_seconds < 0:
            raise ValueError("times and retry_after_seconds must not be negative")
        with self._lock:
            self._forced.extend([_Forced(scope, store, retry_after_seconds)] * times)

    def delete(self, method: str, path: str, api_key: str | None) -> MarketplaceAnswer:
        """Decide one call to a `/v1/stores/...` path as it arrives."""
        target = _listing(path)
        with self._lock:
            now = time.monotonic()  # read under the lock so that arrivals stay in order
            self._calls_total += 1
            answer = self._decide(method, target, api_key, now)
            self._responses[answer.status] += 1
        return answer

    def _decide(
        self, method: str, target: Listing | None, api_key: str | None, now: float
    ) -> MarketplaceAnswer:
        if target is None:
            return MarketplaceAnswer(404, "no_such_route")
        if not api_key:
            return MarketplaceAnswer(401, "api_key_required")
        if api_key not in self._api_keys:
            return MarketplaceAnswer(401, "invalid_api_key")
        store = target[0]
        self._calls[target] += 1
        self._arrivals.setdefault(store, []).append(now)
        # Every authenticated call counts in both windows, a refused one included.
        app_wait = _count(self._app_window, self.app_rate, now)
        store_wait = _count(self._store_windows.setdefault(store, deque()), self.store_rate, now)
        forced = next((f for f in self._forced if f.store in (None, store)), None)
        if forced is not None:
            self._forced.remove(forced)
            self._forced_at.append(now)
            return _throttled(forced.scope, forced.retry_after_seconds, "injected_throttle")
        if app_wait is not None or store_wait is not None:
            scope: LimitScope = "app" if app_wait is not None else "store"
            wait = app_wait if app_wait is not None else store_wait
            assert wait is not None
            self._throttled[scope] += 1
            return _throttled(scope, max(1, math.ceil(wait)), "rate_limited")
        if method != "DELETE":
            return MarketplaceAnswer(405, "method_not_allowed", (("Allow", "DELETE"),))
        if target in self._absent or target in self._deleted:
            return MarketplaceAnswer(404, "listing_not_found")
        self._deleted.add(target)
        self._effects[target] += 1
        return MarketplaceAnswer(204)

    def audit(self) -> ListingsAudit:
        with self._lock:
            return ListingsAudit(
                calls_total=self._calls_total,
                responses_by_status=dict(sorted(self._responses.items())),
                throttled_by_scope=dict(self._throttled),
                forced_at=list(self._forced_at),
                effects_by_listing={f"{s}/{li}": n for (s, li), n in self._effects.items()},
                calls_by_listing={f"{s}/{li}": n for (s, li), n in self._calls.items()},
                arrivals_by_store={s: list(t) for s, t in self._arrivals.items()},
                store_rate=self.store_rate,
                app_rate=self.app_rate,
            )


def _count(window: deque[float], rate: tuple[int, float], now: float) -> float | None:
    """Count a call arriving `now` in a sliding window; the seconds until the window admits a
    call again if this one is over its limit, else None."""
    limit, period = rate
    while window and window[0] <= now - period:
        window.popleft()
    window.append(now)
    if len(window) <= limit:
        return None
    # A call is next admitted once all but limit - 1 of the calls now in the window have left.
    return window[len(window) - limit] + period - now


def _throttled(scope: LimitScope, retry_after_seconds: int, error: str) -> MarketplaceAnswer:
    headers = (("Retry-After", str(retry_after_seconds)), (SCOPE_HEADER, scope))
    return MarketplaceAnswer(429, error, headers)

"""The vendor simulator: the external cleanup API over real HTTP, for tests and the local stack.

A hand-written test double (stdlib `http.server` in a background thread), not derived from any
vendor's code. It speaks the contract `sweeper.actions.http.HttpAction` targets:

* `DELETE /v1/tenants/{tenant_id}/objects/{object_id}` with an `Idempotency-Key` header; the path
  components arrive percent-encoded and are decoded; in a rehearsal of a per-tenant host
  (`sweeper.actions.rehearsal`) also `DELETE /v1/objects/{object_id}`, the tenant being the
  first label of the host the call was for (`X-Sweeper-Original-Host`); every call that names
  its original host is counted by it (`calls_by_original_host`);
* every object exists until deleted, except those registered as absent;
* the first DELETE with key K deletes the object (204); a repeat with K replays the stored status
  without a new effect (`Idempotent-Replayed: true`); another key for a gone object gets 404; a
  call without a key gets 400; a key reused for another object gets 422;
* an optional strict sliding-window quota, per tenant or global: every arriving call counts, even a
  rejected one; a call over it gets 429 with `Retry-After` (whole seconds) and, if asked for,
  `X-RateLimit-Reset-Ms`, both naming when a call would next be admitted;
* latency, fixed plus uniform jitter or lognormal, drawn when the call arrives;
* adversarial faults: forced responses (`fail_next`), random 503, 500 and 401 rates, an auth outage
  (`set_auth_failing`), answers lost after the effect (the client times out although the deletion
  happened), and incidents (`start_incident`, `POST /_incident`) that close the API for a while;
* an audit (`audit()`, `GET /_audit`) and `POST /_reset`, none of which counts as a call; it
  holds each call's arrival and answer times, hence the calls held at once on average over a
  span and the mean latency served (`mean_in_flight`, `mean_latency_seconds`);
* the quota stated in every answer, in a dialect real vendors speak (`limit_dialect`:
  `sweeper_local.limit_dialects`); a GraphQL API charged in points (`sweeper_local.graphql_cost`);
* another client spending a share of the same quota (`other_client_share`,
  `sweeper_local.other_client`), seen in the Remaining the dialect states;
* optional further limits beside the quota, for the rate benchmark (`FurtherLimits`): an
  app-wide sliding window over every call, and a cap on calls held at once; each 429 is
  counted per limit (`quota_rejections_by_limit`), with each limit's busiest window.

Beside it, the payments provider of docs/examples/payments.toml (`Payments`, `payments_audit()`,
`GET /_payments_audit`), a contract of its own that the fault machinery above does not touch:

* `POST /oauth/token`, form-encoded `grant_type=client_credentials`, `client_id`,
  `client_secret` of a registered client (`add_client`): `{"access_token", "token_type":
  "Bearer", "expires_in"}`, the token valid `token_lifetime_seconds`; `expire_tokens()` ends
  every token issued so far at once (a token expiring mid-run); a wrong client gets 401;
* `POST /v1/reconciliations` with a bearer token and `X-Idempotency-Token`, the body
  `{"payment_id": str, "business_date": "YYYY-MM-DD"}`: 201 and one effect per token; the same
  token again answers 200 (a replay) without a second effect, for another body 422; an unknown
  or expired token 401; a missing token header 400; a malformed body 422; a payment in
  `locked` answers 409 with `Retry-After` that many times first (no effect); a payment in
  `lose_answer_once` has its first accepted answer lost (the connection closed after the
  effect). Effects are counted per (payment_id, business_date) and per idempotency token.

And the marketplace of docs/examples/listings.toml (`listings`, `listings_audit()`,
`GET /_listings_audit`; `sweeper_local.marketplace`): `DELETE /v1/stores/{store}/listings/{id}`
with an API key in `X-Api-Key`, a sliding window per store and one for the whole app, each 429
naming its limit in `X-RateLimit-Scope`. And the help desk of docs/examples/helpdesk.toml
(`helpdesk`; `sweeper_local.helpdesk`): `DELETE /api/v2/tickets/{id}.json` at a host per
account, each account's Basic login accepted at its own host only; `tls` serves it all over TLS.

And the refunds provider of docs/examples/refunds.toml (`refunds`, `GET /_refunds_audit`;
`sweeper_local.refunds`): `POST /v1/refunds` with a form body, Stripe-like.

Everything random is drawn from streams seeded by `seed`, one stream per kind, in arrival order:
the same seed and the same arrival order give the same latencies and the same faults, whatever
the threads do afterwards.

A call arriving is decided in this order, the first that applies answering it:

1. an incident open at that instant (its status, `Retry-After` until it ends);
2. the quota (429), once the call is counted in its window;
3. the auth outage (401);
4. a forced response from `fail_next`;
5. the random 401, 503 and 500 rates;
6. the request itself, after the latency; with `timeout_after_effect_rate` its answer is then lost.

And GitHub's artifacts API of docs/examples/github-artifacts.toml (`github`,
`GET /_github_audit`; `sweeper_local.github_artifacts`): `DELETE /repos/{owner}/{repo}/actions/
artifacts/{id}`, a primary limit per owner stated in `x-ratelimit-*` (epoch resets) and a
secondary limit in points, each refusing with 403.

Run it as its own process: `python -m sweeper_local.vendor --port 8900 --rate 40/1s`, the
dialect chosen with `--dialect github | shopify-graphql | ietf | x-ratelimit | sforce | plain`.
"""

from __future__ import annotations

import argparse
import bisect
import json
import logging
import math
import os
import random
import re
import secrets
import signal
import socket
import socketserver
import ssl
import subprocess
import sys
import threading
import time
import urllib.request
from collections import Counter, deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import date
from http.server import ThreadingHTTPServer
from types import TracebackType
from typing import Any, Final, Literal, Self, cast, get_args
from urllib.parse import parse_qs, unquote, urlencode

from sweeper.actions.rehearsal import ORIGINAL_HOST_HEADER
from sweeper.config import Quota
from sweeper.errors import ConfigError
from sweeper_local.github_artifacts import (
    CONTROL_PATHS,
    DEFAULT_CORE,
    DEFAULT_MUTATION_COST,
    DEFAULT_SECONDARY,
    GithubArtifacts,
    GithubAudit,
)
from sweeper_local.graphql_cost import (
    DEFAULT_COST_RANGE,
    DEFAULT_MAXIMUM,
    DEFAULT_RESTORE_RATE,
    GraphqlAudit,
    PointsApi,
    is_graphql_path,
)
from sweeper_local.helpdesk import ORIGINAL_HOST_FIELD, TICKETS_PREFIX, HelpDesk, is_account_host
from sweeper_local.http_fields import FieldsHandler
from sweeper_local.limit_dialects import (
    DIALECT_NAMES,
    Dialect,
    check_dialect,
    dialect_named,
    limit_headers,
)
from sweeper_local.marketplace import (
    API_KEY_HEADER,
    DEFAULT_APP_RATE,
    DEFAULT_STORE_RATE,
    STORES_PREFIX,
    LimitScope,
    ListingsAudit,
    Marketplace,
)
from sweeper_local.other_client import OtherClient
from sweeper_local.refunds import REFUNDS_PATH, Refunds

logger = logging.getLogger(__name__)

QuotaScope = Literal["global", "tenant"]
#: "uniform": `latency_seconds` plus U(0, jitter); "lognormal": median `latency_seconds`, `sigma`.
LatencyDistribution = Literal["uniform", "lognormal"]
#: What a lost answer looks like: the server holds the connection, or closes it unanswered.
LostAnswer = Literal["hang", "close"]
Target = tuple[str, str]  # (tenant_id, object_id), decoded

#: The bucket of a global quota, and of calls naming no tenant (a tenant id is never empty).
ONE_SCOPE: Final = ""
#: Window of `max_calls_in_window` when the simulator has no quota.
DEFAULT_WINDOW_SECONDS: Final = 1.0
#: How long a lost answer holds the connection before answering (longer than any client waits).
DEFAULT_HANG_SECONDS: Final = 30.0
#: Spread of the lognormal latency around its median.
DEFAULT_LATENCY_SIGMA: Final = 0.5
#: Statuses an incident may answer with.
INCIDENT_STATUSES: Final = frozenset({429, 503})
#: An idle keep-alive connection is closed after this long, so handler threads do not pile up.
KEEP_ALIVE_SECONDS: Final = 30.0
#: Request bodies are read and thrown away; past this size the connection is closed instead.
MAX_BODY_BYTES: Final = 64 * 1024
#: How often the serving thread looks for stop(); small so that tests stop fast.
POLL_INTERVAL_SECONDS: Final = 0.05
#: Pending connections the listening socket holds (the stdlib default of 5 drops bursts).
LISTEN_BACKLOG: Final = 128
#: Statuses that carry no body.
_BODYLESS: Final = frozenset({204, 304})
#: One seeded stream per kind of draw, so that turning one fault on does not move the others.
_FAULT_STREAMS: Final = ("auth", "unavailable", "server_error", "lost_answer")


def max_calls_in_window(arrivals: Sequence[float], window_seconds: float) -> int:
    """The most arrivals in any window `(t - window_seconds, t]`, for arrival times in order."""
    best = start = 0
    for end, at in enumerate(arrivals):
        while arrivals[start] <= at - window_seconds:
            start += 1
        best = max(best, end - start + 1)
    return best


def _is_accepted(status: int) -> bool:
    """The vendor did the work the call asked for: done now, replayed, or nothing to do."""
    return 200 <= status < 300 or status == 404


@dataclass(frozen=True, slots=True)
class VendorAudit:
    """What the vendor saw, at one instant. Keys are operation keys; nothing else is recorded.

    Times are `time.monotonic()` readings of the vendor's process. Windows are `window_seconds`
    long (the quota period) and kept per quota scope (each tenant, or all calls for a global quota):
    `max_calls_in_window` counts every call including rejected ones; `max_accepted_in_window` only
    calls answered 2xx or 404 (`accepted_total` of them), by arrival time. `quota_rejections` are
    the 429s the quota caused, apart from incidents and forced responses (`throttled_total` counts
    every 429). `arrivals` and `delays_seconds` (the latency drawn for each) are in arrival order.
    `incidents` are (start, end) pairs; `first_success_after_reopen_seconds` is, for each, the time
    from its end to the first 2xx answered after it (None while there is none).
    `answers_lost` are calls processed (with their effect) whose answer the client never got.
    `max_in_flight` is the most calls the vendor held at once (arrived, not yet answered).
    `answered` is (arrival, answer) of each call answered, in answer order: what
    `mean_in_flight` (calls held at once, averaged over time) and `mean_latency_seconds` (how
    long the vendor held a call) are read from.
    """

    calls_total: int
    calls_by_key: dict[str, int]
    effects_by_key: dict[str, int]
    effects_total: int
    responses_by_status: dict[int, int]
    throttled_total: int
    max_calls_in_window: int
    window_seconds: float
    arrivals: tuple[float, ...]
    #: "tenant/object" -> every distinct idempotency key that object was called with
    keys_by_target: dict[str, tuple[str, ...]] = field(default_factory=dict)
    max_accepted_in_window: int = 0
    accepted_total: int = 0
    quota_rejections: int = 0
    calls_during_closure: int = 0
    answers_lost: int = 0
    incidents: tuple[tuple[float, float], ...] = ()
    first_success_after_reopen_seconds: tuple[float | None, ...] = ()
    delays_seconds: tuple[float, ...] = ()
    max_in_flight: int = 0
    #: Per limit ("quota", and those of `FurtherLimits`: "app", "in_flight"): the 429s it
    #: caused, and its busiest window (calls in any window of its period; calls held at once).
    quota_rejections_by_limit: dict[str, int] = field(default_factory=dict)
    max_calls_in_window_by_limit: dict[str, int] = field(default_factory=dict)
    answered: tuple[tuple[float, float], ...] = ()
    #: Calls of any contract that named the host they were for (a rehearsal), by that host.
    calls_by_original_host: dict[str, int] = field(default_factory=dict)
    #: The other client's calls on the same quota (`other_client_share`), those the quota
    #: refused, and the least any real call left remaining of its window (None: no quota).
    other_calls: int = 0
    other_rejections: int = 0
    least_remaining: int | None = None
    #: The arrival of each call the quota refused (its `quota_rejections`), in order.
    quota_rejected_at: tuple[float, ...] = ()
    #: When a quota change scheduled by `schedule_quota` took effect (monotonic), in order.
    quota_changed_at: tuple[float, ...] = ()

    def mean_in_flight(self, start: float | None = None, end: float | None = None) -> float:
        """Calls held at once (arrived, not yet answered), averaged over `start`..`end`: the
        integral of that count over the span, divided by the span. By default the span runs
        from the first arrival to the last answer; a call still unanswered counts to `end`."""
        if start is None:
            start = self.arrivals[0] if self.arrivals else 0.0
        if end is None:
            end = max((answer for _, answer in self.answered), default=start)
        if end <= start:
            return 0.0
        # The count is arrivals so far minus answers so far; each event before `end` adds (or
        # takes away) one call from the later of its time and `start` until `end`.
        held = sum(end - max(at, start) for at in self.arrivals if at < end)
        held -= sum(end - max(answer, start) for _, answer in self.answered if answer < end)
        return held / (end - start)

    def mean_latency_seconds(self) -> float | None:
        """How long the vendor held a call, from its arrival to its answer, on average over
        the calls answered (None before the first answer)."""
        if not self.answered:
            return None
        return sum(answer - at for at, answer in self.answered) / len(self.answered)

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict (status codes become string keys)."""
        return {
            "calls_total": self.calls_total,
            "calls_by_key": self.calls_by_key,
            "effects_by_key": self.effects_by_key,
            "effects_total": self.effects_total,
            "responses_by_status": {str(k): v for k, v in self.responses_by_status.items()},
            "throttled_total": self.throttled_total,
            "max_calls_in_window": self.max_calls_in_window,
            "window_seconds": self.window_seconds,
            "arrivals": list(self.arrivals),
            "keys_by_target": {t: list(k) for t, k in self.keys_by_target.items()},
            "max_accepted_in_window": self.max_accepted_in_window,
            "accepted_total": self.accepted_total,
            "quota_rejections": self.quota_rejections,
            "calls_during_closure": self.calls_during_closure,
            "answers_lost": self.answers_lost,
            "incidents": [list(span) for span in self.incidents],
            "first_success_after_reopen_seconds": list(self.first_success_after_reopen_seconds),
            "delays_seconds": list(self.delays_seconds),
            "max_in_flight": self.max_in_flight,
            "quota_rejections_by_limit": self.quota_rejections_by_limit,
            "max_calls_in_window_by_limit": self.max_calls_in_window_by_limit,
            "answered": [list(pair) for pair in self.answered],
            "calls_by_original_host": self.calls_by_original_host,
            "other_calls": self.other_calls,
            "other_rejections": self.other_rejections,
            "least_remaining": self.least_remaining,
            "quota_rejected_at": list(self.quota_rejected_at),
            "quota_changed_at": list(self.quota_changed_at),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> VendorAudit:
        """Read what `GET /_audit` returns (the inverse of `to_json`; later fields are optional)."""
        return cls(
            calls_total=int(data["calls_total"]),
            calls_by_key={str(k): int(v) for k, v in data["calls_by_key"].items()},
            effects_by_key={str(k): int(v) for k, v in data["effects_by_key"].items()},
            effects_total=int(data["effects_total"]),
            responses_by_status={int(k): int(v) for k, v in data["responses_by_status"].items()},
            throttled_total=int(data["throttled_total"]),
            max_calls_in_window=int(data["max_calls_in_window"]),
            window_seconds=float(data["window_seconds"]),
            arrivals=tuple(float(t) for t in data["arrivals"]),
            keys_by_target={
                str(t): tuple(str(k) for k in keys)
                for t, keys in data.get("keys_by_target", {}).items()
            },
            max_accepted_in_window=int(data.get("max_accepted_in_window", 0)),
            accepted_total=int(data.get("accepted_total", 0)),
            quota_rejections=int(data.get("quota_rejections", 0)),
            calls_during_closure=int(data.get("calls_during_closure", 0)),
            answers_lost=int(data.get("answers_lost", 0)),
            incidents=tuple((float(start), float(end)) for start, end in data.get("incidents", ())),
            first_success_after_reopen_seconds=tuple(
                None if s is None else float(s)
                for s in data.get("first_success_after_reopen_seconds", ())
            ),
            delays_seconds=tuple(float(d) for d in data.get("delays_seconds", ())),
            max_in_flight=int(data.get("max_in_flight", 0)),
            quota_rejections_by_limit={
                str(k): int(v) for k, v in data.get("quota_rejections_by_limit", {}).items()
            },
            max_calls_in_window_by_limit={
                str(k): int(v) for k, v in data.get("max_calls_in_window_by_limit", {}).items()
            },
            answered=tuple((float(at), float(answer)) for at, answer in data.get("answered", ())),
            calls_by_original_host={
                str(k): int(v) for k, v in data.get("calls_by_original_host", {}).items()
            },
            other_calls=int(data.get("other_calls", 0)),
            other_rejections=int(data.get("other_rejections", 0)),
            least_remaining=(
                None if data.get("least_remaining") is None else int(data["least_remaining"])
            ),
            quota_rejected_at=tuple(float(t) for t in data.get("quota_rejected_at", ())),
            quota_changed_at=tuple(float(t) for t in data.get("quota_changed_at", ())),
        )


@dataclass(frozen=True, slots=True)
class ForcedResponse:
    """One response `fail_next` queued: a status, optionally with a Retry-After value."""

    status: int
    retry_after: str | None = None


@dataclass(slots=True)
class Faults:
    """Injected failures. Each kind is a field; only a lost answer lets the effect happen.

    They apply to calls no incident closed and the quota admitted, before the request itself is
    looked at. The auth outage wins over a forced response, which wins over the random rates.
    """

    error_rate: float = 0.0  # 503 without Retry-After
    server_error_rate: float = 0.0  # 500
    auth_failure_rate: float = 0.0  # 401
    timeout_after_effect_rate: float = 0.0  # processed, then the answer is lost
    auth_failing: bool = False  # every call 401
    forced: deque[ForcedResponse] = field(default_factory=deque)


@dataclass(frozen=True, slots=True)
class FurtherLimits:
    """Limits the simulator enforces beside its quota (the rate benchmark's several limits).

    `app`: `(limit, period_seconds)`, a sliding window over every call, whatever its tenant;
    `in_flight`: at most this many calls held at once (arrived, not yet answered). A call over
    either is answered 429 at once, without effect, like a call over the quota; each limit
    counts every arriving call, refused or not.
    """

    app: tuple[int, float] | None = None
    in_flight: int | None = None


@dataclass(frozen=True, slots=True)
class _Incident:
    start: float
    end: float
    status: int
    retry_after_seconds: int | None  # None: the whole seconds left until `end`


@dataclass(frozen=True, slots=True)
class _Reply:
    status: int
    error: str | None = None  # short machine code for the JSON body
    headers: tuple[tuple[str, str], ...] = ()
    body: bytes | None = None  # replaces the error body (the audit)
    lost: bool = False  # decided, but the client is not to get it

    def payload(self) -> bytes | None:
        if self.status in _BODYLESS:
            return None
        if self.body is not None:
            return self.body
        return json.dumps({"error": self.error or "error", "status": self.status}).encode()


@dataclass(frozen=True, slots=True)
class _Arrival:
    """A call as recorded when it arrived, before the simulated latency."""

    method: str
    target: Target | None
    key: str | None
    scope: str
    at: float
    delay_seconds: float
    early: _Reply | None  # the answer if decided on arrival (incident, quota or fault)
    quota_rejected: bool
    lose_answer: bool
    limit_headers: tuple[tuple[str, str], ...] = ()  # the quota as the dialect states it


@dataclass(frozen=True, slots=True)
class _Completed:
    """What a key's first complete answer was, to replay."""

    target: Target
    status: int
    error: str | None


def _parse_target(path: str, original_host: str | None = None) -> Target | None:
    """`/v1/tenants/{t}/objects/{o}` with percent-encoded parts -> decoded (t, o); with the
    host a rehearsed call was for, `/v1/objects/{o}` -> (the host's first label, o)."""
    parts = path.split("/")
    if original_host and len(parts) == 4 and parts[:3] == ["", "v1", "objects"]:
        tenant_id, object_id = original_host.partition(".")[0], unquote(parts[3])
        return (tenant_id, object_id) if object_id else None
    if len(parts) != 6 or parts[:3] != ["", "v1", "tenants"] or parts[4] != "objects":
        return None
    tenant_id, object_id = unquote(parts[3]), unquote(parts[5])
    if not tenant_id or not object_id:
        return None
    return tenant_id, object_id


def _check_rate(name: str, value: float) -> float:
    if not 0.0 <= value <= 1.0:
        raise ValueError(f"{name} must be within [0, 1]")
    return value


def _check_incident(
    duration_seconds: float, retry_after_seconds: int | None, status: int, starts_in_seconds: float
) -> None:
    if not duration_seconds > 0:
        raise ValueError("an incident's duration must be positive")
    if retry_after_seconds is not None and retry_after_seconds < 0:
        raise ValueError("retry_after_seconds must not be negative")
    if status not in INCIDENT_STATUSES:
        raise ValueError("an incident answers 429 or 503")
    if starts_in_seconds < 0:
        raise ValueError("starts_in_seconds must not be negative")


class _VendorState:
    """Everything the simulator knows, behind one lock; the HTTP layer only carries calls in."""

    def __init__(
        self,
        *,
        quota: tuple[int, float] | None,
        quota_scope: QuotaScope,
        retry_after_ms_header: bool,
        latency_seconds: float,
        latency_jitter_seconds: float,
        latency_distribution: LatencyDistribution,
        latency_sigma: float,
        faults: Faults,
        lost_answer: LostAnswer,
        hang_seconds: float,
        absent: frozenset[Target],
        seed: int,
        further: FurtherLimits | None = None,
        limit_dialect: Dialect = "plain",
        other_client_share: float = 0.0,
    ) -> None:
        self.limit_dialect = limit_dialect
        self._other_share = OtherClient(other_client_share).share  # checked
        self._further = further or FurtherLimits()
        self._quota = quota
        self._quota_scope = quota_scope
        self._retry_after_ms_header = retry_after_ms_header
        self._latency_seconds = latency_seconds
        self._jitter_seconds = latency_jitter_seconds
        self._distribution = latency_distribution
        self._sigma = latency_sigma
        self._initial_faults = faults
        self.lost_answer = lost_answer
        self.hang_seconds = hang_seconds
        self._absent = absent
        self._seed = seed
        self._lock = threading.Lock()
        self._clear()

    def _clear(self) -> None:
        # String seeds hash the same in every process (unlike hash()), so streams are reproducible.
        self._latency_rng = random.Random(f"{self._seed}/latency")
        self._fault_rngs = tuple(random.Random(f"{self._seed}/{name}") for name in _FAULT_STREAMS)
        self._faults = replace(self._initial_faults, forced=deque())
        self._incidents: list[_Incident] = []
        self._deleted: set[Target] = set()
        self._completed: dict[str, _Completed] = {}
        self._windows: dict[str, deque[float]] = {}
        self._arrivals: list[float] = []
        self._delays: list[float] = []
        self._arrivals_by_scope: dict[str, list[float]] = {}
        self._accepted_by_scope: dict[str, list[float]] = {}
        self._success_times: list[float] = []  # answer times of 2xx, in order
        self._answered: list[tuple[float, float]] = []  # (arrival, answer) of every answer
        self._calls_by_key: Counter[str] = Counter()
        self._keys_by_target: dict[Target, dict[str, None]] = {}
        self._effects_by_key: Counter[str] = Counter()
        self._responses: Counter[int] = Counter()
        self._quota_rejections = 0
        self._calls_during_closure = 0
        self._answers_lost = 0
        self._in_flight = 0
        self._max_in_flight = 0
        self._app_window: deque[float] = deque()
        self._rejections_by_limit: Counter[str] = Counter()
        self._calls_by_original_host: Counter[str] = Counter()
        self._other = OtherClient(self._other_share)
        self._quota_rejected_at: list[float] = []
        self._quota_changes: list[tuple[float, tuple[int, float]]] = []  # (at, quota), pending
        self._quota_changed_at: list[float] = []

    def reset(self) -> None:
        """Back to the state the simulator was built with."""
        with self._lock:
            self._clear()

    def fail_next(self, n: int, response: ForcedResponse) -> None:
        with self._lock:
            self._faults.forced.extend([response] * n)

    def set_fault_rates(self, rates: Mapping[str, float]) -> None:
        with self._lock:
            for name, value in rates.items():
                setattr(self._faults, name, value)

    def set_auth_failing(self, failing: bool) -> None:
        with self._lock:
            self._faults.auth_failing = failing

    def set_quota(self, quota: tuple[int, float]) -> None:
        with self._lock:
            self._quota = quota

    def schedule_quota(self, quota: tuple[int, float], starts_in_seconds: float) -> float:
        """The quota becomes `quota` for calls arriving from `starts_in_seconds` on (a vendor
        that lowers or raises its limit mid-run); the monotonic time it takes effect."""
        with self._lock:
            at = time.monotonic() + starts_in_seconds
            self._quota_changes.append((at, quota))
            self._quota_changes.sort()
        return at

    def _apply_quota_changes(self, now: float) -> None:
        while self._quota_changes and self._quota_changes[0][0] <= now:
            at, self._quota = self._quota_changes.pop(0)
            self._quota_changed_at.append(at)

    def start_incident(
        self,
        duration_seconds: float,
        retry_after_seconds: int | None,
        status: int,
        starts_in_seconds: float,
    ) -> tuple[float, float]:
        with self._lock:
            start = time.monotonic() + starts_in_seconds
            incident = _Incident(start, start + duration_seconds, status, retry_after_seconds)
            self._incidents.append(incident)
        return incident.start, incident.end

    def note_original_host(self, host: str) -> None:
        """Count a call (of any contract) that named the host it was for."""
        with self._lock:
            self._calls_by_original_host[host] += 1

    def arrive(
        self, method: str, path: str, key: str | None, original_host: str | None = None
    ) -> _Arrival:
        """Record a call as it arrives and decide all but the request itself, before latency."""
        target = _parse_target(path, original_host)
        scope = target[0] if target is not None and self._quota_scope == "tenant" else ONE_SCOPE
        with self._lock:
            now = time.monotonic()  # read under the lock so that arrivals stay in order
            self._arrivals.append(now)
            self._in_flight += 1
            self._max_in_flight = max(self._max_in_flight, self._in_flight)
            self._arrivals_by_scope.setdefault(scope, []).append(now)
            if key is not None:
                self._calls_by_key[key] += 1
                if target is not None:
                    self._keys_by_target.setdefault(target, {})[key] = None
            delay = self._draw_latency()
            self._delays.append(delay)
            # One draw per stream per call, used or not: call n meets the same luck every run.
            auth, unavailable, server_error, lost = (rng.random() for rng in self._fault_rngs)
            early = self._closure(now)
            if early is not None:
                self._calls_during_closure += 1
            self._apply_quota_changes(now)
            over_quota = self._admit(scope, now)  # every arriving call counts, closed or not
            stated = self._stated(scope, now)
            over_quota = self._admit_further(over_quota, early is not None, now)
            quota_rejected = early is None and over_quota is not None
            if early is None:
                early = over_quota
            if early is None:
                early = self._injected(auth, unavailable, server_error)
            lose_answer = early is None and lost < self._faults.timeout_after_effect_rate
        return _Arrival(
            method=method,
            target=target,
            key=key,
            scope=scope,
            at=now,
            delay_seconds=delay,
            early=early,
            quota_rejected=quota_rejected,
            lose_answer=lose_answer,
            limit_headers=stated,
        )

    def _stated(self, scope: str, now: float) -> tuple[tuple[str, str], ...]:
        """The quota's headers in the simulator's dialect, as this call left its window."""
        if self._quota is None or self.limit_dialect == "plain":
            return ()
        limit, period = self._quota
        window = self._windows[scope]
        next_admitted = window[max(0, len(window) - limit)] + period
        return limit_headers(
            self.limit_dialect,
            limit=limit,
            period_seconds=period,
            in_window=len(window),
            reset_seconds=next_admitted - now,
            now_epoch=time.time(),
        )

    def _draw_latency(self) -> float:
        if self._distribution == "lognormal":
            if self._latency_seconds <= 0:
                return 0.0
            return self._latency_rng.lognormvariate(math.log(self._latency_seconds), self._sigma)
        delay = self._latency_seconds
        if self._jitter_seconds > 0:
            delay += self._latency_rng.uniform(0.0, self._jitter_seconds)
        return delay

    def _closure(self, now: float) -> _Reply | None:
        """The answer of an incident open at `now`, if any (the one lasting longest wins)."""
        open_ = [i for i in self._incidents if i.start <= now < i.end]
        if not open_:
            return None
        incident = max(open_, key=lambda i: i.end)
        retry_after = incident.retry_after_seconds
        if retry_after is None:
            retry_after = max(1, math.ceil(incident.end - now))
        return _Reply(incident.status, "incident", (("Retry-After", str(retry_after)),))

    def _admit(self, scope: str, now: float) -> _Reply | None:
        """Count the call in its scope's window; the 429 to answer if it is over quota."""
        if self._quota is None:
            return None
        limit, period = self._quota
        window = self._windows.setdefault(scope, deque())
        self._other.spend(scope, window, limit, period, now)
        while window and window[0] <= now - period:
            window.popleft()
        window.append(now)
        self._other.called(limit - len(window))
        if len(window) <= limit:
            return None
        # Rejected calls count too, this one included: a call is next admitted once all but
        # limit - 1 of the calls now in the window have left it (if none is made in between).
        wait = window[len(window) - limit] + period - now
        headers = [("Retry-After", str(max(1, math.ceil(wait))))]
        if self._retry_after_ms_header:
            headers.append(("X-RateLimit-Reset-Ms", str(max(1, math.ceil(wait * 1000)))))
        return _Reply(429, "rate_limited", tuple(headers))

    def _admit_further(self, over_quota: _Reply | None, closed: bool, now: float) -> _Reply | None:
        """Count the call against the quota's verdict and the further limits; the first 429
        due (the quota's, then the app window's, then the in-flight cap's), each limit's own
        refusal counted under its name unless an incident answers the call."""
        refused = {"quota": over_quota} if over_quota is not None else {}
        app, cap = self._further.app, self._further.in_flight
        if app is not None:
            limit, period = app
            window = self._app_window
            while window and window[0] <= now - period:
                window.popleft()
            window.append(now)
            if len(window) > limit:
                wait = max(0.001, window[len(window) - limit] + period - now)
                refused["app"] = _Reply(429, "rate_limited", self._retry_headers(wait))
        if cap is not None and self._in_flight > cap:
            refused["in_flight"] = _Reply(429, "too_many_in_flight", self._retry_headers(0.05))
        if not closed:
            self._rejections_by_limit.update(refused.keys())
        return next(iter(refused.values()), None)

    def _retry_headers(self, wait: float) -> tuple[tuple[str, str], ...]:
        headers = [("Retry-After", str(max(1, math.ceil(wait))))]
        if self._retry_after_ms_header:
            headers.append(("X-RateLimit-Reset-Ms", str(max(1, math.ceil(wait * 1000)))))
        return tuple(headers)

    def _injected(self, auth: float, unavailable: float, server_error: float) -> _Reply | None:
        faults = self._faults
        if faults.auth_failing:
            return _Reply(401, "unauthorized", (("WWW-Authenticate", "Bearer"),))
        if faults.forced:
            forced = faults.forced.popleft()
            headers = () if forced.retry_after is None else (("Retry-After", forced.retry_after),)
            return _Reply(forced.status, "injected_fault", headers)
        if auth < faults.auth_failure_rate:
            return _Reply(401, "unauthorized", (("WWW-Authenticate", "Bearer"),))
        if unavailable < faults.error_rate:
            return _Reply(503, "injected_unavailable")
        if server_error < faults.server_error_rate:
            return _Reply(500, "injected_server_error")
        return None

    def answer(self, arrival: _Arrival) -> _Reply:
        """Decide the response (and the effect, if any) once the latency has passed."""
        with self._lock:
            now = time.monotonic()
            self._in_flight -= 1
            self._answered.append((arrival.at, now))
            reply = arrival.early if arrival.early is not None else self._decide(arrival)
            if arrival.limit_headers:
                reply = replace(reply, headers=reply.headers + arrival.limit_headers)
            self._responses[reply.status] += 1
            if arrival.quota_rejected:
                self._quota_rejections += 1
                self._quota_rejected_at.append(arrival.at)
            if _is_accepted(reply.status):
                self._accepted_by_scope.setdefault(arrival.scope, []).append(arrival.at)
            if arrival.lose_answer:
                self._answers_lost += 1
                return replace(reply, lost=True)
            if 200 <= reply.status < 300:
                self._success_times.append(now)
        return reply

    def _decide(self, call: _Arrival) -> _Reply:
        if call.target is None:
            return _Reply(404, "no_such_route")
        if call.method != "DELETE":
            return _Reply(405, "method_not_allowed", (("Allow", "DELETE"),))
        if not call.key:
            return _Reply(400, "idempotency_key_required")
        done = self._completed.get(call.key)
        if done is not None:
            if done.target != call.target:
                return _Reply(422, "idempotency_key_reused")
            return _Reply(done.status, done.error, (("Idempotent-Replayed", "true"),))
        if call.target in self._absent or call.target in self._deleted:
            reply = _Reply(404, "object_not_found")
        else:
            self._deleted.add(call.target)
            self._effects_by_key[call.key] += 1
            reply = _Reply(204)
        self._completed[call.key] = _Completed(call.target, reply.status, reply.error)
        return reply

    def _first_success_after(self, end: float) -> float | None:
        i = bisect.bisect_left(self._success_times, end)
        return self._success_times[i] - end if i < len(self._success_times) else None

    def audit(self) -> VendorAudit:
        with self._lock:
            window = self._quota[1] if self._quota is not None else DEFAULT_WINDOW_SECONDS
            peak = max(
                (max_calls_in_window(t, window) for t in self._arrivals_by_scope.values()),
                default=0,
            )
            # Answers come in any order after their latency; windows go by arrival.
            accepted_peak = max(
                (max_calls_in_window(sorted(t), window) for t in self._accepted_by_scope.values()),
                default=0,
            )
            return VendorAudit(
                calls_total=len(self._arrivals),
                calls_by_key=dict(self._calls_by_key),
                effects_by_key=dict(self._effects_by_key),
                effects_total=sum(self._effects_by_key.values()),
                responses_by_status=dict(sorted(self._responses.items())),
                throttled_total=self._responses[429],
                max_calls_in_window=peak,
                window_seconds=window,
                arrivals=tuple(self._arrivals),
                keys_by_target={
                    f"{tenant}/{obj}": tuple(keys)
                    for (tenant, obj), keys in self._keys_by_target.items()
                },
                max_accepted_in_window=accepted_peak,
                accepted_total=sum(len(t) for t in self._accepted_by_scope.values()),
                quota_rejections=self._quota_rejections,
                calls_during_closure=self._calls_during_closure,
                answers_lost=self._answers_lost,
                incidents=tuple((i.start, i.end) for i in self._incidents),
                first_success_after_reopen_seconds=tuple(
                    self._first_success_after(i.end) for i in self._incidents
                ),
                delays_seconds=tuple(self._delays),
                max_in_flight=self._max_in_flight,
                answered=tuple(self._answered),
                calls_by_original_host=dict(self._calls_by_original_host),
                other_calls=self._other.calls,
                other_rejections=self._other.rejections,
                least_remaining=self._other.least_remaining,
                quota_rejected_at=tuple(sorted(self._quota_rejected_at)),
                quota_changed_at=tuple(self._quota_changed_at),
                **self._by_limit(peak),
            )

    def _by_limit(self, quota_peak: int) -> dict[str, dict[str, int]]:
        """The audit's per-limit figures (under the lock): 429s and busiest windows."""
        peaks: dict[str, int] = {}
        if self._quota is not None:
            peaks["quota"] = quota_peak
        if self._further.app is not None:
            peaks["app"] = max_calls_in_window(self._arrivals, self._further.app[1])
        if self._further.in_flight is not None:
            peaks["in_flight"] = self._max_in_flight
        return {
            "quota_rejections_by_limit": {name: self._rejections_by_limit[name] for name in peaks},
            "max_calls_in_window_by_limit": peaks,
        }


#: The payments provider's paths (docs/examples/payments.toml).
TOKEN_PATH: Final = "/oauth/token"  # noqa: S105 - a path, not a password
RECONCILIATIONS_PATH: Final = "/v1/reconciliations"
PAYMENTS_IDEMPOTENCY_HEADER: Final = "X-Idempotency-Token"
#: What the token endpoint says its tokens live, unless told otherwise.
DEFAULT_TOKEN_LIFETIME_SECONDS: Final = 300.0
#: The Retry-After of a locked payment's 409, unless told otherwise.
DEFAULT_LOCK_RETRY_AFTER_SECONDS: Final = 1
_BUSINESS_DATE_RE: Final = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")


@dataclass(frozen=True, slots=True)
class PaymentsAudit:
    """What the payments provider saw. Pairs are "payment_id/business_date"."""

    tokens_issued: int
    token_refusals: int
    calls_total: int
    responses_by_status: dict[int, int]
    #: Calls refused 401 because their (known) token had expired, in all and by idempotency token.
    expired_token_calls: int
    expired_token_calls_by_key: dict[str, int]
    effects_by_pair: dict[str, int]
    effects_by_token: dict[str, int]
    effects_total: int
    replays: int
    locked_answers: int
    answers_lost: int

    def to_json(self) -> dict[str, Any]:
        data = {name: getattr(self, name) for name in self.__slots__}
        data["responses_by_status"] = {str(k): v for k, v in self.responses_by_status.items()}
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> PaymentsAudit:
        fields = {**data}
        fields["responses_by_status"] = {
            int(k): int(v) for k, v in data["responses_by_status"].items()
        }
        return cls(**fields)


def _reconciliation(body: bytes) -> tuple[str, str] | None:
    """(payment_id, business_date) of a well-formed body, else None."""
    try:
        value = json.loads(body)
    except ValueError:
        return None
    if not isinstance(value, dict) or set(value) != {"payment_id", "business_date"}:
        return None
    payment_id, business_date = value["payment_id"], value["business_date"]
    if not isinstance(payment_id, str) or not payment_id or not isinstance(business_date, str):
        return None
    if not _BUSINESS_DATE_RE.fullmatch(business_date):
        return None
    try:
        date.fromisoformat(business_date)
    except ValueError:
        return None  # 2026-02-30
    return payment_id, business_date


class Payments:
    """The payments provider's state, behind one lock (see the module docstring)."""

    def __init__(self, *, token_lifetime_seconds: float = DEFAULT_TOKEN_LIFETIME_SECONDS) -> None:
        if not token_lifetime_seconds > 0:
            raise ValueError("token_lifetime_seconds must be positive")
        self.token_lifetime_seconds = token_lifetime_seconds
        self.lock_retry_after_seconds = DEFAULT_LOCK_RETRY_AFTER_SECONDS
        self._lock = threading.Lock()
        self._clients: dict[str, str] = {}
        self._clear()

    def _clear(self) -> None:
        self._tokens: dict[str, float] = {}  # token -> monotonic expiry
        self._locked: Counter[str] = Counter()
        self._lose: set[str] = set()
        self._done: dict[str, tuple[str, str]] = {}  # idempotency token -> pair
        self._effects: Counter[tuple[str, str]] = Counter()
        self._effects_by_token: Counter[str] = Counter()
        self._expired_by_key: Counter[str] = Counter()
        self._responses: Counter[int] = Counter()
        self._issued = self._refusals = self._calls = self._expired_calls = 0
        self._replays = self._locked_answers = self._lost = 0

    def reset(self) -> None:
        """Forget tokens, locks and effects (the registered clients stay)."""
        with self._lock:
            self._clear()

    def add_client(self, client_id: str, client_secret: str) -> None:
        with self._lock:
            self._clients[client_id] = client_secret

    def lock(self, payment_id: str, times: int, *, retry_after_seconds: int | None = None) -> None:
        """Answer the next `times` calls for `payment_id` 409 (locked) with Retry-After."""
        if times < 0:
            raise ValueError("times must not be negative")
        with self._lock:
            self._locked[payment_id] += times
            if retry_after_seconds is not None:
                self.lock_retry_after_seconds = retry_after_seconds

    def lose_answer_once(self, payment_id: str) -> None:
        """The next accepted call for `payment_id` takes effect, then loses its answer."""
        with self._lock:
            self._lose.add(payment_id)

    def expire_tokens(self) -> None:
        """Every token issued so far expires now (a token expiring mid-run)."""
        with self._lock:
            now = time.monotonic()
            self._tokens = {token: min(at, now) for token, at in self._tokens.items()}

    def issue_token(self, body: bytes) -> _Reply:
        form = {name: values[-1] for name, values in parse_qs(body.decode("latin-1")).items()}
        with self._lock:
            client_id, client_secret = form.get("client_id"), form.get("client_secret")
            if form.get("grant_type") != "client_credentials":
                self._refusals += 1
                return _Reply(400, "unsupported_grant_type")
            if client_id is None or self._clients.get(client_id) != client_secret:
                self._refusals += 1
                return _Reply(401, "invalid_client")
            token = secrets.token_urlsafe(24)
            self._tokens[token] = time.monotonic() + self.token_lifetime_seconds
            self._issued += 1
        answer = {
            "access_token": token,
            "token_type": "Bearer",
            "expires_in": self.token_lifetime_seconds,
        }
        return _Reply(200, body=json.dumps(answer).encode())

    def reconcile(self, authorization: str | None, key: str | None, body: bytes) -> _Reply:
        with self._lock:
            self._calls += 1
            reply = self._decide(authorization, key, body)
            self._responses[reply.status] += 1
            if reply.lost:
                self._lost += 1
        return reply

    def _decide(self, authorization: str | None, key: str | None, body: bytes) -> _Reply:
        scheme, _, token = (authorization or "").partition(" ")
        expires_at = self._tokens.get(token) if scheme.lower() == "bearer" else None
        challenge = (("WWW-Authenticate", 'Bearer error="invalid_token"'),)
        if expires_at is None:
            return _Reply(401, "invalid_token", challenge)
        if time.monotonic() >= expires_at:
            self._expired_calls += 1
            self._expired_by_key[key or ""] += 1
            return _Reply(401, "token_expired", challenge)
        if not key:
            return _Reply(400, "idempotency_token_required")
        pair = _reconciliation(body)
        if pair is None:
            return _Reply(422, "malformed_body")
        done = self._done.get(key)
        if done is not None:
            if done != pair:
                return _Reply(422, "idempotency_token_reused")
            self._replays += 1
            return _Reply(200, body=_reconciled(pair), headers=(("Idempotent-Replayed", "true"),))
        payment_id = pair[0]
        if self._locked[payment_id] > 0:
            self._locked[payment_id] -= 1
            self._locked_answers += 1
            retry_after = (("Retry-After", str(self.lock_retry_after_seconds)),)
            return _Reply(409, "payment_locked", retry_after)
        self._done[key] = pair
        self._effects[pair] += 1
        self._effects_by_token[key] += 1
        lost = payment_id in self._lose
        self._lose.discard(payment_id)
        return _Reply(201, body=_reconciled(pair), lost=lost)

    def audit(self) -> PaymentsAudit:
        with self._lock:
            return PaymentsAudit(
                tokens_issued=self._issued,
                token_refusals=self._refusals,
                calls_total=self._calls,
                responses_by_status=dict(sorted(self._responses.items())),
                expired_token_calls=self._expired_calls,
                expired_token_calls_by_key=dict(self._expired_by_key),
                effects_by_pair={f"{p}/{d}": n for (p, d), n in self._effects.items()},
                effects_by_token=dict(self._effects_by_token),
                effects_total=sum(self._effects.values()),
                replays=self._replays,
                locked_answers=self._locked_answers,
                answers_lost=self._lost,
            )


def _reconciled(pair: tuple[str, str]) -> bytes:
    return json.dumps({"payment_id": pair[0], "business_date": pair[1]}).encode()


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = LISTEN_BACKLOG

    def __init__(
        self,
        address: tuple[str, int],
        state: _VendorState,
        stopping: threading.Event,
        payments: Payments,
        listings: Marketplace,
        refunds: Refunds,
        helpdesk: HelpDesk,
        graphql: PointsApi,
        github: GithubArtifacts,
    ) -> None:
        self.graphql = graphql
        self.github = github
        self.refunds = refunds
        self.state = state
        self.payments = payments
        self.listings = listings
        self.helpdesk = helpdesk
        self.stopping = stopping
        super().__init__(address, _Handler)

    def server_bind(self) -> None:
        # HTTPServer.server_bind looks up the host's FQDN, which can stall where DNS is missing.
        socketserver.TCPServer.server_bind(self)
        host, port = self.socket.getsockname()[:2]
        self.server_name = str(host)
        self.server_port = int(port)

    def handle_error(self, request: Any, client_address: Any) -> None:
        if isinstance(sys.exception(), ConnectionError):
            # The client gave up (a read timeout): expected, and the effect may still have happened.
            logger.debug("vendor: client closed the connection before the answer")
            return
        logger.exception("vendor: handler failed")


def _incident_from_query(state: _VendorState, query: str) -> _Reply:
    """`POST /_incident?seconds=S[&status=429|503][&retry_after=N][&starts_in=S]`."""
    params = {name: values[-1] for name, values in parse_qs(query).items()}
    try:
        retry_after = params.get("retry_after")
        args = (
            float(params["seconds"]),
            None if retry_after is None else int(retry_after),
            int(params.get("status", "429")),
            float(params.get("starts_in", "0")),
        )
        _check_incident(*args)
    except (KeyError, ValueError):
        return _Reply(400, "bad_incident")
    start, end = state.start_incident(*args)
    return _Reply(200, body=json.dumps({"start": start, "end": end}).encode())


def _quota_from_query(state: _VendorState, query: str) -> _Reply:
    """`POST /_quota?limit=N&period=S[&starts_in=S]`: the quota changes then (`{"at": t}`)."""
    params = _query(query)
    try:
        quota = (int(params["limit"]), float(params["period"]))
        starts_in = float(params.get("starts_in", "0"))
        if quota[0] < 1 or not 0 < quota[1] < math.inf or not 0 <= starts_in < math.inf:
            raise ValueError(query)
        check_dialect(state.limit_dialect, quota[1])
    except (KeyError, ValueError):
        return _Reply(400, "bad_quota")
    at = state.schedule_quota(quota, starts_in)
    return _Reply(200, body=json.dumps({"at": at}).encode())


def _query(query: str) -> dict[str, str]:
    return {name: values[-1] for name, values in parse_qs(query).items()}


def _listings_throttle(listings: Marketplace, query: str) -> _Reply:
    """`POST /_listings/throttle?scope=store|app[&store=S][&times=N][&retry_after=N]`."""
    params = _query(query)
    try:
        listings.throttle_next(
            cast(LimitScope, params["scope"]),
            store=params.get("store"),
            times=int(params.get("times", "1")),
            retry_after_seconds=int(params.get("retry_after", "1")),
        )
    except (KeyError, ValueError):
        return _Reply(400, "bad_throttle")
    return _Reply(204)


def _listings_absent(listings: Marketplace, query: str) -> _Reply:
    """`POST /_listings/absent?store=S&listing=L`: a listing that never existed."""
    params = _query(query)
    if not params.get("store") or not params.get("listing"):
        return _Reply(400, "bad_listing")
    listings.add_absent(params["store"], params["listing"])
    return _Reply(204)


#: The marketplace's controls, for a simulator running as its own process.
_LISTINGS_CONTROLS: Final = {
    "/_listings/throttle": _listings_throttle,
    "/_listings/absent": _listings_absent,
}


class _Handler(FieldsHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as a real API and urllib3's pool expect
    timeout = KEEP_ALIVE_SECONDS
    # Headers and body leave in two writes; with Nagle on, the body waits for the client's
    # delayed ACK (about 40 ms), which would slow every answer that has a body, 429s included.
    disable_nagle_algorithm = True
    server_version = "sweeper-vendor-simulator"
    sys_version = ""

    def do_DELETE(self) -> None:
        self._dispatch()

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE

    def _dispatch(self) -> None:
        server = cast(_Server, self.server)
        path, _, query = self.path.partition("?")
        original_host = self.fields.get(ORIGINAL_HOST_HEADER.lower())
        if original_host is not None:
            server.state.note_original_host(original_host)
        if self.command == "POST" and path in (TOKEN_PATH, RECONCILIATIONS_PATH):
            self._payments(server.payments, path)
            return
        if self.command == "POST" and path == REFUNDS_PATH:
            self._refunds(server)
            return
        if self.command == "POST" and is_graphql_path(path):
            # A store's bucket: the first label of its host (`{shop}.myshopify.com`)
            self._graphql(server.graphql, (original_host or "").partition(".")[0])
            return
        self._discard_body()
        desk_host = self.fields.get(ORIGINAL_HOST_FIELD) or self.fields.get("host")
        if path.startswith(TICKETS_PREFIX) and is_account_host(desk_host):
            desk = server.helpdesk.delete(
                self.command, path, desk_host, self.fields.get("authorization")
            )
            self._send(_Reply(desk.status, desk.error, desk.headers))
            return
        if path.startswith("/repos/"):
            github = server.github.delete(self.command, path, self.fields.get("authorization"))
            logger.debug("vendor %s artifact -> %d", self.command, github.status)
            self._send(_Reply(github.status, headers=github.headers, body=github.body))
            return
        if path.startswith(STORES_PREFIX):
            answer = server.listings.delete(
                self.command, path, self.fields.get(API_KEY_HEADER.lower())
            )
            logger.debug("vendor %s listing -> %d", self.command, answer.status)
            self._send(_Reply(answer.status, answer.error, answer.headers))
            return
        if path == "/_audit" and self.command == "GET":
            body = json.dumps(server.state.audit().to_json()).encode()
            reply = _Reply(200, body=body)
        elif path == "/_reset" and self.command == "POST":
            server.state.reset()
            server.payments.reset()
            server.listings.reset()
            server.refunds.reset()
            server.helpdesk.reset()
            server.graphql.reset()
            server.github.reset()
            reply = _Reply(204)
        elif path == "/_payments_audit" and self.command == "GET":
            reply = _Reply(200, body=json.dumps(server.payments.audit().to_json()).encode())
        elif path == "/_listings_audit" and self.command == "GET":
            reply = _Reply(200, body=json.dumps(server.listings.audit().to_json()).encode())
        elif path == "/_refunds_audit" and self.command == "GET":
            reply = _Reply(200, body=json.dumps(server.refunds.audit().to_json()).encode())
        elif path == "/_github_audit" and self.command == "GET":
            reply = _Reply(200, body=json.dumps(server.github.audit().to_json()).encode())
        elif path == "/_graphql_audit" and self.command == "GET":
            reply = _Reply(200, body=json.dumps(server.graphql.audit().to_json()).encode())
        elif path in CONTROL_PATHS and self.command == "POST":
            reply = _Reply(server.github.control(path, _query(query)))
        elif path in _LISTINGS_CONTROLS and self.command == "POST":
            reply = _LISTINGS_CONTROLS[path](server.listings, query)
        elif path == "/_incident" and self.command == "POST":
            reply = _incident_from_query(server.state, query)
        elif path == "/_quota" and self.command == "POST":
            reply = _quota_from_query(server.state, query)
        else:
            arrival = server.state.arrive(
                self.command, path, self.fields.get("idempotency-key"), original_host
            )
            if arrival.delay_seconds > 0:
                server.stopping.wait(arrival.delay_seconds)  # stop() cuts it short
            reply = server.state.answer(arrival)
            tenant_id, object_id = arrival.target or ("-", "-")
            logger.debug(
                "vendor %s tenant=%s object=%s -> %d%s",
                self.command,
                tenant_id,
                object_id,
                reply.status,
                " (answer lost)" if reply.lost else "",
            )
            if reply.lost and (
                server.state.lost_answer == "close"
                or server.stopping.wait(server.state.hang_seconds)
            ):
                self.close_connection = True  # no answer at all: the client sees a reset
                return
        self._send(reply)

    def _payments(self, payments: Payments, path: str) -> None:
        body = self._read_body()
        if body is None:
            reply = _Reply(413, "body_too_large")
        elif path == TOKEN_PATH:
            reply = payments.issue_token(body)
        else:
            reply = payments.reconcile(
                self.fields.get("authorization"),
                self.fields.get(PAYMENTS_IDEMPOTENCY_HEADER.lower()),
                body,
            )
        logger.debug("vendor POST %s -> %d", path, reply.status)
        if reply.lost:
            self.close_connection = True  # the effect happened; the client sees a reset
            return
        self._send(reply)

    def _refunds(self, server: _Server) -> None:
        body = self._read_body()
        if body is None:
            self._send(_Reply(413, "body_too_large"))
            return
        answer = server.refunds.refund(self.fields, body, server.stopping.wait)
        logger.debug("vendor POST %s -> %d", REFUNDS_PATH, answer.status)
        self._send(_Reply(answer.status, headers=answer.headers, body=answer.body))

    def _graphql(self, graphql: PointsApi, store: str) -> None:
        body = self._read_body()
        if body is None:
            self._send(_Reply(413, "body_too_large"))
            return
        points = graphql.call(body, store)
        self._send(_Reply(points.status, body=points.body))

    def _read_body(self) -> bytes | None:
        """The request body, or None (the connection then closed) when it cannot be read."""
        try:
            length = int(self.fields.get("content-length") or 0)
        except ValueError:
            length = -1
        if 0 <= length <= MAX_BODY_BYTES and "transfer-encoding" not in self.fields:
            return self.rfile.read(length)
        self.close_connection = True
        return None

    def _discard_body(self) -> None:
        try:
            length = int(self.fields.get("content-length") or 0)
        except ValueError:
            length = -1
        if 0 <= length <= MAX_BODY_BYTES and "transfer-encoding" not in self.fields:
            self.rfile.read(length)
        else:
            # The next request's start cannot be found: answer, then close.
            self.close_connection = True

    def _send(self, reply: _Reply) -> None:
        fields = list(reply.headers)
        payload = reply.payload()
        if payload is not None:
            fields += [("Content-Type", "application/json"), ("Content-Length", str(len(payload)))]
        self.write_answer(reply.status, fields, payload or b"")

    def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
        """Calls are logged by `_dispatch` with ids and status only."""

    def log_message(self, format: str, *args: Any) -> None:
        logger.debug("vendor: " + format, *args)


class VendorSimulator:
    """The vendor API on a local port, in a background thread. See the module docstring.

    `quota` is `(limit, period_seconds)`, kept per tenant or globally (`quota_scope`);
    `retry_after_ms_header` adds `X-RateLimit-Reset-Ms` to its 429s. Latency is drawn per call from
    `latency_distribution`. Fault rates are shares of calls in [0, 1]: `error_rate` 503,
    `server_error_rate` 500, `auth_failure_rate` 401 (none with effect), and
    `timeout_after_effect_rate` (the call takes effect, then its answer is lost: the connection is
    held `hang_seconds` before the answer with `lost_answer="hang"`, or closed unanswered with
    `"close"`). `seed` fixes every random draw. `listings_store_rate` and `listings_app_rate`
    are the marketplace's two sliding windows, `(limit, period_seconds)` (its published 2/1 s
    per store and 40/1 s for the app unless told otherwise).
    """

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        quota: tuple[int, float] | None = None,
        quota_scope: QuotaScope = "tenant",
        retry_after_ms_header: bool = False,
        latency_seconds: float = 0.0,
        latency_jitter_seconds: float = 0.0,
        latency_distribution: LatencyDistribution = "uniform",
        latency_sigma: float = DEFAULT_LATENCY_SIGMA,
        error_rate: float = 0.0,
        server_error_rate: float = 0.0,
        auth_failure_rate: float = 0.0,
        timeout_after_effect_rate: float = 0.0,
        lost_answer: LostAnswer = "hang",
        hang_seconds: float = DEFAULT_HANG_SECONDS,
        absent: frozenset[Target] | set[Target] = frozenset(),
        seed: int = 0,
        token_lifetime_seconds: float = DEFAULT_TOKEN_LIFETIME_SECONDS,
        listings_store_rate: tuple[int, float] = DEFAULT_STORE_RATE,
        listings_app_rate: tuple[int, float] = DEFAULT_APP_RATE,
        further_limits: FurtherLimits | None = None,
        tls: ssl.SSLContext | None = None,
        limit_dialect: Dialect = "plain",
        graphql: PointsApi | None = None,
        other_client_share: float = 0.0,
        github: GithubArtifacts | None = None,
    ) -> None:
        #: The GraphQL API charged in points (sweeper_local.graphql_cost), on the same port.
        self.graphql = graphql or PointsApi(seed=seed)
        #: GitHub's artifacts API (sweeper_local.github_artifacts), on the same port.
        self.github = github or GithubArtifacts()
        #: The help desk's contract on the same port (sweeper_local.helpdesk); `tls` serves
        #: every contract over TLS (the help desk's hosts per account are https only).
        self.helpdesk = HelpDesk()
        self._tls = tls
        #: The payments provider's contract on the same port (see the module docstring).
        self.payments = Payments(token_lifetime_seconds=token_lifetime_seconds)
        #: The marketplace's contract on the same port (sweeper_local.marketplace).
        self.listings = Marketplace(store_rate=listings_store_rate, app_rate=listings_app_rate)
        #: The refunds provider's contract on the same port (sweeper_local.refunds).
        self.refunds = Refunds()
        if quota is not None and (quota[0] < 1 or quota[1] <= 0):
            raise ValueError("quota must be (limit >= 1, period_seconds > 0)")
        check_dialect(limit_dialect, None if quota is None else quota[1])
        if quota_scope not in get_args(QuotaScope):
            raise ValueError("quota_scope must be 'global' or 'tenant'")
        if latency_seconds < 0 or latency_jitter_seconds < 0 or latency_sigma < 0:
            raise ValueError("latencies and their sigma must not be negative")
        if latency_distribution not in get_args(LatencyDistribution):
            raise ValueError("latency_distribution must be 'uniform' or 'lognormal'")
        if latency_distribution == "lognormal" and latency_jitter_seconds > 0:
            raise ValueError("a lognormal latency takes latency_sigma, not a jitter")
        if lost_answer not in get_args(LostAnswer):
            raise ValueError("lost_answer must be 'hang' or 'close'")
        if hang_seconds < 0:
            raise ValueError("hang_seconds must not be negative")
        faults = Faults(
            error_rate=_check_rate("error_rate", error_rate),
            server_error_rate=_check_rate("server_error_rate", server_error_rate),
            auth_failure_rate=_check_rate("auth_failure_rate", auth_failure_rate),
            timeout_after_effect_rate=_check_rate(
                "timeout_after_effect_rate", timeout_after_effect_rate
            ),
        )
        self._address = (host, port)
        self._state = _VendorState(
            quota=quota,
            quota_scope=quota_scope,
            retry_after_ms_header=retry_after_ms_header,
            latency_seconds=latency_seconds,
            latency_jitter_seconds=latency_jitter_seconds,
            latency_distribution=latency_distribution,
            latency_sigma=latency_sigma,
            faults=faults,
            lost_answer=lost_answer,
            hang_seconds=hang_seconds,
            absent=frozenset(absent),
            seed=seed,
            further=further_limits,
            limit_dialect=limit_dialect,
            other_client_share=other_client_share,
        )
        self._stopping = threading.Event()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        self._url: str | None = None

    def start(self) -> Self:
        """Bind (port 0 picks a free port) and serve in a background thread."""
        if self._server is not None:
            raise RuntimeError("the vendor simulator is already running")
        self._stopping.clear()
        server = _Server(
            self._address,
            self._state,
            self._stopping,
            self.payments,
            self.listings,
            self.refunds,
            self.helpdesk,
            self.graphql,
            self.github,
        )
        if self._tls is not None:
            server.socket = self._tls.wrap_socket(server.socket, server_side=True)
        thread = threading.Thread(
            target=server.serve_forever,
            kwargs={"poll_interval": POLL_INTERVAL_SECONDS},
            name="vendor-simulator",
            daemon=True,
        )
        thread.start()
        self._server, self._thread = server, thread
        scheme = "http" if self._tls is None else "https"
        self._url = f"{scheme}://{server.server_name}:{server.server_port}"
        logger.info("vendor simulator listening on %s", self._url)
        return self

    def stop(self) -> None:
        """Stop serving and close the port; calls still sleeping in latency are answered at once,
        calls whose answer is lost are closed unanswered."""
        server, thread = self._server, self._thread
        if server is None or thread is None:
            return
        self._stopping.set()
        server.shutdown()
        server.server_close()
        thread.join()
        self._server = self._thread = None

    @property
    def url(self) -> str:
        """`http://HOST:PORT` of the last start (kept after stop, for connection-refused tests)."""
        if self._url is None:
            raise RuntimeError("the vendor simulator has not been started")
        return self._url

    def audit(self) -> VendorAudit:
        """What the vendor has seen so far (thread-safe, at any time)."""
        return self._state.audit()

    def payments_audit(self) -> PaymentsAudit:
        """What the payments provider has seen so far."""
        return self.payments.audit()

    def listings_audit(self) -> ListingsAudit:
        """What the marketplace has seen so far."""
        return self.listings.audit()

    def fail_next(self, n: int, status: int, *, retry_after: str | None = None) -> None:
        """Answer the next `n` calls that pass incident, quota and auth with `status`, no effect."""
        if n < 0:
            raise ValueError("n must not be negative")
        if not 200 <= status <= 599:
            raise ValueError("status must be a final HTTP status (200-599)")
        self._state.fail_next(n, ForcedResponse(status, retry_after))

    def set_quota(self, limit: int, period_seconds: float) -> None:
        """Change the quota from the next arriving call on (a vendor that lowers or raises its
        limit without notice; its answers state the new one in the simulator's dialect)."""
        if limit < 1 or period_seconds <= 0:
            raise ValueError("quota must be (limit >= 1, period_seconds > 0)")
        check_dialect(self._state.limit_dialect, period_seconds)
        self._state.set_quota((limit, period_seconds))

    def set_fault_rates(
        self,
        *,
        error_rate: float | None = None,
        server_error_rate: float | None = None,
        auth_failure_rate: float | None = None,
        timeout_after_effect_rate: float | None = None,
    ) -> None:
        """Change the given fault rates from the next arriving call on (None leaves one as is)."""
        given = {
            "error_rate": error_rate,
            "server_error_rate": server_error_rate,
            "auth_failure_rate": auth_failure_rate,
            "timeout_after_effect_rate": timeout_after_effect_rate,
        }
        rates = {name: _check_rate(name, v) for name, v in given.items() if v is not None}
        self._state.set_fault_rates(rates)

    def set_auth_failing(self, failing: bool) -> None:
        """While on, every call not closed by an incident or the quota gets 401, without effect."""
        self._state.set_auth_failing(failing)

    def start_incident(
        self,
        duration_seconds: float,
        retry_after_seconds: int | None = None,
        status: int = 429,
        *,
        starts_in_seconds: float = 0.0,
    ) -> tuple[float, float]:
        """Close the API for `duration_seconds` (from `starts_in_seconds` from now): every call
        arriving then gets `status` (429 or 503) without effect, with `Retry-After` =
        `retry_after_seconds` or the whole seconds left. Returns its (start, end), monotonic."""
        _check_incident(duration_seconds, retry_after_seconds, status, starts_in_seconds)
        return self._state.start_incident(
            duration_seconds, retry_after_seconds, status, starts_in_seconds
        )

    def reset(self) -> None:
        """Forget every call, effect, incident and injected fault (what `POST /_reset` does)."""
        self._state.reset()
        self.payments.reset()
        self.listings.reset()
        self.refunds.reset()
        self.graphql.reset()
        self.github.reset()

    def __enter__(self) -> Self:
        return self if self._server is not None else self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


def fetch_audit(url: str, timeout_seconds: float = 10.0) -> VendorAudit:
    """The audit of a simulator running elsewhere (`GET /_audit`)."""
    with urllib.request.urlopen(f"{url}/_audit", timeout=timeout_seconds) as response:  # noqa: S310
        return VendorAudit.from_json(json.loads(response.read()))


def fetch_payments_audit(url: str, timeout_seconds: float = 10.0) -> PaymentsAudit:
    """The payments provider's audit of a simulator running elsewhere (`GET /_payments_audit`)."""
    with urllib.request.urlopen(  # noqa: S310 - a simulator's URL
        f"{url}/_payments_audit", timeout=timeout_seconds
    ) as response:
        return PaymentsAudit.from_json(json.loads(response.read()))


def _fetch_json(url: str, path: str, timeout_seconds: float) -> Any:
    with urllib.request.urlopen(f"{url}{path}", timeout=timeout_seconds) as response:  # noqa: S310
        return json.loads(response.read())


def fetch_github_audit(url: str, timeout_seconds: float = 10.0) -> GithubAudit:
    """GitHub's artifacts API's audit of a simulator running elsewhere (`GET /_github_audit`)."""
    return GithubAudit.from_json(_fetch_json(url, "/_github_audit", timeout_seconds))


def fetch_graphql_audit(url: str, timeout_seconds: float = 10.0) -> GraphqlAudit:
    """The GraphQL API's audit of a simulator running elsewhere (`GET /_graphql_audit`)."""
    return GraphqlAudit.from_json(_fetch_json(url, "/_graphql_audit", timeout_seconds))


def fetch_listings_audit(url: str, timeout_seconds: float = 10.0) -> ListingsAudit:
    """The marketplace's audit of a simulator running elsewhere (`GET /_listings_audit`)."""
    with urllib.request.urlopen(  # noqa: S310 - a simulator's URL
        f"{url}/_listings_audit", timeout=timeout_seconds
    ) as response:
        return ListingsAudit.from_json(json.loads(response.read()))


class VendorProcess:
    """The simulator as a process of its own (`python -m sweeper_local.vendor ARGS`).

    A separate server, as a real vendor is: the times it records are not delayed by the
    caller's interpreter. `args` are the command line's options; the port is chosen here.
    """

    def __init__(self, *args: str, start_timeout_seconds: float = 30.0) -> None:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = int(probe.getsockname()[1])
        self.url = f"http://127.0.0.1:{self.port}"
        self._proc = subprocess.Popen(  # noqa: S603 - fixed argv, no shell
            [sys.executable, "-m", "sweeper_local.vendor", "--port", str(self.port), *args],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + start_timeout_seconds
        while time.monotonic() < deadline:
            try:
                self.audit()
                return
            except OSError:
                time.sleep(0.05)
        self.stop()
        raise RuntimeError("the vendor simulator process did not start")

    def audit(self) -> VendorAudit:
        return fetch_audit(self.url)

    def start_incident(
        self, seconds: float, starts_in: float = 0.0, retry_after: int | None = None
    ) -> tuple[float, float]:
        """What `POST /_incident` does; returns the incident's (start, end), monotonic. Its
        429s say Retry-After `retry_after`, by default the whole seconds left of it."""
        told = "" if retry_after is None else f"&retry_after={retry_after}"
        request = urllib.request.Request(  # noqa: S310 - our own loopback simulator
            f"{self.url}/_incident?seconds={seconds}&starts_in={starts_in}{told}", method="POST"
        )
        with urllib.request.urlopen(request, timeout=10) as response:  # noqa: S310
            body = json.loads(response.read())
        return float(body["start"]), float(body["end"])

    def listings_audit(self) -> ListingsAudit:
        return fetch_listings_audit(self.url)

    def schedule_quota(self, limit: int, period_seconds: float, starts_in: float) -> float:
        """What `POST /_quota` does; returns when the new quota takes effect (monotonic)."""
        query = urlencode({"limit": limit, "period": period_seconds, "starts_in": starts_in})
        request = urllib.request.Request(f"{self.url}/_quota?{query}", method="POST")  # noqa: S310
        with urllib.request.urlopen(request, timeout=10) as response:  # noqa: S310
            return float(json.loads(response.read())["at"])

    def throttle_listings(
        self, scope: LimitScope, *, store: str | None = None, retry_after_seconds: int = 1
    ) -> None:
        """What `POST /_listings/throttle` does: the marketplace's next call (of `store`)
        answered 429 naming `scope`."""
        query = {"scope": scope, "retry_after": str(retry_after_seconds)}
        if store is not None:
            query["store"] = store
        self._post(f"/_listings/throttle?{urlencode(query)}")

    def github_audit(self) -> GithubAudit:
        return fetch_github_audit(self.url)

    def graphql_audit(self) -> GraphqlAudit:
        return fetch_graphql_audit(self.url)

    def throttle_github(
        self, *, owner: str | None = None, retry_after_seconds: int = 1, status: int = 403
    ) -> None:
        """What `POST /_github/throttle` does: GitHub's next call (of `owner`) answered as
        its secondary limit answers, with `Retry-After`."""
        query = {"retry_after": str(retry_after_seconds), "status": str(status)}
        if owner is not None:
            query["owner"] = owner
        self._post(f"/_github/throttle?{urlencode(query)}")

    def spend_github(self, owner: str, calls: int) -> None:
        """What `POST /_github/spend` does: another client spends `calls` of the owner's
        primary window."""
        self._post(f"/_github/spend?{urlencode({'owner': owner, 'calls': str(calls)})}")

    def add_absent_artifact(self, owner: str, repo: str, artifact_id: str) -> None:
        """What `POST /_github/absent` does: an artifact that never existed."""
        self._post(
            f"/_github/absent?{urlencode({'owner': owner, 'repo': repo, 'id': artifact_id})}"
        )

    def add_absent_listing(self, store: str, listing: str) -> None:
        """What `POST /_listings/absent` does: a listing that never existed."""
        self._post(f"/_listings/absent?{urlencode({'store': store, 'listing': listing})}")

    def reset(self) -> None:
        """What `POST /_reset` does."""
        self._post("/_reset")

    def _post(self, path: str) -> None:
        request = urllib.request.Request(f"{self.url}{path}", method="POST")  # noqa: S310
        with urllib.request.urlopen(request, timeout=10):  # noqa: S310 - our own simulator
            pass

    def stop(self) -> None:
        self._proc.terminate()
        self._proc.wait(timeout=10)


#: The payments clients a simulator process accepts: a JSON object of client id to secret, in
#: the environment (a command line is visible to every user of the machine).
PAYMENTS_CLIENTS_ENV: Final = "SWEEPER_VENDOR_PAYMENTS_CLIENTS"


#: The API keys the marketplace of a simulator process accepts: a JSON list of strings, in the
#: environment (a command line is visible to every user of the machine).
LISTINGS_API_KEYS_ENV: Final = "SWEEPER_VENDOR_LISTINGS_API_KEYS"


def _listings_api_keys(text: str | None) -> list[str]:
    if not text:
        return []
    try:
        value = json.loads(text)
    except ValueError:
        value = None
    if not isinstance(value, list) or not all(isinstance(k, str) and k for k in value):
        raise ValueError(f"{LISTINGS_API_KEYS_ENV} must be a JSON list of API keys")
    return value


def _sliding_arg(text: str) -> tuple[int, float]:
    quota = _quota_arg(text)
    if quota.algorithm != "sliding_window":
        raise argparse.ArgumentTypeError("the marketplace's windows are sliding: give N/PERIOD")
    return quota.limit, quota.period_seconds


def _pair_arg(kind: type[int] | type[float], separator: str) -> Any:
    def parse(text: str) -> tuple[float, float]:
        first, sep, second = text.partition(separator)
        try:
            if sep:
                return kind(first), kind(second)
        except ValueError:
            pass
        raise argparse.ArgumentTypeError(f"give two numbers as A{separator}B")

    return parse


def _payments_clients(text: str | None) -> dict[str, str]:
    if not text:
        return {}
    try:
        value = json.loads(text)
    except ValueError:
        value = None
    if not isinstance(value, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    ):
        raise ValueError(f"{PAYMENTS_CLIENTS_ENV} must be a JSON object of client id to secret")
    return value


def _quota_arg(text: str) -> Quota:
    try:
        return Quota.parse(text)
    except ConfigError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc


def _rate_pair(quota: Quota | None, default: tuple[int, float]) -> tuple[int, float]:
    return default if quota is None else (quota.limit, quota.period_seconds)


def main(argv: Sequence[str] | None = None) -> int:
    """Serve the simulator until SIGTERM or SIGINT; print its URL first."""
    parser = argparse.ArgumentParser(
        prog="python -m sweeper_local.vendor",
        description="Serve the vendor simulator until SIGTERM or SIGINT.",
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8900, help="0 picks a free port")
    parser.add_argument("--rate", type=_quota_arg, default=None, help="strict quota, e.g. 40/1s")
    parser.add_argument("--scope", choices=get_args(QuotaScope), default="tenant")
    parser.add_argument(
        "--retry-after-ms-header",
        action="store_true",
        help="add X-RateLimit-Reset-Ms to the quota's 429s",
    )
    parser.add_argument(
        "--dialect",
        "--limit-dialect",
        dest="limit_dialect",
        choices=DIALECT_NAMES,
        default="plain",
        help=(
            "how the quota is stated in every answer: ietf (RateLimit fields), x-ratelimit, "
            "github (x-ratelimit, epoch resets; its artifacts API always speaks it), sforce, "
            "shopify-graphql (points in extensions.cost: the GraphQL API always speaks it)"
        ),
    )
    parser.add_argument(
        "--github-core",
        type=_quota_arg,
        default=None,
        help="GitHub's primary limit per owner, a fixed window, e.g. 5000/3600s",
    )
    parser.add_argument(
        "--github-secondary",
        type=_quota_arg,
        default=None,
        help="GitHub's secondary limit per owner in points, a sliding window, e.g. 900/60s",
    )
    parser.add_argument(
        "--github-mutation-cost",
        type=int,
        default=DEFAULT_MUTATION_COST,
        help="the points a DELETE costs against the secondary limit",
    )
    parser.add_argument(
        "--other-client-share",
        type=float,
        default=0.0,
        help="another client spends this share of the same quota, e.g. 0.3 (a shared key)",
    )
    parser.add_argument(
        "--graphql-bucket",
        type=_pair_arg(float, ":"),
        default=None,
        help="the GraphQL API's points bucket, MAXIMUM:RESTORED_PER_SECOND, e.g. 1000:50",
    )
    parser.add_argument(
        "--graphql-costs",
        type=_pair_arg(int, "-"),
        default=None,
        help="the range a GraphQL call's actual cost is drawn from, e.g. 1-20",
    )
    parser.add_argument("--latency", type=float, default=0.0, help="seconds added to each call")
    parser.add_argument("--jitter", type=float, default=0.0, help="up to this many more seconds")
    parser.add_argument(
        "--latency-distribution",
        choices=get_args(LatencyDistribution),
        default="uniform",
        help="lognormal: --latency is the median",
    )
    parser.add_argument("--latency-sigma", type=float, default=DEFAULT_LATENCY_SIGMA)
    parser.add_argument("--error-rate", type=float, default=0.0, help="share of calls given 503")
    parser.add_argument(
        "--server-error-rate", type=float, default=0.0, help="share of calls given 500"
    )
    parser.add_argument(
        "--auth-failure-rate", type=float, default=0.0, help="share of calls given 401"
    )
    parser.add_argument(
        "--timeout-after-effect-rate",
        type=float,
        default=0.0,
        help="share of calls whose answer is lost after the effect",
    )
    parser.add_argument("--lost-answer", choices=get_args(LostAnswer), default="hang")
    parser.add_argument("--hang-seconds", type=float, default=DEFAULT_HANG_SECONDS)
    parser.add_argument(
        "--incident-at", type=float, default=None, help="seconds after start an incident begins"
    )
    parser.add_argument("--incident-for", type=float, default=None, help="incident duration")
    parser.add_argument(
        "--incident-status", type=int, choices=sorted(INCIDENT_STATUSES), default=429
    )
    parser.add_argument("--incident-retry-after", type=int, default=None)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--app-rate", type=_quota_arg, default=None, help="an app-wide window beside --rate"
    )
    parser.add_argument(
        "--in-flight-cap", type=int, default=None, help="429 beyond this many calls held at once"
    )
    parser.add_argument(
        "--token-lifetime",
        type=float,
        default=DEFAULT_TOKEN_LIFETIME_SECONDS,
        help="seconds a payments token lives (its expires_in)",
    )
    parser.add_argument(
        "--listings-store-rate",
        type=_sliding_arg,
        default=DEFAULT_STORE_RATE,
        help="the marketplace's sliding window per store, e.g. 2/1s",
    )
    parser.add_argument(
        "--listings-app-rate",
        type=_sliding_arg,
        default=DEFAULT_APP_RATE,
        help="the marketplace's sliding window for the whole app, e.g. 40/1s",
    )
    args = parser.parse_args(argv)
    try:
        clients = _payments_clients(os.environ.get(PAYMENTS_CLIENTS_ENV))
        api_keys = _listings_api_keys(os.environ.get(LISTINGS_API_KEYS_ENV))
    except ValueError as exc:
        parser.error(str(exc))
    if args.incident_at is not None and args.incident_for is None:
        parser.error("--incident-at needs --incident-for")
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")

    # Blocked before the serving thread starts (it inherits the mask), then awaited: no handler
    # runs in the middle of anything.
    stop_signals = {signal.SIGTERM, signal.SIGINT}
    signal.pthread_sigmask(signal.SIG_BLOCK, stop_signals)
    quota: Quota | None = args.rate
    try:
        sim = VendorSimulator(
            args.host,
            args.port,
            quota=None if quota is None else (quota.limit, quota.period_seconds),
            quota_scope=args.scope,
            retry_after_ms_header=args.retry_after_ms_header,
            limit_dialect=dialect_named(args.limit_dialect),
            other_client_share=args.other_client_share,
            github=GithubArtifacts(
                core=_rate_pair(args.github_core, DEFAULT_CORE),
                secondary=_rate_pair(args.github_secondary, DEFAULT_SECONDARY),
                mutation_cost=args.github_mutation_cost,
            ),
            graphql=PointsApi(
                maximum=(args.graphql_bucket or (DEFAULT_MAXIMUM, 0))[0],
                restore_rate=(args.graphql_bucket or (0, DEFAULT_RESTORE_RATE))[1],
                cost_range=args.graphql_costs or DEFAULT_COST_RANGE,
                seed=args.seed,
            ),
            latency_seconds=args.latency,
            latency_jitter_seconds=args.jitter,
            latency_distribution=args.latency_distribution,
            latency_sigma=args.latency_sigma,
            error_rate=args.error_rate,
            server_error_rate=args.server_error_rate,
            auth_failure_rate=args.auth_failure_rate,
            timeout_after_effect_rate=args.timeout_after_effect_rate,
            lost_answer=args.lost_answer,
            hang_seconds=args.hang_seconds,
            seed=args.seed,
            token_lifetime_seconds=args.token_lifetime,
            listings_store_rate=args.listings_store_rate,
            listings_app_rate=args.listings_app_rate,
            further_limits=FurtherLimits(
                None
                if args.app_rate is None
                else (args.app_rate.limit, args.app_rate.period_seconds),
                args.in_flight_cap,
            ),
        )
        for client_id, client_secret in clients.items():
            sim.payments.add_client(client_id, client_secret)
        for api_key in api_keys:
            sim.listings.add_api_key(api_key)
        incident = None
        if args.incident_for is not None:
            incident = (args.incident_for, args.incident_retry_after, args.incident_status)
            _check_incident(*incident, args.incident_at or 0.0)
    except ValueError as exc:
        parser.error(str(exc))
    with sim:
        if incident is not None:
            sim.start_incident(*incident, starts_in_seconds=args.incident_at or 0.0)
        sys.stdout.write(f"{sim.url}\n")
        sys.stdout.flush()
        received = signal.sigwait(stop_signals)
        logger.info("vendor simulator stopping on %s", signal.Signals(received).name)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

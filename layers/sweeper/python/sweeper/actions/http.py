"""The production action: one HTTP call per job, classified into an outcome, never raised.

The operation key travels as the `Idempotency-Key`, so a retry of an attempt that may have landed
(UNKNOWN) cannot delete twice. urllib3's own retries and redirects are off: retrying is sweeper's
job (the ledger's attempt budget, the shared rate limiter), not the client's.
"""

from __future__ import annotations

import math
import re
import threading
from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from types import MappingProxyType
from typing import Final
from urllib.parse import quote

import urllib3
from urllib3.exceptions import (
    ConnectTimeoutError,
    HTTPError,
    LocationValueError,
    NameResolutionError,
    NewConnectionError,
    ProtocolError,
    ReadTimeoutError,
    SSLError,
)
from urllib3.util import parse_url

from sweeper import __version__
from sweeper.config import HttpActionConfig
from sweeper.models import ActionCall, ActionResult, OutcomeClass

USER_AGENT: Final = f"sweeper/{__version__}"
#: Connections kept per host: a consumer may run a batch's calls on a few threads.
POOL_MAX_CONNECTIONS: Final = 10

_TEMPLATE_FIELD_RE: Final = re.compile(r"{(\w+)}")
_DELAY_SECONDS_RE: Final = re.compile(r"\d+(?:\.\d+)?")


@dataclass(frozen=True, slots=True)
class OutcomeTable:
    """How what happened to a call maps to an outcome class: the one place it is decided.

    A status is looked up in `when_retry_after` (only if the response named a wait), then in
    `statuses`, then by its hundred, else `otherwise`. A transport error takes the first row of
    `errors` it is an instance of: TRANSIENT when the request was never sent, UNKNOWN when it may
    have reached the vendor.
    """

    statuses: Mapping[int, OutcomeClass]
    when_retry_after: Mapping[int, OutcomeClass]
    by_hundred: Mapping[int, OutcomeClass]
    otherwise: OutcomeClass
    errors: tuple[tuple[type[HTTPError], OutcomeClass, str], ...]

    def classify_status(self, status: int, *, has_retry_after: bool) -> OutcomeClass:
        if has_retry_after and status in self.when_retry_after:
            return self.when_retry_after[status]
        if status in self.statuses:
            return self.statuses[status]
        return self.by_hundred.get(status // 100, self.otherwise)

    def classify_error(self, exc: HTTPError) -> tuple[OutcomeClass, str]:
        """Outcome class and short code of a transport error."""
        for kind, outcome, code in self.errors:
            if isinstance(exc, kind):
                return outcome, code
        return OutcomeClass.UNKNOWN, "http_error"


#: The vendor contract's classification (a later issue lets a policy override it).
DEFAULT_OUTCOMES: Final = OutcomeTable(
    statuses=MappingProxyType(
        {
            400: OutcomeClass.PERMANENT,
            401: OutcomeClass.AUTH,
            403: OutcomeClass.AUTH,
            404: OutcomeClass.ABSENT,
            410: OutcomeClass.ABSENT,
            422: OutcomeClass.PERMANENT,
            429: OutcomeClass.THROTTLED,
        }
    ),
    # A 503 that names a wait is the vendor shedding load, not failing.
    when_retry_after=MappingProxyType({503: OutcomeClass.THROTTLED}),
    by_hundred=MappingProxyType(
        {2: OutcomeClass.ACCEPTED, 4: OutcomeClass.PERMANENT, 5: OutcomeClass.TRANSIENT}
    ),
    # 1xx/3xx: redirects are not followed, so the configured URL is wrong.
    otherwise=OutcomeClass.PERMANENT,
    # Most specific first: NameResolutionError < NewConnectionError < ConnectTimeoutError.
    errors=(
        (NameResolutionError, OutcomeClass.TRANSIENT, "dns_error"),
        (NewConnectionError, OutcomeClass.TRANSIENT, "connect_error"),
        (ConnectTimeoutError, OutcomeClass.TRANSIENT, "connect_timeout"),
        (ReadTimeoutError, OutcomeClass.UNKNOWN, "read_timeout"),
        (ProtocolError, OutcomeClass.UNKNOWN, "connection_reset"),
        # Usually the handshake, but urllib3 also reports TLS failures mid-response this way.
        (SSLError, OutcomeClass.UNKNOWN, "tls_error"),
        (LocationValueError, OutcomeClass.PERMANENT, "bad_url"),
    ),
)


def outcomes_for(config: HttpActionConfig, base: OutcomeTable = DEFAULT_OUTCOMES) -> OutcomeTable:
    """The default table with the policy's per-status overrides on top."""
    if not config.outcomes:
        return base
    statuses = {**base.statuses, **{s: OutcomeClass(o) for s, o in config.outcomes.items()}}
    # An explicit override also wins over the Retry-After special case for that status.
    when = {s: o for s, o in base.when_retry_after.items() if s not in config.outcomes}
    return replace(
        base, statuses=MappingProxyType(statuses), when_retry_after=MappingProxyType(when)
    )


def parse_retry_after(value: str | None, now: datetime | None = None) -> float | None:
    """Seconds to wait from a Retry-After value (delay-seconds or HTTP-date), at least 0.

    None when the header is missing or unreadable.
    """
    if value is None:
        return None
    text = value.strip()
    if _DELAY_SECONDS_RE.fullmatch(text):
        seconds = float(text)
        return seconds if math.isfinite(seconds) else None
    try:
        when = parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    if when.tzinfo is None:  # "-0000" in a date means UTC with no claim about local time
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - (now or datetime.now(UTC))).total_seconds())


def path_segment(value: str) -> str:
    """`value` percent-encoded as one path segment that cannot be read as another path.

    `quote` leaves `.` as it is, and a segment of only dots is a dot segment that urllib3 (and
    many servers) resolve away: `..` would climb to the parent. Such a segment has its dots
    encoded too (`%2E%2E`), which every layer keeps as one literal segment.
    """
    encoded = quote(value, safe="")
    return encoded.replace(".", "%2E") if encoded in (".", "..") else encoded


class HttpAction:
    """Carry out a job with one HTTP call; see `sweeper.actions.Action`."""

    def __init__(
        self,
        config: HttpActionConfig,
        token: str | None = None,
        *,
        outcomes: OutcomeTable | None = None,
    ) -> None:
        """`token` is sent as a Bearer token; the caller fetches it (never from the environment)."""
        if token is not None and ("\r" in token or "\n" in token):
            raise ValueError("the bearer token must be a single line")
        self._config = config
        self._outcomes = outcomes if outcomes is not None else outcomes_for(config)
        self._headers = {"User-Agent": USER_AGENT}
        if token:
            self._headers["Authorization"] = f"Bearer {token}"
        self._lock = threading.Lock()
        self._pool: urllib3.PoolManager | None = None
        self._template_slashes = (parse_url(self._fill("t", "o", "k")).path or "").count("/")

    def __repr__(self) -> str:
        auth = "bearer" if "Authorization" in self._headers else "none"
        return f"HttpAction({self._config.method} {self._config.url_template!r}, auth={auth})"

    def url_for(self, job: ActionCall) -> str:
        """The job's URL: the template with its ids percent-encoded as single path segments."""
        return self._fill(job.tenant_id, job.object_id, job.key)

    def _fill(self, tenant_id: str, object_id: str, key: str) -> str:
        values = {
            "api_url": self._config.api_url.rstrip("/"),
            "tenant_id": path_segment(tenant_id),
            "object_id": path_segment(object_id),
            "operation_key": path_segment(key),
        }
        return _TEMPLATE_FIELD_RE.sub(lambda m: values[m.group(1)], self._config.url_template)

    def _checked_url(self, job: ActionCall) -> str | None:
        """The URL to send, or None when its path, as urllib3 will send it, has not the
        template's segment count (an id that would climb or split a path is never sent)."""
        try:
            url = self.url_for(job)
            sent = parse_url(url).path or ""
        except (UnicodeEncodeError, LocationValueError):  # a lone surrogate; an unparsable URL
            return None
        if sent.count("/") != self._template_slashes:
            return None
        return url

    def perform(self, job: ActionCall, timeout_seconds: float | None = None) -> ActionResult:
        """Send the call once and classify what came back; never raises for a status."""
        if timeout_seconds is not None and timeout_seconds <= 0:
            return ActionResult(outcome=OutcomeClass.TRANSIENT, code="no_time_left")
        timeout = urllib3.Timeout(
            connect=self._config.connect_timeout_seconds,
            read=self._config.read_timeout_seconds,
            total=timeout_seconds,
        )
        url = self._checked_url(job)
        if url is None:
            return ActionResult(outcome=OutcomeClass.PERMANENT, code="bad_url")
        try:
            response = self._pool_manager().urlopen(
                self._config.method,
                url,
                headers={**self._headers, "Idempotency-Key": job.key},
                timeout=timeout,
                retries=False,
                redirect=False,
                preload_content=False,
            )
        except HTTPError as exc:
            outcome, code = self._outcomes.classify_error(exc)
            return ActionResult(outcome=outcome, code=code)
        try:
            status = response.status
            retry_after = parse_retry_after(response.headers.get("Retry-After"))
            vendor_header = self._config.retry_after_header
            if vendor_header and response.headers.get(vendor_header) is not None:
                # A vendor's own header is usually more precise than Retry-After's whole seconds.
                own = parse_retry_after(response.headers.get(vendor_header))
                if own is not None:
                    scale = 0.001 if self._config.retry_after_header_unit == "ms" else 1.0
                    retry_after = own * scale
        finally:
            response.drain_conn()  # read and drop the body so the connection can be reused
            response.release_conn()
        outcome = self._outcomes.classify_status(status, has_retry_after=retry_after is not None)
        return ActionResult(
            outcome=outcome,
            status_code=status,
            code=f"http_{status}",
            retry_after_seconds=retry_after,
        )

    def close(self) -> None:
        """Close pooled connections; the next call opens new ones."""
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.clear()

    def _pool_manager(self) -> urllib3.PoolManager:
        with self._lock:
            if self._pool is None:
                self._pool = urllib3.PoolManager(maxsize=POOL_MAX_CONNECTIONS, retries=False)
            return self._pool

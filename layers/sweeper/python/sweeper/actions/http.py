"""The production action: one HTTP call per job, classified into an outcome, never raised.

The operation key travels as the `Idempotency-Key`, so a retry of an attempt that may have landed
(UNKNOWN) cannot delete twice. urllib3's own retries and redirects are off: retrying is sweeper's
job (the ledger's attempt budget, the shared rate limiter), not the client's.
"""

from __future__ import annotations

import math
import re
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from http.client import HTTPException
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
from sweeper.actions.token import FixedToken, TokenSource
from sweeper.config import HttpActionConfig
from sweeper.errors import TokenError
from sweeper.models import ActionCall, ActionResult, OutcomeClass

USER_AGENT: Final = f"sweeper/{__version__}"
#: Connections kept per host: a consumer may run a batch's calls on a few threads.
POOL_MAX_CONNECTIONS: Final = 10
#: At most this much of a response body is read (and dropped) at a time.
BODY_CHUNK_BYTES: Final = 16 * 1024

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


def _drop_body(response: urllib3.BaseHTTPResponse, deadline: float, read_timeout: float) -> bool:
    """Read and drop `response`'s body until `deadline` (monotonic); True if read to its end.

    One socket read at a time, each given at most the time left: a vendor trickling its body
    cannot keep the call past the deadline.
    """
    try:
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            sock = getattr(response.connection, "sock", None)
            if sock is not None:
                sock.settimeout(min(left, read_timeout))
            if not response.read1(BODY_CHUNK_BYTES, decode_content=False):
                return True
    except (HTTPError, HTTPException, OSError):
        return False


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
        token: str | TokenSource | None = None,
        *,
        outcomes: OutcomeTable | None = None,
    ) -> None:
        """`token` is sent as a Bearer token, asked of its source on every call (a string: a
        fixed one); the caller says where it comes from (never the environment)."""
        if isinstance(token, str):
            try:
                token = FixedToken(token) if token else None
            except TokenError as exc:
                raise ValueError("the bearer token must be a single line") from exc
        self._config = config
        self._outcomes = outcomes if outcomes is not None else outcomes_for(config)
        self._headers = {"User-Agent": USER_AGENT}
        self._token = token
        self._lock = threading.Lock()
        self._pool: urllib3.PoolManager | None = None
        self._template_slashes = (parse_url(self._fill("t", "o", "k")).path or "").count("/")

    def __repr__(self) -> str:
        auth = "bearer" if self._token is not None else "none"
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
        """Send the call once and classify what came back; never raises for a status.

        An AUTH answer makes the token source read the token once past its cache. When the
        token has changed (rotated since it was cached), the answer is TRANSIENT
        (`auth_token_renewed`): nothing happened at the vendor, and the job's next attempt,
        after the usual backoff, sends the new token with the same Idempotency-Key. It is not
        sent again at once: that second call would have no limiter slot of its own.
        """
        if timeout_seconds is not None and timeout_seconds <= 0:
            return ActionResult(outcome=OutcomeClass.TRANSIENT, code="no_time_left")
        try:
            token = self._token.current() if self._token is not None else None
        except TokenError as exc:
            return ActionResult(outcome=OutcomeClass.TRANSIENT, code=exc.code)
        result = self._send(job, token, timeout_seconds)
        if result.outcome is OutcomeClass.AUTH and self._token is not None:
            try:
                renewed = self._token.refresh(token)
            except TokenError:
                renewed = False  # the AUTH answer stands: the circuit opens as usual
            if renewed:
                return ActionResult(
                    outcome=OutcomeClass.TRANSIENT,
                    status_code=result.status_code,
                    code="auth_token_renewed",
                )
        return result

    def _send(
        self, job: ActionCall, token: str | None, timeout_seconds: float | None
    ) -> ActionResult:
        headers = {**self._headers, "Idempotency-Key": job.key}
        if token is not None:
            headers["Authorization"] = f"Bearer {token}"
        # urllib3's `total` bounds each socket read, not their sum: a body trickled a byte at a
        # time would hold the thread until Lambda stops it. The body is read against this.
        deadline = time.monotonic() + (
            timeout_seconds
            if timeout_seconds is not None
            else self._config.connect_timeout_seconds + self._config.read_timeout_seconds
        )
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
                headers=headers,
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
            named = response.headers.get(self._config.limit_header or "") if status == 429 else None
            # only a value the policy maps is kept: the header is the vendor's text, not ours
            limit_value = named if named in self._config.limit_header_values else None
        finally:
            # Read and drop the body so the connection can be reused; one not read whole by the
            # deadline is closed instead. The status and headers already decide the outcome.
            if not _drop_body(response, deadline, self._config.read_timeout_seconds):
                response.close()
            response.release_conn()
        outcome = self._outcomes.classify_status(status, has_retry_after=retry_after is not None)
        return ActionResult(
            outcome=outcome,
            status_code=status,
            code=f"http_{status}",
            retry_after_seconds=retry_after,
            limit_value=limit_value,
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

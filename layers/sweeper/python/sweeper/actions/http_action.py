"""The `http` kind's action: one HTTP call per job, classified into an outcome, never raised.

`HttpAction` fills the job's URL and body (`sweeper.actions.url_template`,
`sweeper.actions.templates`), presents its credentials (`sweeper.actions.http_auth`), sends the
operation key in the idempotency header, reads the answer's status, Retry-After (or the
vendor's own header) and the limit a 429 names, and classes it (`sweeper.actions.http_outcomes`,
`sweeper.actions.outcome_rules`). urllib3's own retries and redirects are off: retrying is
sweeper's job, and no credential follows a redirect. Its config is the policy's
`HttpActionSpec`; the kind (`sweeper.actions.http`) builds it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from functools import partial
from typing import Final

import urllib3
from urllib3.exceptions import HTTPError

from sweeper import __version__
from sweeper.actions.base import AnswerReader
from sweeper.actions.body_encoding import CONTENT_TYPES, encode_body
from sweeper.actions.http_answer import ruled_and_read
from sweeper.actions.http_auth import (
    CredentialError,
    Credentials,
    NoCredentials,
    SecretCredentials,
    bearer_header,
)
from sweeper.actions.http_outcomes import OutcomeTable, outcomes_for
from sweeper.actions.http_spec import HttpActionSpec
from sweeper.actions.http_transport import (
    NOTES_SEND_POOLS,
    drop_body,
    preconnect,
    request_sent_at,
)
from sweeper.actions.outcome_rules import OutcomeRules
from sweeper.actions.rehearsal import Rehearsal, pool_manager
from sweeper.actions.retry_after import parse_retry_after
from sweeper.actions.spans import CallSpans, no_spans
from sweeper.actions.templates import TemplateError, field_value
from sweeper.actions.tenant_credentials import TenantCredentials
from sweeper.actions.token import FixedToken, TokenSource
from sweeper.actions.url_template import API_URL_FIELD, VendorUrl
from sweeper.errors import TokenError
from sweeper.models import ActionCall, ActionResult, OutcomeClass

USER_AGENT: Final = f"sweeper/{__version__}"
#: Connections kept per host: a consumer may run a batch's calls on a few threads.
POOL_MAX_CONNECTIONS: Final = 10


def _refused(exc: CredentialError) -> ActionResult:
    """The outcome of a call whose credentials could not be had: nothing reached the API."""
    return ActionResult(
        outcome=exc.outcome, code=exc.code, retry_after_seconds=exc.retry_after_seconds
    )


class HttpAction:
    """Carry out a job with one HTTP call; see `sweeper.actions.Action`."""

    def __init__(
        self,
        config: HttpActionSpec,
        token: str | TokenSource | None = None,
        *,
        outcomes: OutcomeTable | None = None,
        credentials: Credentials | None = None,
        spans: CallSpans = no_spans,
        rehearsal: Rehearsal | None = None,
        reader: AnswerReader | None = None,
    ) -> None:
        """`token` is sent as a Bearer token, asked of its source on every call (a string: a
        fixed one); `credentials` any auth mode's (`HttpActionConfig.build` makes them from
        the policy). The caller says where they come from (never the environment). Each call
        is traced in a span of `spans`, by the URL's template (never its values). In a
        `rehearsal` (the local stack's only) every request goes there instead
        (`sweeper.actions.rehearsal`). With a `reader` (a limit's `learn`) each answer's
        statement of the vendor's limits is read and handed out on the result."""
        if isinstance(token, str):
            try:
                token = FixedToken(token) if token else None
            except TokenError as exc:
                raise ValueError("the bearer token must be a single line") from exc
        self._config = config
        self._outcomes = outcomes if outcomes is not None else outcomes_for(config)
        self._headers = {**config.headers, "User-Agent": USER_AGENT}
        if config.body is not None and not any(h.lower() == "content-type" for h in config.headers):
            self._headers["Content-Type"] = CONTENT_TYPES[config.body_encoding]
        self._rules = OutcomeRules(config.outcome_rules)
        self._reader = reader
        self._credentials: Credentials = NoCredentials()
        self._per_tenant: TenantCredentials | None = None
        if credentials is not None:
            self._credentials = credentials
        elif token is not None:
            self._credentials = SecretCredentials(token, bearer_header)
        self._lock = threading.Lock()
        self._pool: urllib3.PoolManager | None = None
        self._rehearsal = rehearsal
        self._url = VendorUrl(
            config.api_url, config.url_template, refuse_dot_segments=config.refuse_dot_segments
        )
        self._spans = spans
        #: api_url as `{api_url}` fills a body or the traced URL: cut once, not per call
        self._api_base = config.api_url.rstrip("/")
        self._traced_url = config.url_template.replace(API_URL_FIELD, self._api_base)

    def use(self, credentials: Credentials) -> None:
        """Authenticate with `credentials` from now on (set once, when the action is built)."""
        self._credentials = credentials

    def use_per_tenant(self, credentials: TenantCredentials) -> None:
        """Authenticate each job with its tenant's credentials (a secret per tenant)."""
        self._per_tenant = credentials

    def credentials_for(self, tenant_id: str) -> Credentials:
        """The credentials a job of `tenant_id` sends; CredentialError when it has none."""
        if self._per_tenant is None:
            return self._credentials
        return self._per_tenant.for_tenant(tenant_id)

    def __repr__(self) -> str:
        unset = isinstance(self._credentials, NoCredentials) and self._per_tenant is None
        auth = "none" if unset else "set"
        return f"HttpAction({self._config.method} {self._config.url_template!r}, auth={auth})"

    def body_for(self, job: ActionCall) -> bytes | None:
        """The job's body: the template filled by structure, as JSON or as a form."""
        if self._config.body is None:
            return None
        value_of = partial(field_value, job=job, api_url=self._api_base)
        return encode_body(self._config.body, value_of, self._config.body_encoding)

    @property
    def credentials(self) -> Credentials:
        return self._credentials

    def checked_url(self, job: ActionCall) -> str | None:
        """The URL to send (`sweeper.actions.url_template.VendorUrl.url_for`), or None when
        urllib3 could not send it as filled (an id that would climb or split a path).
        TemplateError when the job cannot fill it: a param missing or not a segment's value,
        a dot segment, a tenant id that is not a host label, an authority not api_url's."""
        return self._url.url_for(job.tenant_id, lambda name: field_value(name, job))

    def perform(self, job: ActionCall, timeout_seconds: float | None = None) -> ActionResult:
        """Send the call once and classify what came back; never raises for a status.

        An AUTH answer makes the credentials renew once past their cache (a secret re-read, an
        OAuth2 token fetched anew). When that changed them (rotated or expired since cached),
        the answer is TRANSIENT (`auth_token_renewed`): nothing happened at the vendor, and the
        job's next attempt, after the usual backoff, sends the new credential with the same
        idempotency key. It is not sent again at once: that second call would have no limiter
        slot of its own. Credentials that cannot be had count as their `CredentialError` says
        (a token endpoint that is down: TRANSIENT; one that refuses the client: AUTH).
        """
        if timeout_seconds is not None and timeout_seconds <= 0:
            return ActionResult(outcome=OutcomeClass.TRANSIENT, code="no_time_left")
        try:
            url = self.checked_url(job)
            body = self.body_for(job)
        except TemplateError as exc:
            return ActionResult(outcome=OutcomeClass.PERMANENT, code=exc.code)
        if url is None:
            return ActionResult(outcome=OutcomeClass.PERMANENT, code="bad_url")
        started = time.monotonic()
        try:
            credentials = self.credentials_for(job.tenant_id)
            presented = credentials.present(timeout_seconds)
        except CredentialError as exc:
            return _refused(exc)
        except TokenError as exc:
            return ActionResult(outcome=OutcomeClass.TRANSIENT, code=exc.code)
        if timeout_seconds is not None:
            # A token fetched first spent part of the budget: the call gets what is left.
            timeout_seconds -= time.monotonic() - started
            if timeout_seconds <= 0:
                return ActionResult(outcome=OutcomeClass.TRANSIENT, code="no_time_left")
        method = self._config.method
        # the span knows the URL by its template only: ids and params never reach a trace
        with self._spans(
            f"{job.policy} http {method}", method=method, url_template=self._traced_url
        ) as span:
            result = self._send(job, url, body, presented.headers, timeout_seconds)
            span.ended(result.code or "", result.status_code)
        if result.outcome is OutcomeClass.AUTH and presented.credential is not None:
            try:
                renewed = credentials.refresh(presented, timeout_seconds)
            except CredentialError as exc:
                return _refused(exc)
            if renewed:
                return ActionResult(
                    outcome=OutcomeClass.TRANSIENT,
                    status_code=result.status_code,
                    code="auth_token_renewed",
                )
        return result

    def _send(
        self,
        job: ActionCall,
        url: str,
        body: bytes | None,
        auth_headers: Mapping[str, str],
        timeout_seconds: float | None,
    ) -> ActionResult:
        headers = {**self._headers, **auth_headers, self._config.idempotency_header: job.key}
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
        try:
            response = self.pool_manager().urlopen(
                self._config.method,
                url,
                body=body,
                headers=headers,
                timeout=timeout,
                retries=False,
                redirect=False,
                preload_content=False,
            )
        except HTTPError as exc:
            outcome, code = self._outcomes.classify_error(exc)
            return ActionResult(outcome=outcome, code=code)
        sent_at = request_sent_at(response)
        try:
            status = response.status
            retry_after = parse_retry_after(response.headers.get("Retry-After"))
            vendor_header = self._config.retry_after_header
            if vendor_header and response.headers.get(vendor_header) is not None:
                # A vendor's own header is usually more precise than Retry-After's whole seconds.
                unit = 0.001 if self._config.retry_after_header_unit == "ms" else 1.0
                own = parse_retry_after(response.headers.get(vendor_header), unit_seconds=unit)
                if own is not None:
                    retry_after = own
            named = response.headers.get(self._config.limit_header or "") if status == 429 else None
            # only a value the policy maps is kept: the header is the vendor's text, not ours
            limit_value = named if named in self._config.limit_header_values else None
            # a rule sees the answer here and keeps only what it decides (no header, no body)
            ruled, reading = ruled_and_read(
                self._rules, self._reader, response, deadline, self._config.read_timeout_seconds
            )
        finally:
            # Read and drop the body so the connection can be reused; one not read whole by the
            # deadline is closed instead. The status and headers already decide the outcome.
            if not drop_body(response, deadline, self._config.read_timeout_seconds):
                response.close()
            response.release_conn()
        outcome = self._outcomes.classify_status(status, has_retry_after=retry_after is not None)
        code = f"http_{status}"
        if ruled is not None:
            outcome, code = ruled.outcome, ruled.code
            if ruled.retry_after_seconds is not None:  # its reset header, read as a wait
                retry_after = ruled.retry_after_seconds
        return ActionResult(
            outcome=outcome,
            status_code=status,
            code=code,
            retry_after_seconds=retry_after,
            limit_value=limit_value,
            request_sent_at=sent_at,
            reading=reading,
        )

    def warm(self, job: ActionCall, timeout_seconds: float | None = None) -> None:
        """Make sure the pool of the job's host holds an idle, connected connection, so the
        call's request leaves at its slot instead of first resolving the name, connecting and
        (https) shaking hands with the vendor. Sends no byte of a request and never raises:
        a warm that fails (refused, timed out) leaves the pool as it was, and the call meets
        the failure and is classified as ever. Takes at most the connect timeout, capped by
        `timeout_seconds`."""
        connect_seconds = self._config.connect_timeout_seconds
        if timeout_seconds is not None:
            connect_seconds = min(connect_seconds, timeout_seconds)
        if connect_seconds <= 0:
            return
        try:
            url = self.checked_url(job)
            if url is None:
                return
            pool = self.pool_manager().connection_from_url(url)
        except (TemplateError, HTTPError, ValueError):
            return  # the call itself answers for a URL it cannot send
        preconnect(pool, connect_seconds)

    def close(self) -> None:
        """Close pooled connections; the next call opens new ones."""
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.clear()

    def pool_manager(self) -> urllib3.PoolManager:
        """The action's connection pool (the OAuth2 token endpoint shares it)."""
        with self._lock:
            if self._pool is None:
                pool = pool_manager(self._rehearsal, maxsize=POOL_MAX_CONNECTIONS, retries=False)
                # its connections note when each request left (`_NotesSend`)
                pool.pool_classes_by_scheme = dict(NOTES_SEND_POOLS)
                self._pool = pool
            return self._pool

"""The `http` action kind: one HTTP call per job, classified into an outcome, never raised.

The kind's module (see sweeper.actions.base): its config (`HttpActionConfig`), its
implementation (`HttpAction`), its outcome mapping (`OutcomeTable`, `outcomes_for`), its grants
(read its token's secret) and network path (Secrets Manager's endpoint when it has a secret,
the vendor's port through NAT), and its plan defaults (none: a vendor's latency is measured).

The operation key travels in the idempotency header (`Idempotency-Key` unless the policy names
the vendor's own), so a retry of an attempt that may have landed (UNKNOWN) cannot act twice.
urllib3's own retries and redirects are off: retrying is sweeper's job (the ledger's attempt
budget, the shared rate limiter), not the client's, and no credential follows a redirect. The
URL (`sweeper.actions.url_template`: its scheme, host and port always api_url's) and the
optional body (`sweeper.actions.templates`, sent as JSON or a form:
`sweeper.actions.body_encoding`) are templates over the job: an id or a param fills one path
segment, query value, JSON value or form value, never more. Outcome rules
(`sweeper.actions.outcome_rules`) class an answer by a header or a JSON path before its
status. Authentication is `auth` (`sweeper.actions.http_auth`); each call is traced by its
template (`sweeper.actions.spans`).
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, replace
from functools import lru_cache, partial
from types import MappingProxyType
from typing import Any, Final, Literal, Self
from urllib.parse import urlsplit

import urllib3
from pydantic import Field, field_validator, model_validator
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

from sweeper import __version__
from sweeper.actions.base import (
    Action,
    ActionContext,
    ActionKind,
    AwsService,
    Grant,
    KindCheck,
    NetworkPath,
    OutcomeName,
    secret_read,
)
from sweeper.actions.body_encoding import (
    CONTENT_TYPES,
    BodyEncoding,
    check_form_template,
    encode_body,
)
from sweeper.actions.http_answer import ruled_outcome
from sweeper.actions.http_auth import (
    HEADER_NAME_PATTERN,
    BearerAuth,
    CredentialError,
    Credentials,
    HeaderAuth,
    HttpAuth,
    NoAuth,
    NoCredentials,
    OAuth2Auth,
    SecretCredentials,
    bearer_header,
    credentials_for,
)
from sweeper.actions.http_transport import (
    NOTES_SEND_POOLS,
    drop_body,
    preconnect,
    request_sent_at,
)
from sweeper.actions.outcome_rules import MAX_OUTCOME_RULES, OutcomeRule, OutcomeRules
from sweeper.actions.rehearsal import Rehearsal, pool_manager
from sweeper.actions.retry_after import parse_retry_after as parse_retry_after  # re-exported
from sweeper.actions.spans import CallSpans, no_spans
from sweeper.actions.templates import (
    TemplateError,
    check_body_template,
    field_value,
)
from sweeper.actions.tenant_credentials import TenantCredentials, TenantSecretReader
from sweeper.actions.token import FixedToken, SecretToken, TokenSource, checked
from sweeper.actions.url_template import (
    API_URL_FIELD,
    TENANT_HOST_FIELD,
    VendorUrl,
    parse_api_url,
    parse_url_template,
)
from sweeper.errors import TokenError
from sweeper.models import ActionCall, ActionResult, OutcomeClass

USER_AGENT: Final = f"sweeper/{__version__}"
#: Connections kept per host: a consumer may run a batch's calls on a few threads.
POOL_MAX_CONNECTIONS: Final = 10

DEFAULT_URL_TEMPLATE: Final = "{api_url}/v1/tenants/{tenant_id}/objects/{object_id}"
HTTPS_PORT: Final = 443
HTTP_PORT: Final = 80
_LOOPBACK_HOSTS: Final = frozenset({"localhost", "127.0.0.1", "::1"})
DEFAULT_IDEMPOTENCY_HEADER: Final = "Idempotency-Key"
#: Headers a policy may not set in `headers`: the transport's own, and the credential's (`auth`).
RESERVED_HEADERS: Final = frozenset(
    {"authorization", "host", "content-length", "transfer-encoding", "connection", "user-agent"}
)


class HttpActionConfig(ActionKind):
    """The `http` kind: method, URL and body templates, headers and auth; the operation key
    travels in `idempotency_header`."""

    kind: Literal["http"] = "http"
    method: Literal["DELETE", "POST", "PUT", "PATCH", "GET"] = "DELETE"
    #: The vendor. The built-in default names no real host (".invalid" never resolves): a
    #: policy names its vendor, and the local stack puts its simulator here.
    api_url: str = Field(default="https://api.invalid", pattern=r"^https?://")
    #: An `http://` api_url sends the bearer token in clear: refused unless this says so (the
    #: local stack and the tests' loopback vendors set it).
    allow_plain_http: bool = False
    #: Begins with `{api_url}`, then `/`, `?` or its end; fields fill path segments and query
    #: values only (`sweeper.actions.url_template`).
    url_template: str = DEFAULT_URL_TEMPLATE
    #: Refuse (`permanent`, `dot_segment`) a job whose id or param would put a `.` or `..`
    #: segment in the path, even percent-encoded: a proxy that decodes before routing climbs.
    refuse_dot_segments: bool = True
    connect_timeout_seconds: float = Field(default=2.0, gt=0, le=30)
    read_timeout_seconds: float = Field(default=10.0, gt=0, le=120)
    #: How the call authenticates (`sweeper.actions.http_auth`): none, bearer, header, basic or
    #: oauth2, each with its secret in Secrets Manager.
    auth: HttpAuth = NoAuth()
    #: The older spelling of `auth = {type = "bearer", secret_arn = ...}`, still accepted.
    auth_secret_arn: str | None = Field(
        default=None, description="Secrets Manager secret with the API token (Bearer)"
    )
    #: The header that carries the operation key (the vendor's own name for it, if it has one).
    idempotency_header: str = Field(default=DEFAULT_IDEMPOTENCY_HEADER, pattern=HEADER_NAME_PATTERN)
    #: Extra headers sent on every call, as they are (never a credential: that is `auth`).
    headers: dict[str, str] = Field(default_factory=dict)
    #: A JSON body (a TOML table or array): strings that are exactly one `{field}` are replaced
    #: by the field's JSON value; sent as `body_encoding` says. None: no body.
    body: dict[str, Any] | list[Any] | None = None
    #: How the body is sent: "json", or "form" (application/x-www-form-urlencoded, a nested
    #: table as Stripe's `metadata[key]`; `sweeper.actions.body_encoding`).
    body_encoding: BodyEncoding = "json"
    #: Overrides of the default classification, e.g. {"409": "absent", "423": "throttled"}.
    outcomes: dict[int, OutcomeName] = Field(default_factory=dict)
    #: Rules that class an answer by a header's value or a JSON path of its body, tried first
    #: (`sweeper.actions.outcome_rules`).
    outcome_rules: list[OutcomeRule] = Field(default_factory=list, max_length=MAX_OUTCOME_RULES)
    #: A vendor-specific rate-limit header read besides Retry-After, and its unit.
    retry_after_header: str | None = None
    retry_after_header_unit: Literal["s", "ms"] = "s"
    #: The response header that names the limit a 429 belongs to (e.g. `X-RateLimit-Scope`), and
    #: its values, each mapped to one of the policy's limit names (`store = "store"`). A 429
    #: whose header is missing or unmapped closes the narrowest limit the call holds.
    limit_header: str | None = Field(default=None, max_length=128)
    limit_header_values: dict[str, str] = Field(default_factory=dict, max_length=16)

    @model_validator(mode="after")
    def _plain_http_only_when_allowed(self) -> Self:
        if self.api_url.startswith("http://") and not self.allow_plain_http:
            raise ValueError(
                "api_url uses http://, which would send the API token in clear: use https://, "
                "or set allow_plain_http = true in [action] (a local vendor only)"
            )
        auth = self.effective_auth
        if (
            TENANT_HOST_FIELD in self.api_url
            and isinstance(auth, OAuth2Auth)
            and auth.token_url.startswith("{api_url}")
        ):
            raise ValueError(
                "auth.token_url cannot start with {api_url} when api_url names {tenant_id}: "
                "write the token endpoint's own https:// URL"
            )
        token_url = self.token_url or ""
        if token_url.startswith("http://") and not self.allow_plain_http:
            raise ValueError(
                "auth.token_url uses http://, which would send the client secret in clear: "
                "use https://, or set allow_plain_http = true in [action] (local only)"
            )
        return self

    @model_validator(mode="after")
    def _one_spelling_of_auth(self) -> Self:
        if self.auth_secret_arn is not None and not isinstance(self.auth, NoAuth):
            raise ValueError(
                "give either auth or auth_secret_arn (the older spelling of bearer auth)"
            )
        return self

    @model_validator(mode="after")
    def _headers_are_sendable(self) -> Self:
        reserved = RESERVED_HEADERS | {self.idempotency_header.lower()}
        if isinstance(self.effective_auth, HeaderAuth):
            reserved |= {self.effective_auth.header.lower()}
        for name, value in self.headers.items():
            if not re.fullmatch(HEADER_NAME_PATTERN, name):
                raise ValueError(f"header name {name!r} is not an HTTP token")
            if name.lower() in reserved:
                raise ValueError(
                    f"header {name!r} is set by sweeper (the idempotency key, the transport "
                    "or auth): leave it out of headers"
                )
            if any((ord(char) < 0x20 and char != "\t") or ord(char) == 0x7F for char in value):
                raise ValueError(f"header {name!r} holds a control character")
        return self

    @field_validator("body")
    @classmethod
    def _check_body(cls, value: dict[str, Any] | list[Any] | None) -> Any:
        problems = check_body_template(value) if value is not None else []
        if problems:
            raise ValueError("; ".join(problems))
        return value

    @model_validator(mode="after")
    def _form_body_is_a_form(self) -> Self:
        if self.body_encoding == "form" and self.body is not None:
            problems = check_form_template(self.body)
            if problems:
                raise ValueError("; ".join(problems))
        return self

    @property
    def effective_auth(self) -> HttpAuth:
        """`auth`, with the older `auth_secret_arn` read as bearer."""
        if self.auth_secret_arn is not None:
            return BearerAuth(secret_arn=self.auth_secret_arn)
        return self.auth

    @property
    def token_url(self) -> str | None:
        """The OAuth2 token endpoint, `{api_url}` filled; None for other auth modes."""
        auth = self.effective_auth
        if not isinstance(auth, OAuth2Auth):
            return None
        return auth.token_url.replace("{api_url}", self.api_url.rstrip("/"))

    @field_validator("outcomes")
    @classmethod
    def _statuses_are_http(cls, value: dict[int, str]) -> dict[int, str]:
        bad = sorted(status for status in value if not 100 <= status <= 599)
        if bad:
            raise ValueError(f"not HTTP statuses: {bad}")
        return value

    @field_validator("api_url")
    @classmethod
    def _check_api_url(cls, value: str) -> str:
        parse_api_url(value)
        return value

    @field_validator("url_template")
    @classmethod
    def _check_url_template(cls, value: str) -> str:
        parse_url_template(value)
        return value

    def build(self, context: ActionContext) -> Action:
        """The vendor call; its secrets are read per call through the Powertools cache
        (max_age), an OAuth2 token cached by the action itself."""
        return self._built(context)

    def _built(self, context: ActionContext) -> HttpAction:
        action = HttpAction(self, spans=context.spans, rehearsal=context.rehearsal)
        auth = self.effective_auth
        max_age = context.secret_max_age_seconds

        def built(auth: HttpAuth, reader: Any) -> Credentials:
            def secret(arn: str, parse: Any = checked) -> SecretToken:
                return SecretToken(arn, max_age, reader, parse=parse)

            return credentials_for(
                auth,
                api_url=self.api_url,
                secrets=secret,
                pool=action.pool_manager,
                connect_timeout_seconds=self.connect_timeout_seconds,
                read_timeout_seconds=self.read_timeout_seconds,
                user_agent=USER_AGENT,
            )

        template = auth.secret_template()
        if template is None:
            action.use(built(auth, context.secrets))
            return action
        action.use_per_tenant(
            TenantCredentials(
                template,
                lambda arn: built(
                    auth.model_copy(update={"secret_arn": arn}),
                    TenantSecretReader(context.secrets),
                ),
            )
        )
        return action

    @property
    def credentials_per_tenant(self) -> bool:
        return self.effective_auth.secret_template() is not None

    @property
    def limit_values(self) -> dict[str, str]:
        return self.limit_header_values

    def describe(self) -> str:
        url = self.url_template.replace("{api_url}", self.api_url.rstrip("/"))
        encoding = "JSON" if self.body_encoding == "json" else "form"
        body = f", a {encoding} body" if self.body is not None else ""
        return f"http {self.method} {url}{body}, auth {self.effective_auth.type}"

    def doctor_checks(self, context: ActionContext, timeout_seconds: float) -> list[KindCheck]:
        """Its credentials can be had: each secret read and understood, and for oauth2 a
        token issued by the token endpoint. The vendor itself is not called (a call would be
        an effect)."""
        auth = self.effective_auth
        if isinstance(auth, NoAuth):
            return []
        name = f"action auth ({auth.type})"
        if self.credentials_per_tenant:
            return [
                KindCheck(
                    name,
                    "warn",
                    "a secret per tenant ({tenant_id}): none is read without a tenant",
                    "sweeper smoke reads its sandbox tenant's secret and calls with it",
                )
            ]
        action = self._built(context)
        try:
            action.credentials.present(timeout_seconds)
        except CredentialError as exc:
            if exc.outcome in (OutcomeClass.TRANSIENT, OutcomeClass.THROTTLED):
                return [
                    KindCheck(
                        name,
                        "warn",
                        f"could not be verified from here: {exc.code}",
                        "check that the token endpoint answers from the consumer's network",
                    )
                ]
            return [KindCheck(name, "fail", f"refused: {exc.code}", _AUTH_FIX[auth.type])]
        except TokenError as exc:
            return [KindCheck(name, "fail", f"secret unusable: {exc.code}", _AUTH_FIX[auth.type])]
        finally:
            action.close()
        if isinstance(auth, OAuth2Auth):
            return [KindCheck(name, "ok", "the token endpoint issued a Bearer token")]
        return [KindCheck(name, "ok", "its secret is readable and well-formed")]

    def call_problem(self, job: ActionCall) -> str | None:
        action = HttpAction(self)
        try:
            if action.checked_url(job) is None:
                return "bad_url"
            action.body_for(job)
        except TemplateError as exc:
            return exc.code
        return None

    def grants(self) -> tuple[Grant, ...]:
        """Read the auth mode's secret, if it has one; the vendor itself needs no IAM."""
        secrets = self.effective_auth.secret_arns()
        return (secret_read(*secrets),) if secrets else ()

    def network_path(self) -> NetworkPath:
        """The vendor's port (and its token endpoint's) through NAT, and Secrets Manager's
        endpoint for the auth mode's secret."""
        ports = {_port(self.api_url)}
        if self.token_url is not None:
            ports.add(_port(self.token_url))
        secrets = self.effective_auth.secret_arns()
        return NetworkPath(
            aws_services=frozenset({AwsService.SECRETS_MANAGER}) if secrets else frozenset(),
            internet_ports=tuple(sorted(ports)),
        )

    @property
    def vendor_port(self) -> int:
        return _port(self.api_url)

    @property
    def call_seconds(self) -> float:
        return self.connect_timeout_seconds + self.read_timeout_seconds

    @property
    def scope_host(self) -> str:
        return _host(self.api_url)

    def synth_warnings(self) -> list[str]:
        api = urlsplit(self.api_url)
        if api.scheme != "https" or api.hostname in _LOOPBACK_HOSTS:
            return [
                f"action.api_url {self.api_url} is not a public HTTPS endpoint; the consumer "
                "will send its credentials there"
            ]
        return []

    def rehearsal_problem(self) -> str | None:
        """None: its transport sends every request to the rehearsal (its token's included)."""
        return None


#: What to do about credentials `sweeper doctor` found refused or unusable, by auth type.
_AUTH_FIX: Final = {
    "bearer": "put the API token, one line, in the secret auth.secret_arn names",
    "header": "put the API key, one line, in the secret auth.secret_arn names",
    "basic": 'put {"username": ..., "password": ...} in the secret auth.secret_arn names',
    "oauth2": (
        "check auth.token_url, scope and audience, and that the secret holds the client "
        'secret (or {"client_id": ..., "client_secret": ...})'
    ),
}


def _port(url: str) -> int:
    parts = urlsplit(url)
    return parts.port or (HTTPS_PORT if parts.scheme == "https" else HTTP_PORT)


@lru_cache(maxsize=64)
def _host(api_url: str) -> str:
    """The API's host name, parsed once per URL, not once per job."""
    return urlsplit(api_url).hostname or ""


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


def _refused(exc: CredentialError) -> ActionResult:
    """The outcome of a call whose credentials could not be had: nothing reached the API."""
    return ActionResult(
        outcome=exc.outcome, code=exc.code, retry_after_seconds=exc.retry_after_seconds
    )


class HttpAction:
    """Carry out a job with one HTTP call; see `sweeper.actions.Action`."""

    def __init__(
        self,
        config: HttpActionConfig,
        token: str | TokenSource | None = None,
        *,
        outcomes: OutcomeTable | None = None,
        credentials: Credentials | None = None,
        spans: CallSpans = no_spans,
        rehearsal: Rehearsal | None = None,
    ) -> None:
        """`token` is sent as a Bearer token, asked of its source on every call (a string: a
        fixed one); `credentials` any auth mode's (`HttpActionConfig.build` makes them from
        the policy). The caller says where they come from (never the environment). Each call
        is traced in a span of `spans`, by the URL's template (never its values). In a
        `rehearsal` (the local stack's only) every request goes there instead
        (`sweeper.actions.rehearsal`)."""
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
                own = parse_retry_after(response.headers.get(vendor_header))
                if own is not None:
                    scale = 0.001 if self._config.retry_after_header_unit == "ms" else 1.0
                    retry_after = own * scale
            named = response.headers.get(self._config.limit_header or "") if status == 429 else None
            # only a value the policy maps is kept: the header is the vendor's text, not ours
            limit_value = named if named in self._config.limit_header_values else None
            # a rule sees the answer here and keeps only what it decides (no header, no body)
            ruled = ruled_outcome(
                self._rules, response, deadline, self._config.read_timeout_seconds
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

"""The `http` kind's `[action]` table as a policy writes it: its fields, checked when read.

`HttpActionSpec` holds what a policy may say of its vendor call (method, api_url and the URL
and body templates, headers, auth, timeouts, outcome overrides and rules, the rate-limit
headers) and refuses what would be unsafe or unsendable: an `http://` api_url or token URL
unless allowed, a header sweeper sets itself, a body or URL template a job could break out of
(`sweeper.actions.url_template`, `sweeper.actions.templates`). It does nothing with them:
`sweeper.actions.http.HttpActionConfig` (the kind) builds the action
(`sweeper.actions.http_action.HttpAction`) and says what it needs from the stack.
"""

from __future__ import annotations

import re
from typing import Any, Final, Literal, Self

from pydantic import Field, field_validator, model_validator

from sweeper.actions.base import ActionKind, OutcomeName
from sweeper.actions.body_encoding import BodyEncoding, check_form_template
from sweeper.actions.http_auth import (
    HEADER_NAME_PATTERN,
    BearerAuth,
    HeaderAuth,
    HttpAuth,
    NoAuth,
    OAuth2Auth,
)
from sweeper.actions.outcome_rules import MAX_OUTCOME_RULES, OutcomeRule
from sweeper.actions.templates import TENANT_FIELD, check_body_template
from sweeper.actions.url_template import parse_api_url, parse_url_template

DEFAULT_URL_TEMPLATE: Final = "{api_url}/v1/tenants/{tenant_id}/objects/{object_id}"
DEFAULT_IDEMPOTENCY_HEADER: Final = "Idempotency-Key"
#: Headers a policy may not set in `headers`: the transport's own, and the credential's (`auth`).
RESERVED_HEADERS: Final = frozenset(
    {"authorization", "host", "content-length", "transfer-encoding", "connection", "user-agent"}
)


class HttpActionSpec(ActionKind):
    """The `http` kind's fields: method, URL and body templates, headers and auth; the
    operation key travels in `idempotency_header`. The kind itself is `HttpActionConfig`."""

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
            TENANT_FIELD in self.api_url
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

"""The `http` action kind: one HTTP call per job, classified into an outcome, never raised.

The kind's module (see sweeper.actions.base), in four rooms:
- `HttpActionSpec` (`sweeper.actions.http_spec`): its config as the policy writes it, checked;
- `HttpAction` (`sweeper.actions.http_action`): its implementation, one call per job;
- `OutcomeTable`, `outcomes_for` (`sweeper.actions.http_outcomes`): its outcome mapping;
- here, `HttpActionConfig`: the action it builds (its credentials from the policy's secrets),
  `sweeper doctor`'s checks of them, its grants (read its token's secret) and network path
  (Secrets Manager's endpoint when it has a secret, the vendor's port through NAT), and its
  plan defaults (none: a vendor's latency is measured).

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

from functools import lru_cache
from typing import Any, Final
from urllib.parse import urlsplit

from sweeper.actions.base import (
    Action,
    ActionContext,
    AwsService,
    Grant,
    KindCheck,
    NetworkPath,
    secret_read,
)
from sweeper.actions.http_action import USER_AGENT, HttpAction
from sweeper.actions.http_auth import (
    CredentialError,
    Credentials,
    HttpAuth,
    NoAuth,
    OAuth2Auth,
    credentials_for,
)
from sweeper.actions.http_spec import HttpActionSpec
from sweeper.actions.templates import TemplateError
from sweeper.actions.tenant_credentials import TenantCredentials, TenantSecretReader
from sweeper.actions.token import SecretToken, checked
from sweeper.actions.url_template import DEFAULT_PORTS
from sweeper.errors import TokenError
from sweeper.models import ActionCall, OutcomeClass

__all__ = ["HttpAction", "HttpActionConfig"]

_LOOPBACK_HOSTS: Final = frozenset({"localhost", "127.0.0.1", "::1"})


class HttpActionConfig(HttpActionSpec):
    """The `http` kind: its fields (`HttpActionSpec`), the action it builds (`HttpAction`),
    its credentials' doctor checks, its grants and network path."""

    def build(self, context: ActionContext) -> Action:
        """The vendor call; its secrets are read per call through the Powertools cache
        (max_age), an OAuth2 token cached by the action itself."""
        return self._built(context)

    def _built(self, context: ActionContext) -> HttpAction:
        action = HttpAction(
            self, spans=context.spans, rehearsal=context.rehearsal, reader=context.reader
        )
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
    """The URL's port, or its scheme's default; read at synth and plan, never per call."""
    parts = urlsplit(url)
    return parts.port or DEFAULT_PORTS.get(parts.scheme, DEFAULT_PORTS["http"])


@lru_cache(maxsize=64)
def _host(api_url: str) -> str:
    """The API's host name, parsed once per URL, not once per job."""
    return urlsplit(api_url).hostname or ""

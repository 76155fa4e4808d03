"""The `http` kind's deploy-time half (see sweeper_tools.deploy.base): its grants (read its
token's secret) and network path (Secrets Manager's endpoint when it has a secret, the vendor's
port through NAT), `sweeper doctor`'s checks of its credentials, `sweeper smoke`'s check that a
job renders, synth's warning about a vendor that is not public HTTPS."""

from __future__ import annotations

from typing import Final
from urllib.parse import urlsplit

from sweeper.actions.base import ActionContext
from sweeper.actions.http import HttpActionConfig
from sweeper.actions.http_action import HttpAction
from sweeper.actions.http_auth import CredentialError, NoAuth, OAuth2Auth
from sweeper.actions.templates import TemplateError
from sweeper.actions.url_template import DEFAULT_PORTS
from sweeper.errors import TokenError
from sweeper.models import ActionCall, OutcomeClass
from sweeper_tools.deploy.base import (
    AwsService,
    DeployKind,
    Grant,
    KindCheck,
    NetworkPath,
    secret_read,
)

_LOOPBACK_HOSTS: Final = frozenset({"localhost", "127.0.0.1", "::1"})

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


class HttpDeploy(DeployKind[HttpActionConfig]):
    """The `http` kind to the CDK app, `doctor`, `smoke` and the local stack."""

    def describe(self) -> str:
        config = self.config
        url = config.url_template.replace("{api_url}", config.api_url.rstrip("/"))
        encoding = "JSON" if config.body_encoding == "json" else "form"
        body = f", a {encoding} body" if config.body is not None else ""
        return f"http {config.method} {url}{body}, auth {config.effective_auth.type}"

    def doctor_checks(self, context: ActionContext, timeout_seconds: float) -> list[KindCheck]:
        """Its credentials can be had: each secret read and understood, and for oauth2 a
        token issued by the token endpoint. The vendor itself is not called (a call would be
        an effect)."""
        auth = self.config.effective_auth
        if isinstance(auth, NoAuth):
            return []
        name = f"action auth ({auth.type})"
        if self.config.credentials_per_tenant:
            return [
                KindCheck(
                    name,
                    "warn",
                    "a secret per tenant ({tenant_id}): none is read without a tenant",
                    "sweeper smoke reads its sandbox tenant's secret and calls with it",
                )
            ]
        action = self.config.build(context)
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
        action = HttpAction(self.config)
        try:
            if action.checked_url(job) is None:
                return "bad_url"
            action.body_for(job)
        except TemplateError as exc:
            return exc.code
        return None

    def grants(self) -> tuple[Grant, ...]:
        """Read the auth mode's secret, if it has one; the vendor itself needs no IAM."""
        secrets = self.config.effective_auth.secret_arns()
        return (secret_read(*secrets),) if secrets else ()

    def network_path(self) -> NetworkPath:
        """The vendor's port (and its token endpoint's) through NAT, and Secrets Manager's
        endpoint for the auth mode's secret."""
        ports = {_port(self.config.api_url)}
        if self.config.token_url is not None:
            ports.add(_port(self.config.token_url))
        secrets = self.config.effective_auth.secret_arns()
        return NetworkPath(
            aws_services=frozenset({AwsService.SECRETS_MANAGER}) if secrets else frozenset(),
            internet_ports=tuple(sorted(ports)),
        )

    def synth_warnings(self) -> list[str]:
        api = urlsplit(self.config.api_url)
        if api.scheme != "https" or api.hostname in _LOOPBACK_HOSTS:
            return [
                f"action.api_url {self.config.api_url} is not a public HTTPS endpoint; the "
                "consumer will send its credentials there"
            ]
        return []

    def rehearsal_problem(self) -> str | None:
        """None: its transport sends every request to the rehearsal (its token's included)."""
        return None


def _port(url: str) -> int:
    """The URL's port, or its scheme's default."""
    parts = urlsplit(url)
    return parts.port or DEFAULT_PORTS.get(parts.scheme, DEFAULT_PORTS["http"])

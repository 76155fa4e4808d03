"""Credentials per tenant: an auth mode whose secret is a template over the tenant
(`sweeper.actions.secret_template`), read and cached per tenant.

Each tenant gets the auth mode's own credentials (`http_auth.credentials_for`) over its own
secret: a bearer token or API key per store, a login per account, an OAuth2 client per tenant
with its access token cached for that tenant only. At most `MAX_TENANTS_CACHED` tenants' are
kept (least recently used dropped first), secret values and tokens included: a tenant's secret
is read through Powertools past its (unbounded) cache and kept here for `max_age` instead.

A tenant whose secret is missing, refused or unusable fails alone: its calls count as `auth`
with a code (`secret_missing`, `secret_denied`, `basic_secret_invalid`, ...), which closes the
job's scope, the tenant's (a policy with a secret per tenant must key its scope by the tenant:
`sweeper.config.policy`). A tenant id that cannot be part of a secret's name is `permanent`
(`tenant_secret_name`): no secret is read and no call made.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any, Final

from aws_lambda_powertools.utilities.parameters import SecretsProvider
from aws_lambda_powertools.utilities.parameters.exceptions import GetParameterError

from sweeper.actions.http_auth import CredentialError, Credentials, Presented
from sweeper.actions.secret_template import SecretTemplate
from sweeper.errors import TokenError
from sweeper.models import OutcomeClass

#: Tenants whose credentials (secret, OAuth2 token) an environment keeps at once.
MAX_TENANTS_CACHED: Final = 256
#: Secrets Manager's error codes, and what they say of a tenant's secret.
_READ_FAULTS: Final = {
    "ResourceNotFoundException": "secret_missing",
    "AccessDeniedException": "secret_denied",
    "DecryptionFailure": "secret_denied",
    "InvalidRequestException": "secret_missing",  # scheduled for deletion
}
#: Codes that are the tenant's secret's fault (missing, refused, not what the mode needs):
#: its calls are `auth`, not a transient failure of Secrets Manager.
TENANT_FAULTS: Final = frozenset(
    {
        *_READ_FAULTS.values(),
        "token_invalid",
        "basic_secret_invalid",
        "oauth2_secret_invalid",
    }
)


class TenantSecretReader:
    """One tenant's secret, read through Powertools with no cache of its own (max_age 0) and
    kept here until `max_age` passes: it goes when its tenant's credentials are dropped.
    A read that fails raises TokenError with the code of why (`_READ_FAULTS`)."""

    def __init__(
        self, provider: SecretsProvider, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._provider = provider
        self._clock = clock
        self._value: Any = None
        self._until = 0.0

    def get(self, name: str, max_age: int = 0, force_fetch: bool = False) -> Any:
        if not force_fetch and self._value is not None and self._clock() < self._until:
            return self._value
        try:
            value = self._provider.get(name, max_age=0, force_fetch=True)
        except GetParameterError as exc:
            raise TokenError(_read_fault(exc), "the tenant's secret cannot be read") from exc
        self._value, self._until = value, self._clock() + max_age
        return value


def _read_fault(exc: GetParameterError) -> str:
    """The code of a failed read: Powertools keeps the service's error as the context."""
    cause = exc.__cause__ or exc.__context__
    response = getattr(cause, "response", None)
    code = response.get("Error", {}).get("Code") if isinstance(response, dict) else None
    return _READ_FAULTS.get(str(code), "token_unavailable")


class _TenantFaults:
    """A tenant's credentials, their secret's faults counted as `auth`."""

    def __init__(self, inner: Credentials) -> None:
        self._inner = inner

    def present(self, timeout_seconds: float | None) -> Presented:
        try:
            return self._inner.present(timeout_seconds)
        except TokenError as exc:
            if exc.code in TENANT_FAULTS:
                raise CredentialError(exc.code, str(exc), OutcomeClass.AUTH) from exc
            raise

    def refresh(self, sent: Presented, timeout_seconds: float | None) -> bool:
        return self._inner.refresh(sent, timeout_seconds)


class TenantCredentials:
    """The credentials of each tenant, built on first use from its secret's ARN and kept for
    the `MAX_TENANTS_CACHED` most recently used tenants. Shared by a batch's threads."""

    def __init__(self, template: SecretTemplate, build: Callable[[str], Credentials]) -> None:
        self._template = template
        self._build = build
        self._lock = threading.Lock()
        self._cached: OrderedDict[str, Credentials] = OrderedDict()

    def for_tenant(self, tenant_id: str) -> Credentials:
        """The tenant's credentials; CredentialError (permanent) when its id cannot name a
        secret."""
        arn = self._template.arn_for(tenant_id)
        if arn is None:
            raise CredentialError(
                "tenant_secret_name",
                "the tenant id cannot be part of a secret's name",
                OutcomeClass.PERMANENT,
            )
        with self._lock:
            credentials = self._cached.get(tenant_id)
            if credentials is not None:
                self._cached.move_to_end(tenant_id)
                return credentials
            credentials = _TenantFaults(self._build(arn))
            self._cached[tenant_id] = credentials
            while len(self._cached) > MAX_TENANTS_CACHED:
                self._cached.popitem(last=False)
            return credentials

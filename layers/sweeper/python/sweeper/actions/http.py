"""The `http` action kind: one HTTP call per job, classified into an outcome, never raised.

The kind's module (see sweeper.actions.base), in four rooms:
- `HttpActionSpec` (`sweeper.actions.http_spec`): its config as the policy writes it, checked;
- `HttpAction` (`sweeper.actions.http_action`): its implementation, one call per job;
- `OutcomeTable`, `outcomes_for` (`sweeper.actions.http_outcomes`): its outcome mapping;
- here, `HttpActionConfig`: the action it builds (its credentials from the policy's secrets)
  and its plan defaults (none: a vendor's latency is measured). Its grants, network path and
  doctor checks are its deploy-time provider (`sweeper_tools.deploy.http`).

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
from typing import Any
from urllib.parse import urlsplit

from sweeper.actions.base import (
    ActionContext,
)
from sweeper.actions.http_action import USER_AGENT, HttpAction
from sweeper.actions.http_auth import (
    Credentials,
    HttpAuth,
    credentials_for,
)
from sweeper.actions.http_spec import HttpActionSpec
from sweeper.actions.tenant_credentials import TenantCredentials, TenantSecretReader
from sweeper.actions.token import SecretToken, checked

__all__ = ["HttpAction", "HttpActionConfig"]


class HttpActionConfig(HttpActionSpec):
    """The `http` kind: its fields (`HttpActionSpec`) and the action it builds
    (`HttpAction`)."""

    def build(self, context: ActionContext) -> HttpAction:
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

    @property
    def call_seconds(self) -> float:
        return self.connect_timeout_seconds + self.read_timeout_seconds

    @property
    def scope_host(self) -> str:
        return _host(self.api_url)


@lru_cache(maxsize=64)
def _host(api_url: str) -> str:
    """The API's host name, parsed once per URL, not once per job."""
    return urlsplit(api_url).hostname or ""

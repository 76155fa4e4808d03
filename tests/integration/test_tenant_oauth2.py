"""An OAuth2 client per tenant (issue 41, point 2): each tenant's client secret is its own
secret (`secret_arn` names `{tenant_id}`), and its access token is fetched and cached for that
tenant alone; a tenant whose client is refused fails alone."""

from __future__ import annotations

import json

import pytest

from sweeper.config import HttpActionConfig
from sweeper.models import ActionCall, OutcomeClass, operation_key
from tests.integration.test_http_kind import Secrets, Server, build, secrets, server

pytestmark = pytest.mark.integration
__all__ = ["secrets", "server"]  # the fixtures this module uses


def _job(tenant_id: str) -> ActionCall:
    key = operation_key("payments", tenant_id, "o1", 1)
    return ActionCall(
        key=key,
        idempotency_key=key,
        policy="payments",
        policy_version=1,
        tenant_id=tenant_id,
        object_id="o1",
        scope=f"payments:{tenant_id}",
        attempt=0,
        batch_id="b1",
    )


def _template(secrets: Secrets, path: str, clients: dict[str, tuple[str, str]]) -> str:
    """A secret per tenant under `path`, each a client; the template naming them."""
    arn = ""
    for tenant, (client_id, client_secret) in clients.items():
        value = json.dumps({"client_id": client_id, "client_secret": client_secret})
        arn = secrets.client.create_secret(Name=f"{path}/{tenant}", SecretString=value)["ARN"]
    return arn.split(":secret:", 1)[0] + f":secret:{path}/{{tenant_id}}"


def test_each_tenant_gets_and_keeps_its_own_token(
    server: Server, secrets: Secrets, unique_name: str
) -> None:
    # Given two tenants' clients (the endpoint accepts both), and a third's it refuses
    clients = {"t1": ("client-1", "cs-1"), "t2": ("client-2", "cs-1"), "t3": ("client-3", "no")}
    template = _template(secrets, f"{unique_name}/oauth", clients)
    config = HttpActionConfig(
        api_url=server.url,
        allow_plain_http=True,
        auth={"type": "oauth2", "token_url": "{api_url}/oauth/token", "secret_arn": template},
    )
    action = build(config, secrets)
    # When each of the first two calls three times
    outcomes = [action.perform(_job(t)).outcome for _ in range(3) for t in ("t1", "t2")]
    # Then each fetched one token with its own client, and sent it on each of its calls
    assert outcomes == [OutcomeClass.ACCEPTED] * 6
    assert [form["client_id"] for form in server.token_requests] == [["client-1"], ["client-2"]]
    sent = [call.headers["Authorization"] for call in server.api_calls()]
    assert sent == ["Bearer tok-1", "Bearer tok-2"] * 3
    # And the third, refused by the token endpoint, is auth and sends nothing; the others go on
    refused = action.perform(_job("t3"))
    assert (refused.outcome, refused.code) == (OutcomeClass.AUTH, "oauth2_http_401")
    assert action.perform(_job("t1")).outcome is OutcomeClass.ACCEPTED
    assert len(server.api_calls()) == 7

"""A secret per tenant (issue 41, point 2): `secret_arn` as a template over the job's tenant,
checked at load, granted on its fixed path only, read per tenant into a bounded cache; a tenant
whose secret cannot be had fails alone, as `auth`, and only a tenant-keyed scope may hold it."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
from aws_lambda_powertools.utilities.parameters import SecretsProvider
from aws_lambda_powertools.utilities.parameters.base import BaseProvider
from botocore.exceptions import ClientError
from pydantic import ValidationError

from sweeper.actions import tenant_credentials
from sweeper.actions.base import ActionContext
from sweeper.actions.http import HttpAction
from sweeper.actions.secret_template import parse_secret_template
from sweeper.config import HttpActionConfig, Policy
from sweeper.models import OutcomeClass
from sweeper_tools.deploy import deploy_for
from tests.unit.test_url_authority import job_for

ACCOUNT = "arn:aws:secretsmanager:eu-west-1:111122223333:secret:"
TEMPLATE = f"{ACCOUNT}sweeper/helpdesk/{{tenant_id}}"


class Secrets(SecretsProvider):
    """Secrets Manager as Powertools reads it: a missing name and a refused one answer as the
    service does (ClientError, wrapped by Powertools into GetParameterError)."""

    def __init__(self, values: dict[str, str], denied: frozenset[str] = frozenset()) -> None:
        BaseProvider.__init__(self)  # type: ignore[no-untyped-call]  # the cache, no client
        self.values = values
        self.denied = denied
        self.reads: list[str] = []

    def _get(self, name: str, **sdk_options: Any) -> str:
        self.reads.append(name)
        if name in self.denied:
            raise _client_error("AccessDeniedException")
        if name not in self.values:
            raise _client_error("ResourceNotFoundException")
        return self.values[name]


def _client_error(code: str) -> ClientError:
    return ClientError({"Error": {"Code": code, "Message": "no"}}, "GetSecretValue")


def _basic(username: str) -> str:
    return json.dumps({"username": username, "password": f"pw-{username}"})


def _built(secrets: Secrets, auth: dict[str, Any] | None = None) -> HttpAction:
    config = HttpActionConfig(
        api_url="https://{tenant_id}.helpdesk.example",
        url_template="{api_url}/api/v2/tickets/{object_id}.json",
        auth=auth or {"type": "basic", "secret_arn": TEMPLATE},
    )
    action = config.build(ActionContext(secrets=secrets, secret_max_age_seconds=300))
    assert isinstance(action, HttpAction)
    return action


def _arn(tenant: str) -> str:
    return f"{ACCOUNT}sweeper/helpdesk/{tenant}"


def test_a_secret_template_with_the_tenant_in_the_names_last_part_is_accepted() -> None:
    config = HttpActionConfig(auth={"type": "bearer", "secret_arn": TEMPLATE})
    assert config.effective_auth.secret_arns() == (TEMPLATE,)
    assert parse_secret_template(TEMPLATE).arn_for("acme") == _arn("acme")


@pytest.mark.parametrize(
    ("arn", "problem"),
    [
        ("sweeper/helpdesk/{tenant_id}", "must be a Secrets Manager ARN"),
        (f"{ACCOUNT}sweeper/{{tenant_id}}/token", "last part of the secret's name"),
        (f"{ACCOUNT}{{tenant_id}}", "after a fixed path"),
        (f"{ACCOUNT}sweeper/helpdesk/{{object_id}}", "no other field"),
        (f"{ACCOUNT}sweeper/helpdesk/{{tenant_id}}-{{tenant_id}}", "once"),
        (f"{ACCOUNT}sweeper/helpdesk/{{tenant_id}}}}", "once"),
        (f"{ACCOUNT}sweeper/help desk/{{tenant_id}}", "only letters, digits"),
        (f"{ACCOUNT}sweeper/helpdesk/{{tenant_id}}-AbCdEf", "random suffix"),
    ],
)
def test_a_secret_template_breaking_a_rule_is_refused_at_load(arn: str, problem: str) -> None:
    with pytest.raises(ValidationError, match=problem):
        HttpActionConfig(auth={"type": "basic", "secret_arn": arn})
    with pytest.raises(ValidationError, match=problem):
        HttpActionConfig(auth_secret_arn=arn)


@pytest.mark.parametrize(
    "tenant", ["", "a/b", "../x", "acme*", "ac?me", "acme-AbCdEf", "x" * 129, "ac me", "é"]
)
def test_a_tenant_that_is_not_a_safe_name_fragment_has_no_secret(tenant: str) -> None:
    assert parse_secret_template(TEMPLATE).arn_for(tenant) is None


def test_a_secret_template_is_granted_on_its_fixed_path_only() -> None:
    (grant,) = deploy_for(
        HttpActionConfig(auth={"type": "bearer", "secret_arn": TEMPLATE})
    ).grants()
    assert grant.actions == ("secretsmanager:GetSecretValue",)
    assert grant.resources == (f"{ACCOUNT}sweeper/helpdesk/*",)
    assert grant.wildcard_reason


def test_a_per_tenant_secret_needs_a_scope_keyed_by_the_tenant() -> None:
    action = {
        "api_url": "https://api.example.com",
        "auth": {"type": "basic", "secret_arn": TEMPLATE},
    }
    with pytest.raises(ValidationError, match=r"scope .*\{tenant_id\}"):
        Policy.model_validate({"name": "helpdesk", "action": action})
    with pytest.raises(ValidationError, match=r"scope .*\{tenant_id\}"):
        Policy.model_validate(
            {"name": "helpdesk", "action": action, "scope": {"template": "{host}"}}
        )
    Policy.model_validate({"name": "helpdesk", "action": action, "scope": {"kind": "tenant"}})


@pytest.mark.parametrize(
    ("auth", "header", "value"),
    [
        ({"type": "basic"}, "Authorization", lambda t: "Basic " + _b64(f"{t}:pw-{t}")),
        ({"type": "bearer"}, "Authorization", lambda t: f"Bearer token-{t}"),
        ({"type": "header", "header": "X-Api-Key"}, "X-Api-Key", lambda t: f"token-{t}"),
    ],
)
def test_each_tenant_presents_its_own_secret(auth: dict[str, Any], header: str, value: Any) -> None:
    # Given a secret per tenant, as each mode reads it
    basic = auth["type"] == "basic"
    secrets = Secrets({_arn(t): _basic(t) if basic else f"token-{t}" for t in ("acme", "globex")})
    action = _built(secrets, {**auth, "secret_arn": TEMPLATE})
    # Then each tenant's credentials carry its own secret, read once for many calls
    for _ in range(3):
        for tenant in ("acme", "globex"):
            presented = action.credentials_for(tenant).present(None)
            assert presented.headers[header] == value(tenant)
    assert sorted(secrets.reads) == [_arn("acme"), _arn("globex")]


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


@pytest.mark.parametrize(
    ("denied", "code"),
    [(frozenset({_arn("acme")}), "secret_denied"), (frozenset(), "secret_missing")],
)
def test_a_tenant_whose_secret_cannot_be_had_fails_alone_as_auth(
    denied: frozenset[str], code: str
) -> None:
    # Given globex's secret, and acme's missing or refused
    values = {_arn("globex"): _basic("globex")}
    if denied:
        values[_arn("acme")] = _basic("acme")
    action = _built(Secrets(values, denied))
    # When acme's job is carried out
    result = action.perform(job_for(tenant_id="acme"))
    # Then it is auth, with a code naming why, and nothing was sent
    assert (result.outcome, result.code, result.status_code) == (OutcomeClass.AUTH, code, None)
    # And globex's credentials are had as ever
    assert (
        action.credentials_for("globex").present(None).headers["Authorization"].startswith("Basic ")
    )


def test_a_tenant_id_unfit_for_a_secret_name_is_refused_permanent_without_a_read() -> None:
    secrets = Secrets({})
    action = _built(secrets)
    result = action.perform(job_for(tenant_id="acme-AbCdEf"))
    assert (result.outcome, result.code) == (OutcomeClass.PERMANENT, "tenant_secret_name")
    assert secrets.reads == []


def test_the_per_tenant_cache_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    # Given room for two tenants' credentials
    monkeypatch.setattr(tenant_credentials, "MAX_TENANTS_CACHED", 2)
    secrets = Secrets({_arn(t): _basic(t) for t in ("a", "b", "c")})
    action = _built(secrets)
    # When three tenants call, then the first again
    for tenant in ("a", "b", "a", "c", "b"):
        action.credentials_for(tenant).present(None)
    # Then the least recently used was dropped (b), and read again when it came back
    assert secrets.reads == [_arn("a"), _arn("b"), _arn("c"), _arn("b")]


def test_doctor_reads_no_secret_without_a_tenant_and_says_so() -> None:
    secrets = Secrets({})
    config = HttpActionConfig(auth={"type": "basic", "secret_arn": TEMPLATE})
    context = ActionContext(secrets=secrets, secret_max_age_seconds=300)
    (check,) = deploy_for(config).doctor_checks(context, 1.0)
    assert (check.status, secrets.reads) == ("warn", [])
    assert "per tenant" in check.detail

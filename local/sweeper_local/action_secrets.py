"""The action's secrets on the local stack, made in the AWS emulator's Secrets Manager.

A deployed policy names secrets that exist in its account; locally none does. For every secret
a policy's action reads, the local stack creates one in moto and points the policy at it (its
calls reach the simulator by the rehearsal). Against the simulator the values are made up and the
simulator is told to accept them (an OAuth2 client is registered with it, a header's API key
with its marketplace; a bearer or basic secret is random: the delete contract does not check
it). Against an outside vendor (`--api-url`) the values are the user's: `SWEEPER_LOCAL_SECRETS`
holds a JSON object from each secret ARN the policy file names to its value (a string, or an
object stored as JSON). A secret per tenant (`.../{tenant_id}`) is given tenant by tenant, each
under its filled ARN; against the simulator, every tenant shares one made-up value.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Mapping
from typing import Any, Final

from sweeper.actions.http import HttpActionConfig
from sweeper.actions.http_auth import BasicAuth, HeaderAuth, OAuth2Auth
from sweeper.actions.secret_template import SecretTemplate
from sweeper.actions.templates import TENANT_FIELD
from sweeper.config import Policy
from sweeper_local.errors import LocalStackError
from sweeper_local.vendor import VendorSimulator

#: The environment variable with an outside vendor's secret values (never a command-line flag:
#: a command line is visible to every user of the machine).
LOCAL_SECRETS_ENV: Final = "SWEEPER_LOCAL_SECRETS"


def parse_local_secrets(text: str | None) -> dict[str, Any]:
    """The values of `SWEEPER_LOCAL_SECRETS` (empty when unset); LocalStackError, without
    echoing anything of it, when it is not a JSON object."""
    if not text:
        return {}
    try:
        value = json.loads(text)
    except ValueError:
        value = None
    if not isinstance(value, dict):
        raise LocalStackError(
            f'{LOCAL_SECRETS_ENV} is not a JSON object: give {{"<secret arn>": <value>, ...}}'
        )
    return value


def missing_local_secrets(policies: list[Policy], given: Mapping[str, Any]) -> list[str]:
    """The secret ARNs the policies read that `given` has no value for (an outside vendor);
    a template over the tenant is missing when no tenant's is given."""
    missing: list[str] = []
    for policy in policies:
        if not isinstance(policy.action, HttpActionConfig):
            continue
        auth = policy.action.effective_auth
        template = auth.secret_template()
        for arn in auth.secret_arns():
            if template is not None:
                if not _tenant_values(template, given):
                    missing.append(arn)
            elif arn not in given:
                missing.append(arn)
    return missing


def _tenant_values(template: SecretTemplate, given: Mapping[str, Any]) -> dict[str, Any]:
    """Each tenant's value in `given`, keyed by the tenant."""
    tenants = {arn: _tenant_of(template, arn) for arn in given}
    return {tenant: given[arn] for arn, tenant in tenants.items() if tenant is not None}


def _tenant_of(template: SecretTemplate, arn: str) -> str | None:
    """The tenant whose secret `arn` is (the inverse of `template.arn_for`), else None."""
    if not (arn.startswith(template.before) and arn.endswith(template.after)):
        return None
    tenant = arn[len(template.before) : len(arn) - len(template.after)]
    return tenant if template.arn_for(tenant) == arn else None


def _stored(raw: Any) -> str:
    return raw if isinstance(raw, str) else json.dumps(raw)


def _put(secretsmanager: Any, name: str, value: str) -> str:
    """The local secret `name` holding `value` (made, or updated); its ARN."""
    try:
        return str(secretsmanager.create_secret(Name=name, SecretString=value)["ARN"])
    except secretsmanager.exceptions.ResourceExistsException:
        return str(secretsmanager.put_secret_value(SecretId=name, SecretString=value)["ARN"])


def _local_template(
    secretsmanager: Any, template: SecretTemplate, prefix: str, policy: str, values: dict[str, Any]
) -> str:
    """Each tenant's value made under the stack's prefix; the template naming them there."""
    name_before = _name(prefix, policy, template.before)
    local_before = ""
    for tenant, raw in values.items():
        arn = _put(secretsmanager, f"{name_before}{tenant}{template.after}", _stored(raw))
        local_before = arn.split(":secret:", 1)[0] + ":secret:" + name_before
    return f"{local_before}{TENANT_FIELD}{template.after}"


def _name(prefix: str, policy: str, arn: str) -> str:
    """The local secret's name: the ARN's own name, under the stack's prefix and the policy."""
    return f"{prefix}/{policy}/{arn.rsplit(':', 1)[-1]}"


def _made_up(policy: Policy, vendor: VendorSimulator) -> str:
    """A value the simulator accepts for the policy's auth mode."""
    assert isinstance(policy.action, HttpActionConfig)
    auth = policy.action.effective_auth
    if isinstance(auth, OAuth2Auth):
        client_id = auth.client_id or f"{policy.name}-local"
        client_secret = secrets.token_hex(16)
        vendor.payments.add_client(client_id, client_secret)
        return json.dumps({"client_id": client_id, "client_secret": client_secret})
    if isinstance(auth, BasicAuth):
        username, password = f"{policy.name}-local", secrets.token_hex(16)
        if auth.secret_template() is not None:
            # every tenant shares this login here: the help desk takes it at every account
            vendor.helpdesk.add_shared_login(username, password)
        return json.dumps({"username": username, "password": password})
    value = secrets.token_hex(16)
    if isinstance(auth, HeaderAuth):
        vendor.listings.add_api_key(value)  # the marketplace checks its API key
    return value


def with_local_secrets(
    secretsmanager: Any,  # a secretsmanager client (no stubs are installed for it)
    policy: Policy,
    *,
    prefix: str,
    vendor: VendorSimulator | None,
    given: Mapping[str, Any],
) -> Policy:
    """`policy` with its action's secret made in the local Secrets Manager and named by it.

    `vendor` is the simulator the policy is pointed at, or None for an outside vendor, whose
    values come from `given` (a missing one is a LocalStackError naming the ARN).
    """
    action = policy.action
    if not isinstance(action, HttpActionConfig):
        return policy
    arns = action.effective_auth.secret_arns()
    if not arns:
        return policy
    (arn,) = arns  # every http auth mode reads one secret
    template = action.effective_auth.secret_template()
    tenants = _tenant_values(template, given) if template is not None else {}
    if vendor is not None:
        value = _made_up(policy, vendor)
    elif template is not None and tenants:
        local_arn = _local_template(secretsmanager, template, prefix, policy.name, tenants)
        return _pointed(policy, action, local_arn)
    elif arn in given:
        value = _stored(given[arn])
    else:
        raise LocalStackError(
            f"policy {policy.name}: no local value for its secret {arn}; with --api-url, set "
            f"{LOCAL_SECRETS_ENV} to a JSON object naming it"
        )
    name = _name(prefix, policy.name, arn.replace(TENANT_FIELD, "every-tenant"))
    return _pointed(policy, action, _put(secretsmanager, name, value))


def _pointed(policy: Policy, action: HttpActionConfig, local_arn: str) -> Policy:
    """`policy` with its action's secret (or template) at `local_arn`."""
    if action.auth_secret_arn is not None:
        local_action = action.model_copy(update={"auth_secret_arn": local_arn})
    else:
        auth = action.auth.model_copy(update={"secret_arn": local_arn})
        local_action = action.model_copy(update={"auth": auth})
    return policy.model_copy(update={"action": local_action})

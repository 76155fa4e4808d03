"""The action's secrets on the local stack: made in the AWS emulator, the policy pointed at them."""

from __future__ import annotations

import json
import secrets
from pathlib import Path
from urllib.parse import urlencode

import pytest
from click.testing import CliRunner

from sweeper.actions.http import HttpActionConfig
from sweeper.actions.http_auth import OAuth2Auth
from sweeper.config import Policy
from sweeper_cli.base import main
from sweeper_local.action_secrets import (
    LOCAL_SECRETS_ENV,
    missing_local_secrets,
    parse_local_secrets,
    with_local_secrets,
)
from sweeper_local.aws import LocalAws
from sweeper_local.errors import LocalStackError
from sweeper_local.vendor import VendorSimulator
from sweeper_tools.policy_file import load_config

pytestmark = pytest.mark.integration

EXAMPLE = Path(__file__).parents[2] / "docs" / "examples" / "payments.toml"


def _payments() -> Policy:
    return load_config(EXAMPLE).policies[0]


def _secret_arn(policy: Policy) -> str:
    assert isinstance(policy.action, HttpActionConfig)
    assert isinstance(policy.action.auth, OAuth2Auth)
    return policy.action.auth.secret_arn


def _prefix() -> str:
    return f"test-{secrets.token_hex(4)}"  # one moto serves the whole session


def test_against_the_simulator_the_oauth2_client_is_made_up_stored_and_registered(
    local_aws: LocalAws,
) -> None:
    # Given the payments example and the vendor simulator
    policy = _payments()
    sm = local_aws.secretsmanager()
    with VendorSimulator() as vendor:
        # When the local stack makes its secrets
        local = with_local_secrets(sm, policy, prefix=_prefix(), vendor=vendor, given={})
        # Then the policy names a secret that exists locally, holding a client the simulator
        # accepts at its token endpoint
        arn = _secret_arn(local)
        assert arn != _secret_arn(policy)
        value = json.loads(sm.get_secret_value(SecretId=arn)["SecretString"])
        form = urlencode({"grant_type": "client_credentials", **value}).encode()
        assert vendor.payments.issue_token(form).status == 200
        assert vendor.payments_audit().tokens_issued == 1
    assert local.action.model_dump(exclude={"auth"}) == policy.action.model_dump(exclude={"auth"})


def test_against_an_outside_vendor_the_users_value_is_stored_under_the_policys_arn(
    local_aws: LocalAws,
) -> None:
    policy = _payments()
    sm = local_aws.secretsmanager()
    given = {_secret_arn(policy): {"client_id": "mine", "client_secret": "theirs"}}
    local = with_local_secrets(sm, policy, prefix=_prefix(), vendor=None, given=given)
    stored = sm.get_secret_value(SecretId=_secret_arn(local))["SecretString"]
    assert json.loads(stored) == {"client_id": "mine", "client_secret": "theirs"}


def test_against_an_outside_vendor_a_missing_value_is_refused_naming_the_arn(
    local_aws: LocalAws,
) -> None:
    policy = _payments()
    with pytest.raises(LocalStackError, match=LOCAL_SECRETS_ENV) as caught:
        with_local_secrets(
            local_aws.secretsmanager(), policy, prefix=_prefix(), vendor=None, given={}
        )
    assert _secret_arn(policy) in str(caught.value)
    assert missing_local_secrets([policy], {}) == [_secret_arn(policy)]


def test_local_secrets_that_are_not_a_json_object_are_refused_without_echo() -> None:
    with pytest.raises(LocalStackError) as caught:
        parse_local_secrets('["hunter2"]')
    assert "hunter2" not in str(caught.value)
    assert parse_local_secrets(None) == {}


def test_local_up_with_an_outside_vendor_and_no_secret_values_fails_in_one_line(
    tmp_path: Path,
) -> None:
    result = CliRunner().invoke(
        main,
        [
            "local",
            "up",
            "--config",
            str(EXAMPLE),
            "--local-file",
            str(tmp_path / "local.json"),
            "--api-url",
            "https://payments.example.net",
        ],
        env={LOCAL_SECRETS_ENV: ""},
    )
    assert result.exit_code != 0
    assert LOCAL_SECRETS_ENV in result.output
    assert _secret_arn(_payments()) in result.output
    assert "Traceback" not in result.output
    assert not (tmp_path / "local.json").exists()


HELPDESK = Path(__file__).parents[2] / "docs" / "examples" / "helpdesk.toml"
HELPDESK_TEMPLATE = "arn:aws:secretsmanager:eu-west-1:111122223333:secret:sweeper/helpdesk/"


def _auth_arn(policy: Policy) -> str:
    assert isinstance(policy.action, HttpActionConfig)
    (arn,) = policy.action.effective_auth.secret_arns()
    return arn


def test_a_secret_per_tenant_is_given_tenant_by_tenant_and_stays_per_tenant(
    local_aws: LocalAws,
) -> None:
    # Given the help desk example, and two accounts' logins under their filled ARNs
    policy = load_config(HELPDESK).policies[0]
    given = {f"{HELPDESK_TEMPLATE}{a}": {"username": a, "password": f"pw-{a}"} for a in "ab"}
    assert missing_local_secrets([policy], given) == []
    assert missing_local_secrets([policy], {"arn:other": "x"}) == [_auth_arn(policy)]
    sm = local_aws.secretsmanager()
    # When the local stack makes them
    local = with_local_secrets(sm, policy, prefix=_prefix(), vendor=None, given=given)
    # Then the policy names a local template, and each account's login is under it
    arn = _auth_arn(local)
    assert arn.endswith("/sweeper/helpdesk/{tenant_id}")
    for account in "ab":
        stored = sm.get_secret_value(SecretId=arn.replace("{tenant_id}", account))
        assert json.loads(stored["SecretString"])["username"] == account


def test_against_the_simulator_every_tenant_shares_one_made_up_secret(
    local_aws: LocalAws,
) -> None:
    policy = load_config(HELPDESK).policies[0]
    sm = local_aws.secretsmanager()
    with VendorSimulator() as vendor:
        local = with_local_secrets(sm, policy, prefix=_prefix(), vendor=vendor, given={})
    arn = _auth_arn(local)
    assert "{tenant_id}" not in arn
    assert set(json.loads(sm.get_secret_value(SecretId=arn)["SecretString"])) == {
        "username",
        "password",
    }

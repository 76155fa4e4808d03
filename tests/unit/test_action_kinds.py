"""Action kinds are plug-ins: `action.kind` picks one, and only its module knows it."""

from __future__ import annotations

import ast
import re
import tomllib
from pathlib import Path

import pytest
from pydantic import ValidationError

import sweeper
from sweeper.actions.base import ActionKind
from sweeper.actions.http_outcomes import outcomes_for
from sweeper.config import KINDS, HttpActionConfig, Policy, SweeperConfig
from sweeper.models import OutcomeClass
from sweeper_tools.deploy import deploy_for
from sweeper_tools.deploy.base import AwsService, Grant, NetworkPath
from tests.unit.test_import_graph import import_graph

PACKAGE_DIR = Path(sweeper.__file__).resolve().parent
REPO = Path(__file__).resolve().parents[2]
#: The one product module that names the kinds: the union.
UNION_MODULE = "sweeper.config.action"
TOKEN = "arn:aws:secretsmanager:eu-west-1:111122223333:secret:sweeper/api-AbCdEf"


def test_action_kind_selects_the_kinds_model() -> None:
    # Given a policy whose action names its kind
    policy = Policy.model_validate(
        {"name": "exports", "action": {"kind": "http", "api_url": "https://api.example.com"}}
    )
    # Then the action is that kind's model
    assert isinstance(policy.action, HttpActionConfig)
    assert policy.action.api_url == "https://api.example.com"


def test_an_action_without_a_kind_is_http() -> None:
    policy = Policy.model_validate({"name": "exports", "action": {"api_url": "https://a.test"}})
    assert isinstance(policy.action, HttpActionConfig)


def test_an_unknown_kind_is_refused_naming_the_kinds() -> None:
    with pytest.raises(ValidationError, match="'http'"):
        Policy.model_validate({"name": "exports", "action": {"kind": "ftp"}})


def test_every_kind_is_registered_under_its_own_name() -> None:
    assert KINDS["http"] is HttpActionConfig
    for name, model in KINDS.items():
        assert issubclass(model, ActionKind)
        assert model.model_fields["kind"].default == name


def test_the_http_kind_grants_only_reading_its_token_secret() -> None:
    assert deploy_for(HttpActionConfig(auth_secret_arn=TOKEN)).grants() == (
        Grant(actions=("secretsmanager:GetSecretValue",), resources=(TOKEN,)),
    )
    assert deploy_for(HttpActionConfig()).grants() == ()


def test_a_partial_secret_arn_is_granted_with_its_random_suffix_matched() -> None:
    partial = "arn:aws:secretsmanager:eu-west-1:111122223333:secret:sweeper/api"
    (grant,) = deploy_for(HttpActionConfig(auth_secret_arn=partial)).grants()
    assert grant.resources == (f"{partial}-??????",)


def test_the_http_kind_reaches_its_vendor_port_and_secrets_manager_only_with_a_secret() -> None:
    with_token = HttpActionConfig(api_url="https://api.example.com:8443", auth_secret_arn=TOKEN)
    assert deploy_for(with_token).network_path() == NetworkPath(
        aws_services=frozenset({AwsService.SECRETS_MANAGER}), internet_ports=(8443,)
    )
    assert deploy_for(HttpActionConfig()).network_path() == NetworkPath(internet_ports=(443,))


def test_the_http_kind_reaches_its_schemes_default_port_when_api_url_names_none() -> None:
    plain = HttpActionConfig(api_url="http://vendor.internal", allow_plain_http=True)
    assert deploy_for(plain).network_path().internet_ports == (80,)
    assert deploy_for(HttpActionConfig()).network_path().internet_ports == (443,)


def test_the_http_kind_plans_with_its_timeouts_and_measured_latency_only() -> None:
    config = HttpActionConfig(connect_timeout_seconds=1.5, read_timeout_seconds=4.0)
    assert config.call_seconds == 5.5
    assert config.latency is None  # a vendor's latency is measured, never assumed
    assert HttpActionConfig(latency_p50_seconds=0.2).latency == (0.2, 0.2)


def _importers_of(graph: dict[str, set[str]], module: str) -> set[str]:
    return {name for name, targets in graph.items() if module in targets}


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_no_product_module_outside_the_actions_and_the_union_imports_a_kind(kind: str) -> None:
    # Adding a kind touches its module and one line of the union: nothing else may name it
    module = KINDS[kind].__module__
    importers = _importers_of(import_graph(PACKAGE_DIR), module)
    outside = {
        name
        for name in importers
        if name != UNION_MODULE and not name.startswith("sweeper.actions")
    }
    assert outside == set()


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_the_cdk_app_never_imports_a_kind(kind: str) -> None:
    module = KINDS[kind].__module__
    for path in sorted((REPO / "infra").rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        imported = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                imported.add(node.module)
            elif isinstance(node, ast.Import):
                imported.update(alias.name for alias in node.names)
        assert module not in imported, path.name


# --- the http kind's config ------------------------------------------------------------------

OAUTH = {"type": "oauth2", "token_url": "{api_url}/oauth/token", "secret_arn": TOKEN}


@pytest.mark.parametrize(
    ("body", "problem"),
    [
        ({"id": "obj-{object_id}"}, "never spliced"),
        ({"{object_id}": 1}, "keys are never filled"),
        ({"id": "{params.}"}, "unknown field"),
        ({"id": "{secret}"}, "unknown field"),
        ({"ids": ["{object_id}/{tenant_id}"]}, "never spliced"),
    ],
)
def test_a_body_template_that_would_splice_or_name_an_unknown_field_is_refused(
    body: dict[str, object], problem: str
) -> None:
    with pytest.raises(ValidationError, match=problem):
        HttpActionConfig(body=body)


def test_a_graphql_query_in_a_body_is_text_and_its_variables_are_filled() -> None:
    # Given a GraphQL mutation: a constant query whose braces name no field, and a variable
    query = "mutation($id: ID!) { productDelete(input: {id: $id}) { deletedProductId } }"
    config = HttpActionConfig(body={"query": query, "variables": {"id": "{object_id}"}})
    # Then the query is kept as text and the variable is the job's field
    assert config.body == {"query": query, "variables": {"id": "{object_id}"}}


def test_a_body_template_of_whole_fields_and_literals_is_accepted() -> None:
    body = {"payment_id": "{object_id}", "date": "{params.business_date}", "note": "as is {x"}
    assert HttpActionConfig(body=body).body == body


def test_a_url_template_may_name_params_but_no_other_unknown_field() -> None:
    HttpActionConfig(url_template="{api_url}/v1/{params.business_date}/{object_id}")
    with pytest.raises(ValidationError, match="unknown fields"):
        HttpActionConfig(url_template="{api_url}/v1/{region}/{object_id}")


@pytest.mark.parametrize("name", ["Authorization", "host", "Idempotency-Key", "X-Api-Key"])
def test_headers_that_sweeper_sets_are_refused(name: str) -> None:
    with pytest.raises(ValidationError, match="set by sweeper"):
        HttpActionConfig(
            headers={name: "v"},
            auth={"type": "header", "header": "X-Api-Key", "secret_arn": TOKEN},
        )


@pytest.mark.parametrize("value", ["a\r\nX-Evil: 1", "a\nb", "a\x00"])
def test_a_header_value_with_a_control_character_is_refused(value: str) -> None:
    with pytest.raises(ValidationError, match="control character"):
        HttpActionConfig(headers={"X-Region": value})


def test_an_idempotency_header_name_must_be_a_header_token() -> None:
    assert HttpActionConfig(idempotency_header="X-Idempotency-Token").idempotency_header
    with pytest.raises(ValidationError):
        HttpActionConfig(idempotency_header="X Idempotency")


def test_auth_and_the_older_auth_secret_arn_are_not_both_given() -> None:
    with pytest.raises(ValidationError, match="either auth or auth_secret_arn"):
        HttpActionConfig(auth_secret_arn=TOKEN, auth={"type": "bearer", "secret_arn": TOKEN})


def test_the_older_auth_secret_arn_reads_as_bearer() -> None:
    config = HttpActionConfig(auth_secret_arn=TOKEN)
    assert config.effective_auth.type == "bearer"
    assert config.effective_auth.secret_arns() == (TOKEN,)


def test_a_plain_http_token_url_is_refused_unless_allowed() -> None:
    with pytest.raises(ValidationError, match="client secret in clear"):
        HttpActionConfig(auth={**OAUTH, "token_url": "http://auth.example.com/token"})
    HttpActionConfig(
        api_url="http://127.0.0.1:1", allow_plain_http=True, auth=OAUTH
    )  # the local stack


@pytest.mark.parametrize(
    "auth",
    [
        {"type": "bearer", "secret_arn": TOKEN},
        {"type": "header", "header": "X-Api-Key", "secret_arn": TOKEN},
        {"type": "basic", "secret_arn": TOKEN},
        OAUTH,
    ],
)
def test_each_auth_mode_grants_reading_its_own_secret_only(auth: dict[str, str]) -> None:
    config = HttpActionConfig(auth=auth)
    assert deploy_for(config).grants() == (
        Grant(actions=("secretsmanager:GetSecretValue",), resources=(TOKEN,)),
    )
    assert deploy_for(config).network_path().aws_services == {AwsService.SECRETS_MANAGER}


def test_an_oauth2_token_endpoint_elsewhere_opens_its_port_too() -> None:
    config = HttpActionConfig(
        api_url="https://api.example.com",
        auth={**OAUTH, "token_url": "https://auth.example.com:9443/token"},
    )
    assert deploy_for(config).network_path().internet_ports == (443, 9443)


def test_snooze_may_be_named_in_the_outcome_table() -> None:
    config = HttpActionConfig(outcomes={409: "snooze", 423: "snooze"})
    table = outcomes_for(config)
    assert table.classify_status(409, has_retry_after=True) is OutcomeClass.SNOOZE
    assert table.classify_status(423, has_retry_after=False) is OutcomeClass.SNOOZE


def test_every_policy_in_docs_actions_is_valid() -> None:
    text = (REPO / "docs" / "actions.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```toml\n(.*?)```", text, flags=re.DOTALL)
    policies = [block for block in blocks if block.startswith("[[policies]]")]
    # five http policies (one per auth mode), then one of each other kind
    assert len(policies) == 8
    kinds = []
    for block in policies:
        config = SweeperConfig.model_validate(tomllib.loads(block))
        (policy,) = config.policies
        kinds.append(policy.action.kind)
    assert sorted(set(kinds)) == sorted(KINDS)

"""Action kinds are plug-ins: `action.kind` picks one, and only its module knows it."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from pydantic import ValidationError

import sweeper
from sweeper.actions.base import ActionKind, AwsService, Grant, NetworkPath
from sweeper.config import KINDS, HttpActionConfig, Policy
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
    assert HttpActionConfig(auth_secret_arn=TOKEN).grants() == (
        Grant(actions=("secretsmanager:GetSecretValue",), resources=(TOKEN,)),
    )
    assert HttpActionConfig().grants() == ()


def test_a_partial_secret_arn_is_granted_with_its_random_suffix_matched() -> None:
    partial = "arn:aws:secretsmanager:eu-west-1:111122223333:secret:sweeper/api"
    (grant,) = HttpActionConfig(auth_secret_arn=partial).grants()
    assert grant.resources == (f"{partial}-??????",)


def test_the_http_kind_reaches_its_vendor_port_and_secrets_manager_only_with_a_secret() -> None:
    with_token = HttpActionConfig(api_url="https://api.example.com:8443", auth_secret_arn=TOKEN)
    assert with_token.network_path() == NetworkPath(
        aws_services=frozenset({AwsService.SECRETS_MANAGER}), internet_ports=(8443,)
    )
    assert HttpActionConfig().network_path() == NetworkPath(internet_ports=(443,))


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

"""Each action kind's consumer is granted, and reaches, what its kind needs and nothing more.

tests/infra/fixtures/action_kinds.toml has one policy per kind that calls no vendor: s3_delete
(`exports`), lambda (`reconcile`) and python (`cleanup`). The http kind's consumer is the shipped
sweeper.toml's (tests/infra/test_pipeline.py, test_network_paths.py).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from infra.app import build_app
from sweeper.errors import ConfigError
from tests.infra.conftest import FIXTURES, Synth
from tests.infra.test_network_paths import (
    ANYWHERE,
    NO_NETWORK_PATH_NEEDED,
    Network,
    _ref,
    granted_services,
)

#: What every consumer is granted whatever its kind: the ledger's secret, its queue, its tables.
CONSUMER_OWN_SERVICES = {"sqs", "secretsmanager", "dynamodb"}
LAMBDA_ARN = "arn:aws:lambda:eu-west-1:111122223333:function:acme-reconcile"


@pytest.fixture(scope="module")
def kinds(synth_variant: Callable[[dict[str, Any]], Synth]) -> Synth:
    return synth_variant({"config": str(FIXTURES / "action_kinds.toml")})


def consumer(synth: Synth, policy: str) -> dict[str, Any]:
    (found,) = [
        f
        for lid, f in synth.python_functions().items()
        if f"Pipeline{policy}" in lid.replace("-", "") and "Consumer" in lid
    ]
    return found


def statements(synth: Synth, function: dict[str, Any], prefix: str) -> list[dict[str, Any]]:
    """The function's allowed statements with an action of this service."""
    role = str(_ref(function["Properties"]["Role"]))
    found = []
    for policy in synth.resources("AWS::IAM::Policy").values():
        if {"Ref": role} in policy["Properties"]["Roles"]:
            for statement in policy["Properties"]["PolicyDocument"]["Statement"]:
                actions = statement["Action"]
                actions = actions if isinstance(actions, list) else [actions]
                if any(str(a).startswith(prefix + ":") for a in actions):
                    found.append(statement)
    return found


def anywhere_egress(synth: Synth, function: dict[str, Any]) -> list[Any]:
    network = Network(synth)
    (group,) = function["Properties"]["VpcConfig"]["SecurityGroupIds"]
    return [rule for rule in network.egress(str(_ref(group))) if rule.covers_cidr(ANYWHERE)]


def test_every_kind_synthesizes_with_each_wildcard_acknowledged_for_its_reason(
    kinds: Synth,
) -> None:
    assert kinds.validation_error is None, kinds.report


def test_the_s3_delete_consumer_may_delete_under_the_prefix_and_list_it_only(
    kinds: Synth,
) -> None:
    found = consumer(kinds, "exports")
    assert granted_services(kinds, found) - set(NO_NETWORK_PATH_NEEDED) == (
        CONSUMER_OWN_SERVICES | {"s3"}
    )
    assert statements(kinds, found, "s3") == [
        {
            "Action": "s3:DeleteObject",
            "Effect": "Allow",
            "Resource": "arn:aws:s3:::acme-exports/exports/*",
        },
        {
            "Action": "s3:ListBucket",
            "Condition": {"StringLike": {"s3:prefix": ["exports/*"]}},
            "Effect": "Allow",
            "Resource": "arn:aws:s3:::acme-exports",
        },
    ]


def test_the_lambda_consumer_may_invoke_its_function_only(kinds: Synth) -> None:
    found = consumer(kinds, "reconcile")
    assert granted_services(kinds, found) - set(NO_NETWORK_PATH_NEEDED) == (
        CONSUMER_OWN_SERVICES | {"lambda"}
    )
    assert statements(kinds, found, "lambda") == [
        {
            "Action": "lambda:InvokeFunction",
            "Effect": "Allow",
            "Resource": [LAMBDA_ARN, f"{LAMBDA_ARN}:*"],
        }
    ]


def test_the_python_consumer_is_granted_nothing_beyond_its_own(kinds: Synth) -> None:
    found = consumer(kinds, "cleanup")
    assert granted_services(kinds, found) - set(NO_NETWORK_PATH_NEEDED) == CONSUMER_OWN_SERVICES


@pytest.mark.parametrize(
    ("policy", "service", "path"),
    [("exports", "s3", "gateway endpoint"), ("reconcile", "lambda", "interface endpoint")],
)
def test_the_kinds_service_is_reached_through_its_endpoint_and_nothing_through_nat(
    kinds: Synth, policy: str, service: str, path: str
) -> None:
    found = consumer(kinds, policy)
    assert Network(kinds).reaches(found, service) == [path]
    assert anywhere_egress(kinds, found) == []


def test_the_python_consumer_has_no_egress_to_anywhere(kinds: Synth) -> None:
    assert anywhere_egress(kinds, consumer(kinds, "cleanup")) == []


def test_every_kinds_consumer_reaches_each_service_it_is_granted(kinds: Synth) -> None:
    network = Network(kinds)
    for policy in ("exports", "reconcile", "cleanup"):
        found = consumer(kinds, policy)
        for service in granted_services(kinds, found) - set(NO_NETWORK_PATH_NEEDED):
            assert network.reaches(found, service), f"{policy} -> {service}"


def test_a_lambda_interface_endpoint_exists_only_when_a_kind_calls_lambda(
    kinds: Synth, default: Synth
) -> None:
    def lambda_endpoints(synth: Synth) -> int:
        return sum(
            1
            for e in synth.resources("AWS::EC2::VPCEndpoint").values()
            if "lambda" in str(e["Properties"]["ServiceName"])
        )

    assert lambda_endpoints(kinds) == 1
    assert lambda_endpoints(default) == 0


def test_the_python_kinds_package_ships_as_a_layer_of_its_consumer_only(kinds: Synth) -> None:
    layers = {
        lid: resource
        for lid, resource in kinds.resources("AWS::Lambda::LayerVersion").items()
        if "ActionCodeLayer" in lid
    }
    (layer_id,) = layers
    assert "cleanup" in layers[layer_id]["Properties"]["Description"]
    with_layer = [
        lid
        for lid, f in kinds.python_functions().items()
        if {"Ref": layer_id} in f["Properties"].get("Layers", [])
    ]
    assert len(with_layer) == 1
    assert "cleanup" in with_layer[0].lower()
    assert "Consumer" in with_layer[0]


def test_synth_fails_with_one_line_when_the_callable_cannot_be_imported(
    deps_layer_placeholder: Any,
) -> None:
    config = FIXTURES / "python_kind_unimportable.toml"
    with pytest.raises(ConfigError) as failed:
        build_app({"config": str(config)}, deps_layer_dir=deps_layer_placeholder)
    message = str(failed.value)
    assert "\n" not in message
    assert message == (
        "policy cleanup: action.callable acme_actions.cleanup:no_such_function (package_path "
        "actions_pkg): no_such_function is not a callable of acme_actions.cleanup"
    )


def test_the_s3_exports_example_synthesizes_clean(
    synth_variant: Callable[[dict[str, Any]], Synth],
) -> None:
    example = synth_variant({"config": "docs/examples/s3-exports.toml"})
    assert example.validation_error is None, example.report
    found = consumer(example, "s3exports")
    assert Network(example).reaches(found, "s3") == ["gateway endpoint"]

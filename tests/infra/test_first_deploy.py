"""A first deploy into a fresh account: a failed create rolls back cleanly.

What decides it: the cluster resource never sets deletion protection (CloudFormation could not
delete it in a rollback); the protection is switched on by a custom resource that runs after
every other resource of the stack; every function waits for the ledger's migrations.
"""

from __future__ import annotations

import json
from typing import Any

from tests.infra.conftest import Synth


def _protection(synth: Synth) -> tuple[str, dict[str, Any]]:
    logical_id = synth.logical_id("DeletionProtection/Switch/Resource/Default")
    return logical_id, synth.template_json["Resources"][logical_id]


def _depends_on(resource: dict[str, Any]) -> set[str]:
    depends = resource.get("DependsOn", [])
    return set(depends if isinstance(depends, list) else [depends])


def test_the_cluster_is_created_without_deletion_protection(every_variant: Synth) -> None:
    for cluster in every_variant.resources("AWS::RDS::DBCluster").values():
        assert "DeletionProtection" not in cluster["Properties"]


def _sdk_call(value: Any) -> dict[str, Any]:
    """An AwsCustomResource call (a JSON string joined around Refs), Refs as `<Ref:id>`."""
    parts = value["Fn::Join"][1] if isinstance(value, dict) else [value]
    text = "".join(p if isinstance(p, str) else f"<Ref:{p['Ref']}>" for p in parts)
    call: dict[str, Any] = json.loads(text)
    return call


def test_deletion_protection_is_switched_on_for_the_cluster_by_the_deploys_last_step(
    default: Synth,
) -> None:
    _, switch = _protection(default)
    (cluster_id,) = default.resources("AWS::RDS::DBCluster")
    create = _sdk_call(switch["Properties"]["Create"])
    assert (create["service"], create["action"]) == ("RDS", "modifyDBCluster")
    assert create["parameters"] == {
        "DBClusterIdentifier": f"<Ref:{cluster_id}>",
        "DeletionProtection": True,
        "ApplyImmediately": True,
    }
    assert switch["Properties"]["Update"] == switch["Properties"]["Create"]
    assert "Delete" not in switch["Properties"]  # a rollback or destroy never lifts it


def test_the_protection_switch_runs_after_every_other_resource(every_variant: Synth) -> None:
    if not every_variant.resources("AWS::RDS::DBCluster"):
        # An imported cluster is not sweeper's to protect.
        assert not [
            r
            for r in every_variant.template_json["Resources"].values()
            if "DeletionProtection/" in r.get("Metadata", {}).get("aws:cdk:path", "")
        ]
        return
    logical_id, switch = _protection(every_variant)
    others = {
        lid
        for lid, r in every_variant.template_json["Resources"].items()
        if lid != logical_id and r["Type"] != "AWS::CDK::Metadata"
    }
    assert others - _depends_on(switch) == set()


def test_the_switch_may_modify_that_cluster_only(default: Synth) -> None:
    (cluster_id,) = default.resources("AWS::RDS::DBCluster")
    (policy,) = [
        p
        for p in default.resources("AWS::IAM::Policy").values()
        if "DeletionProtection/" in p.get("Metadata", {}).get("aws:cdk:path", "")
    ]
    (statement,) = policy["Properties"]["PolicyDocument"]["Statement"]
    assert statement["Action"] == "rds:ModifyDBCluster"
    assert cluster_id in json.dumps(statement["Resource"])


def test_turning_the_option_off_makes_the_switch_lift_the_protection(
    synth_variant: Any,
) -> None:
    # `-c deletion_protection=false` arrives as a string, as on the command line
    unprotected = synth_variant({"config": "sweeper.toml", "deletion_protection": "false"})
    _, switch = _protection(unprotected)
    assert _sdk_call(switch["Properties"]["Create"])["parameters"]["DeletionProtection"] is False


def test_every_function_but_the_migrations_waits_for_the_migrations(every_variant: Synth) -> None:
    migrations = every_variant.logical_id("Migrations/Apply/Default")
    waiting = {
        lid: migrations in _depends_on(f)
        for lid, f in every_variant.python_functions().items()
        if "Migrations" not in lid
    }
    assert waiting
    assert [lid for lid, ok in waiting.items() if not ok] == []
    webhooks = [lid for lid in waiting if "Webhook" in lid]
    assert webhooks or "webhook" not in json.dumps(every_variant.config.model_dump())

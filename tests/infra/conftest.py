"""Synthesize each variant of the app once per session; tests read the result.

Synth is the slow part (a few seconds per variant), so every variant is a session fixture. The
deps layer is replaced by a placeholder folder: template assertions do not depend on its content
(tests/infra/test_layer.py checks the real one).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from aws_cdk import App
from aws_cdk.assertions import Template

from infra.app import VALIDATION_FAILED, build_app
from infra.policy_stack import PolicyStack
from infra.stack import SweeperStack
from sweeper.config import SweeperConfig

REPO_ROOT = Path(__file__).resolve().parents[2]
FIXTURES = Path(__file__).resolve().parent / "fixtures"

#: An imported VPC and database, with identifiers in the shapes AWS uses.
IMPORTED_CONTEXT: dict[str, Any] = {
    "vpc_id": "vpc-0123456789abcdef0",
    "vpc_cidr": "10.1.0.0/16",
    "vpc_availability_zones": "eu-west-1a,eu-west-1b",
    "vpc_private_subnet_ids": "subnet-0123456789abcdef0,subnet-0123456789abcdef1",
    "database_endpoint": "ledger.proxy-abc.eu-west-1.rds.amazonaws.com",
    "database_port": "5433",
    "database_secret_arn": "arn:aws:secretsmanager:eu-west-1:111122223333:secret:ledger-AbCdEf",
    "database_security_group_id": "sg-0123456789abcdef0",
    "rds_proxy": "true",
}


@dataclass(frozen=True)
class Synth:
    """One synthesized variant: its config, template, validation report and stack.

    `template_json` is the deployment as one template: the root's resources and each policy's
    nested stack's, every reference across them (a nested stack's parameter, the root's read of
    a nested output) replaced by what it refers to, so that a test reads a grant or a rule as
    it reads one within a stack. `root_json` and `nested_json` are the templates as synthesized.
    """

    #: The policies as the stack deployed them (sweeper_tools.planning.consumer_defaults).
    config: SweeperConfig
    template_json: dict[str, Any]
    report: dict[str, Any]
    validation_error: str | None
    stack: SweeperStack
    outdir: Path
    root_json: dict[str, Any]
    #: Each policy's nested template, by the policy's name.
    nested_json: dict[str, dict[str, Any]]
    app: App

    @property
    def template(self) -> Template:
        return Template.from_json(self.template_json)

    def resources(self, resource_type: str) -> dict[str, dict[str, Any]]:
        return {
            logical_id: resource
            for logical_id, resource in self.template_json["Resources"].items()
            if resource["Type"] == resource_type
        }

    def resource(self, logical_id_pattern: str, resource_type: str) -> dict[str, Any]:
        """The one resource of this type whose logical ID matches the pattern."""
        found = [
            resource
            for logical_id, resource in self.resources(resource_type).items()
            if re.search(logical_id_pattern, logical_id)
        ]
        assert len(found) == 1, f"{len(found)} {resource_type} match {logical_id_pattern}"
        return found[0]

    def python_functions(self) -> dict[str, dict[str, Any]]:
        """sweeper's own functions (CDK's provider functions run Node.js)."""
        return {
            logical_id: resource
            for logical_id, resource in self.resources("AWS::Lambda::Function").items()
            if str(resource["Properties"].get("Runtime", "")).startswith("python")
        }

    def function(self, logical_id_pattern: str) -> dict[str, Any]:
        return self.resource(logical_id_pattern, "AWS::Lambda::Function")

    def environment(self, logical_id_pattern: str) -> dict[str, Any]:
        variables: dict[str, Any] = self.function(logical_id_pattern)["Properties"]["Environment"][
            "Variables"
        ]
        return variables

    def logical_id(self, construct_path_suffix: str) -> str:
        """The logical ID of the resource whose construct path ends with the suffix."""
        for logical_id, resource in self.template_json["Resources"].items():
            path = resource.get("Metadata", {}).get("aws:cdk:path", "")
            if path.endswith(construct_path_suffix):
                return str(logical_id)
        raise AssertionError(f"no resource at */{construct_path_suffix}")

    @property
    def template_file(self) -> Path:
        return self.outdir / f"{self.stack.stack_name}.template.json"

    @property
    def template_files(self) -> list[Path]:
        """The root template's file and each nested stack's."""
        nested = [self.outdir / stack.template_file for stack in self.stack.policy_stacks]
        return [self.template_file, *nested]


def flatten(root: dict[str, Any], nested: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """One template of the root and its nested stacks (`nested` by the nested stack's logical
    ID in the root): references across them resolved, as if it had been one stack."""
    outputs = {
        logical_id: {name: output["Value"] for name, output in template["Outputs"].items()}
        for logical_id, template in nested.items()
    }
    parameters = {
        logical_id: root["Resources"][logical_id]["Properties"].get("Parameters", {})
        for logical_id in nested
    }

    def resolve(value: Any, within: str | None) -> Any:
        if isinstance(value, list):
            return [resolve(item, within) for item in value]
        if not isinstance(value, dict):
            return value
        if within is not None and set(value) == {"Ref"} and value["Ref"] in parameters[within]:
            return resolve(parameters[within][value["Ref"]], None)
        if set(value) == {"Fn::GetAtt"}:
            target, attribute = value["Fn::GetAtt"]
            if target in outputs and str(attribute).startswith("Outputs."):
                return resolve(outputs[target][attribute.removeprefix("Outputs.")], target)
        return {key: resolve(item, within) for key, item in value.items()}

    merged = {key: resolve(value, None) for key, value in root.items()}
    # What waits for a nested stack waits for each of its resources; what its stack waits
    # for, each of them waits for.
    for resource in merged["Resources"].values():
        waits = _as_list(resource.get("DependsOn"))
        for stack_id in set(waits) & set(nested):
            waits += list(nested[stack_id]["Resources"])
        if waits:
            resource["DependsOn"] = waits
    for logical_id, template in nested.items():
        inherited = _as_list(root["Resources"][logical_id].get("DependsOn"))
        for resource_id, resource in template["Resources"].items():
            assert resource_id not in merged["Resources"], f"{resource_id} is in two templates"
            flat = resolve(resource, logical_id)
            waits = _as_list(flat.get("DependsOn")) + inherited
            if waits:
                flat["DependsOn"] = waits
            merged["Resources"][resource_id] = flat
    return merged


def _as_list(value: Any) -> list[str]:
    """A DependsOn, one logical ID or a list of them, as a list."""
    if value is None:
        return []
    return [value] if isinstance(value, str) else list(value)


def synthesize(context: dict[str, Any], outdir: Path, deps_layer_dir: Path) -> Synth:
    app, stack = build_app(
        {**context, "aws:cdk:enable-path-metadata": True},
        deps_layer_dir=deps_layer_dir,
        outdir=str(outdir),
    )
    error: str | None = None
    try:
        app.synth()
    except RuntimeError as exc:  # validation failed: the template and report are still written
        if not str(exc).startswith(VALIDATION_FAILED):
            raise
        error = str(exc)
    root = json.loads((outdir / f"{stack.stack_name}.template.json").read_text())
    nested_by_policy = {
        policy_stack.policy.name: json.loads((outdir / policy_stack.template_file).read_text())
        for policy_stack in stack.policy_stacks
    }
    nested = {
        _nested_logical_id(stack, policy_stack): nested_by_policy[policy_stack.policy.name]
        for policy_stack in stack.policy_stacks
    }
    report = json.loads((outdir / "validation-report.json").read_text())
    # The policies as deployed (their consumer's sizing derived where the file sets none)
    return Synth(
        stack.config,
        flatten(root, nested),
        report,
        error,
        stack,
        outdir,
        root,
        nested_by_policy,
        app,
    )


def _nested_logical_id(stack: SweeperStack, policy_stack: PolicyStack) -> str:
    """The logical ID, in the root, of the policy's AWS::CloudFormation::Stack."""
    resource = policy_stack.nested_stack_resource
    assert resource is not None
    return stack.get_logical_id(resource)


@pytest.fixture(scope="session")
def deps_layer_placeholder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("deps-layer")
    (folder / "python").mkdir()
    (folder / "python" / "placeholder.txt").write_text("template tests only\n")
    return folder


@pytest.fixture(scope="session")
def synth_variant(
    tmp_path_factory: pytest.TempPathFactory, deps_layer_placeholder: Path
) -> Callable[[dict[str, Any]], Synth]:
    cache: dict[str, Synth] = {}

    def get(context: dict[str, Any]) -> Synth:
        key = json.dumps(context, sort_keys=True)
        if key not in cache:
            outdir = tmp_path_factory.mktemp("cdk.out")
            cache[key] = synthesize(context, outdir, deps_layer_placeholder)
        return cache[key]

    return get


@pytest.fixture(scope="session")
def default(synth_variant: Callable[[dict[str, Any]], Synth]) -> Synth:
    """What `make synth` produces: the shipped sweeper.toml, a new VPC and cluster."""
    return synth_variant({"config": "sweeper.toml"})


@pytest.fixture(scope="session")
def proxied(synth_variant: Callable[[dict[str, Any]], Synth]) -> Synth:
    """Two policies, RDS Proxy in front of a new cluster that may scale to zero, alarm e-mail."""
    return synth_variant(
        {
            "config": str(FIXTURES / "two_policies.toml"),
            "rds_proxy": "true",
            "database_min_capacity_acu": "0",
            "alarm_email": "ops@example.com",
        }
    )


@pytest.fixture(scope="session")
def imported(synth_variant: Callable[[dict[str, Any]], Synth]) -> Synth:
    """An existing VPC and an existing database (behind its own proxy)."""
    return synth_variant({"config": "sweeper.toml", **IMPORTED_CONTEXT})


@pytest.fixture(scope="session")
def lean(synth_variant: Callable[[dict[str, Any]], Synth]) -> Synth:
    """The shipped policy file in a new VPC without interface endpoints (`-c network=lean`)."""
    return synth_variant({"config": "sweeper.toml", "network": "lean"})


@pytest.fixture(scope="session")
def paused_lean(synth_variant: Callable[[dict[str, Any]], Synth]) -> Synth:
    """The shipped policy file, lean, on a new cluster that may pause (minimum 0 ACU, no proxy)."""
    return synth_variant(
        {"config": "sweeper.toml", "network": "lean", "database_min_capacity_acu": "0"}
    )


@pytest.fixture(scope="session", params=["default", "proxied", "imported", "lean"])
def every_variant(request: pytest.FixtureRequest) -> Synth:
    variant: Synth = request.getfixturevalue(request.param)
    return variant

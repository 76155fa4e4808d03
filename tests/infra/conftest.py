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
from aws_cdk.assertions import Template

from infra.app import VALIDATION_FAILED, build_app
from infra.stack import SweeperStack
from sweeper.config import SweeperConfig, load_config

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
    """One synthesized variant: its config, template, validation report and stack."""

    config: SweeperConfig
    template_json: dict[str, Any]
    report: dict[str, Any]
    validation_error: str | None
    stack: SweeperStack
    outdir: Path

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
    template = json.loads((outdir / f"{stack.stack_name}.template.json").read_text())
    report = json.loads((outdir / "validation-report.json").read_text())
    config_path = Path(context.get("config", "sweeper.toml"))
    config = load_config(config_path if config_path.is_absolute() else REPO_ROOT / config_path)
    return Synth(config, template, report, error, stack, outdir)


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


@pytest.fixture(scope="session", params=["default", "proxied", "imported"])
def every_variant(request: pytest.FixtureRequest) -> Synth:
    variant: Synth = request.getfixturevalue(request.param)
    return variant

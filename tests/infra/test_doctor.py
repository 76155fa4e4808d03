"""`sweeper doctor` checks what the CDK app deploys: the same engine, the same reservations.

The doctor restates these figures (the CLI does not start the CDK); these tests read them from
the synthesized template, so the two cannot drift apart.
"""

from __future__ import annotations

from infra.database import AURORA_ENGINE_VERSION
from sweeper_tools.doctor import (
    AURORA_POSTGRES_ENGINE,
    AURORA_POSTGRES_VERSION,
    required_reserved_concurrency,
)
from tests.infra.conftest import Synth


def test_doctor_checks_the_engine_version_the_app_deploys(default: Synth) -> None:
    cluster = default.resource("DatabaseCluster", "AWS::RDS::DBCluster")["Properties"]
    assert (cluster["Engine"], cluster["EngineVersion"]) == (
        AURORA_POSTGRES_ENGINE,
        AURORA_POSTGRES_VERSION,
    )
    assert AURORA_ENGINE_VERSION.aurora_postgres_full_version == AURORA_POSTGRES_VERSION


def test_doctor_counts_what_the_template_reserves(every_variant: Synth) -> None:
    reserved = sum(
        int(fn["Properties"].get("ReservedConcurrentExecutions", 0))
        for fn in every_variant.resources("AWS::Lambda::Function").values()
    )
    assert reserved == required_reserved_concurrency(every_variant.config)

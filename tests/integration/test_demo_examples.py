"""Every documented example runs through `sweeper demo` on the local stack: each policy of each
file in docs/examples (a new file is covered as it is added) and of the shipped sweeper.toml.

The demo makes what each policy's action calls as `sweeper local up` makes it (an s3_delete
policy's bucket) and the target of each obligation (its object); every job must end final, and
the vendor (or the bucket) must have seen one effect per object.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from sweeper.config import Policy
from sweeper_cli import main
from sweeper_tools.policy_file import load_config

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
DOCUMENTED = [*sorted((ROOT / "docs" / "examples").glob("*.toml")), ROOT / "sweeper.toml"]
#: Small runs: a few jobs over a few tenants, within a bounded time.
JOBS, TENANTS, TIMEOUT_SECONDS = 8, 2, 120


def _requires_params(policy: Policy) -> bool:
    return bool((policy.params_schema or {}).get("required"))


def _examples() -> Iterator[object]:
    for path in DOCUMENTED:
        for policy in load_config(path).policies:
            # By every door, as `sweeper demo` runs by default; a policy that needs params (the
            # payments example's identity business_date, the refunds example's amount) by the
            # sql door, the one that gives them (the others are refused, and the demo says so:
            # test_demo.py).
            door = "sql" if policy.identity_params or _requires_params(policy) else "all"
            name = f"{path.relative_to(ROOT)}:{policy.name}"
            yield pytest.param(path, policy.name, door, id=name)


@pytest.mark.parametrize(("path", "policy", "door"), list(_examples()))
def test_every_documented_example_runs_through_the_demo_once_per_object(
    db_url: str, tmp_path: Path, path: Path, policy: str, door: str
) -> None:
    # Given a documented policy file as it is, and a ledger of its own
    # When the demo runs that policy
    result = CliRunner().invoke(
        main,
        [
            "demo",
            *("--config", str(path), "--policy", policy),
            *("--jobs", str(JOBS), "--tenants", str(TENANTS), "--source", door),
            *("--timeout", str(TIMEOUT_SECONDS), "--database-url", db_url, "--json"),
            *("--local-file", str(tmp_path / "local.json")),
        ],
    )
    # Then every job is final, each succeeded, and its object saw one effect
    assert result.exit_code == 0, result.output
    report = json.loads(result.output.strip().splitlines()[0])
    assert report["all_final"], result.output
    assert (report["in_ledger"], report["succeeded"], report["terminal"]) == (JOBS, JOBS, 0)
    assert (report["vendor_effects"], report["max_effects_per_object"]) == (JOBS, 1)

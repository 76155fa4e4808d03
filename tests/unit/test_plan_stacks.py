"""`sweeper plan` estimates each stack of the deployment against CloudFormation's limits: the
root's resources and outputs, each policy's nested stack's resources (tests/infra/
test_many_policies.py holds the estimate to synthesized counts)."""

from __future__ import annotations

import json
import re
from pathlib import Path

from click.testing import CliRunner, Result

from sweeper_cli import main
from sweeper_tools.planning.stack_estimate import CFN_MAX_OUTPUTS, estimate, policy_stack_id
from sweeper_tools.policy_file import load_config

RICH = Path("tests/infra/fixtures/rich_policy.toml")
LATENCY = ["--latency-p50", "0.15", "--latency-p95", "0.4"]


def _plan(*args: str) -> Result:
    return CliRunner().invoke(main, ["plan", *args], prog_name="sweeper")


def _rich_file(tmp_path: Path, count: int) -> str:
    text = RICH.read_text(encoding="utf-8")
    path = tmp_path / "policies.toml"
    path.write_text(
        "\n".join(text.replace('name = "rich"', f'name = "rich-{n}"') for n in range(count))
    )
    return str(path)


def test_plan_names_each_stack_with_its_resources_against_the_limit() -> None:
    result = _plan("--config", "sweeper.toml", *LATENCY)
    assert result.exit_code == 0, result.output
    lines = [line for line in result.output.splitlines() if line.startswith("stacks: ")]
    assert len(lines) == 2
    assert re.fullmatch(r"stacks: stack root: ~\d+ of 500 resources, ~\d+ of 200 outputs", lines[0])
    assert re.fullmatch(r"stacks: stack Policy-exports: ~\d+ of 500 resources", lines[1])


def test_plan_as_json_carries_the_stacks() -> None:
    result = _plan("--config", "sweeper.toml", "--json", *LATENCY)
    stacks = json.loads(result.output)["stacks"]
    assert [s["stack"] for s in stacks] == ["root", "Policy-exports"]
    assert all(s["resources"] > 0 for s in stacks)


def test_each_policy_stack_is_estimated_under_the_nested_stacks_id() -> None:
    # Given the shipped policy file, When its stacks are estimated
    stacks = estimate(load_config("sweeper.toml"), "root")

    # Then each policy's is named as the CDK app names its nested stack (infra/policy_stack.py)
    assert policy_stack_id("exports") == "Policy-exports"
    assert [stack.name for stack in stacks] == ["root", policy_stack_id("exports")]


def test_twenty_rich_policies_fit_and_more_pass_the_roots_outputs(tmp_path: Path) -> None:
    # Twenty of the richest kind: every stack within the limits
    twenty = _plan("--config", _rich_file(tmp_path, 20), "--policy", "rich-0", *LATENCY)
    assert twenty.exit_code == 0, twenty.output
    assert "error: stack" not in twenty.output
    assert twenty.output.count("stacks: stack Policy-rich-") == 20
    # Twenty-five: each policy's outputs in the root pass its 200, which plan says and fails
    many = _plan("--config", _rich_file(tmp_path, 25), "--policy", "rich-0", *LATENCY)
    assert many.exit_code == 1
    assert re.search(
        r"^error: stack root: .* outputs \(over CloudFormation's limit\)$", many.output, re.M
    )


def test_a_policy_stack_does_not_grow_with_the_number_of_policies(tmp_path: Path) -> None:
    one = estimate(load_config(_rich_file(tmp_path, 1)))
    many = estimate(load_config(_rich_file(tmp_path, 20)))
    assert {s.resources for s in many[1:]} == {one[1].resources}
    # The root grows by about a resource and nine outputs a policy
    assert many[0].resources - one[0].resources < 2 * 19
    assert (many[0].outputs or 0) <= CFN_MAX_OUTPUTS

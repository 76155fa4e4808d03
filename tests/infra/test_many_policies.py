"""Twenty policies of the richest kind in one deployment: each policy a nested stack, every
template within CloudFormation's limits, cdk-nag and cfn-lint clean, the operator function's
environment the size it is with one policy; and a change to one policy leaves another's
nested template as it was (docs/decisions.md, "A nested stack per policy").

One synth of the twenty serves every assertion (a module fixture over the session's cache).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from infra import app as app_module
from infra import stack_size
from infra.stack_size import TemplateSize, check
from sweeper.errors import ConfigError
from sweeper_tools.planning.stack_estimate import CFN_MAX_OUTPUTS, CFN_MAX_RESOURCES, estimate
from tests.infra.conftest import FIXTURES, Synth
from tests.infra.test_compliance import _violations, assert_cfn_lint_clean

POLICIES = 20
#: How far `sweeper plan`'s estimate may be above a synthesized count (never below it).
ESTIMATE_SLACK = 0.05
OPERATOR = "OperatorApiOperatorFunction"
READ_ONLY = "OperatorApiReadOnlyFunction"


def policy_file(names: list[str]) -> str:
    """The richest fixture policy, once under each name."""
    text = (FIXTURES / "rich_policy.toml").read_text(encoding="utf-8")
    return "\n".join(text.replace('name = "rich"', f'name = "{name}"') for name in names)


@pytest.fixture(scope="module")
def twenty(
    tmp_path_factory: pytest.TempPathFactory, synth_variant: Callable[[dict[str, Any]], Synth]
) -> Synth:
    path = tmp_path_factory.mktemp("twenty") / "sweeper.toml"
    path.write_text(policy_file([f"rich-{n:02d}" for n in range(1, POLICIES + 1)]))
    return synth_variant({"config": str(path)})


def test_each_policy_is_a_nested_stack_of_its_own(twenty: Synth) -> None:
    assert sorted(twenty.nested_json) == [f"rich-{n:02d}" for n in range(1, POLICIES + 1)]
    stacks = [
        r
        for r in twenty.root_json["Resources"].values()
        if r["Type"] == "AWS::CloudFormation::Stack"
    ]
    assert len(stacks) == POLICIES
    # Each policy's functions are in its own template, none in the root's
    for name, template in twenty.nested_json.items():
        functions = [
            r for r in template["Resources"].values() if r["Type"] == "AWS::Lambda::Function"
        ]
        assert all(name in str(f["Properties"]["Description"]) for f in functions)
        # producer, consumer, redrive, intake, webhook, discovery and prune
        assert len(functions) == 7
    root_functions = [
        r["Properties"].get("Description", "")
        for r in twenty.root_json["Resources"].values()
        if r["Type"] == "AWS::Lambda::Function"
    ]
    assert not any("rich-" in str(description) for description in root_functions)


def test_every_template_is_within_cloudformations_limits(twenty: Synth) -> None:
    sizes = twenty.stack.template_sizes(twenty.outdir)
    assert len(sizes) == POLICIES + 1
    for size in sizes:
        assert size.resources <= CFN_MAX_RESOURCES, size
        assert size.outputs <= CFN_MAX_OUTPUTS, size
    check(sizes)  # raises nothing
    # The root holds what policies share, not what each has: far from the limit
    assert sizes[0].resources < CFN_MAX_RESOURCES / 2, sizes[0]


def test_twenty_policies_pass_cdk_nag(twenty: Synth) -> None:
    assert twenty.validation_error is None, _violations(twenty.report)
    assert _violations(twenty.report) == []


def test_twenty_policies_pass_cfn_lint(twenty: Synth) -> None:
    # The root, and the first and last policies' templates: the twenty are built by one code
    # path from one policy under twenty names (linting all of them takes a minute more)
    root, *nested = twenty.template_files
    assert_cfn_lint_clean([root, nested[0], nested[-1]])


def test_the_operator_environment_does_not_grow_with_the_policies(
    twenty: Synth, default: Synth
) -> None:
    # One policy or twenty: the same variables, every literal value the same
    for pattern in (OPERATOR, READ_ONLY):
        many, one = twenty.environment(pattern), default.environment(pattern)
        assert set(many) == set(one)
        literals = {k: v for k, v in many.items() if isinstance(v, str)}
        assert literals == {k: v for k, v in one.items() if isinstance(v, str)}


def test_the_plan_estimate_is_at_or_just_above_each_synthesized_count(
    twenty: Synth, default: Synth
) -> None:
    for synth in (twenty, default):
        sizes = {size.label: size for size in synth.stack.template_sizes(synth.outdir)}
        for guess in estimate(synth.config, synth.stack.stack_name):
            label = f"{guess.name} (root)" if guess.outputs is not None else guess.name
            actual = sizes[label]
            assert actual.resources <= guess.resources, (guess, actual)
            assert guess.resources <= actual.resources * (1 + ESTIMATE_SLACK), (guess, actual)
            if guess.outputs is not None:
                assert actual.outputs <= guess.outputs <= actual.outputs + 2, (guess, actual)


def test_make_synth_prints_each_stack_and_fails_in_one_line_past_the_limit(
    twenty: Synth, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(app_module, "build_app", lambda context, outdir: (twenty.app, twenty.stack))
    monkeypatch.setattr(app_module, "is_up_to_date", lambda: True)
    monkeypatch.setenv("CDK_OUTDIR", str(twenty.outdir))
    assert app_module.main([]) == 0
    out = capsys.readouterr().out
    assert "Sweeper (root)" in out
    assert "Policy-rich-20" in out
    assert len([line for line in out.splitlines() if line.startswith("  ")]) == POLICIES + 1

    monkeypatch.setattr(stack_size, "CFN_MAX_RESOURCES", 100)
    assert app_module.main([]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "Traceback" not in err
    assert "Policy-rich-01 holds" in err
    assert "CloudFormation allows 100 resources" in err


def test_a_template_over_the_limit_is_one_line_naming_it() -> None:
    sizes = [
        TemplateSize("Sweeper (root)", Path("root.json"), 120, 30),
        TemplateSize("Policy-big", Path("big.json"), CFN_MAX_RESOURCES + 1, 40),
    ]
    with pytest.raises(ConfigError, match=r"^Policy-big holds 501 resources: ") as caught:
        check(sizes)
    assert "\n" not in str(caught.value)


def test_changing_one_policy_leaves_anothers_nested_template_as_it_was(
    tmp_path_factory: pytest.TempPathFactory, synth_variant: Callable[[dict[str, Any]], Synth]
) -> None:
    folder = tmp_path_factory.mktemp("one-change")
    before, after = folder / "before.toml", folder / "after.toml"
    text = (FIXTURES / "two_policies.toml").read_text(encoding="utf-8")
    header, exports, sessions = text.split("[[policies]]")
    changed = sessions.replace("limit = 600", "limit = 300").replace(
        "memory_mb = 1024", "memory_mb = 2048"
    )
    assert changed != sessions
    before.write_text(text)
    # stale-sessions changed, and listed first: neither its content nor the order matters
    after.write_text(f"{header}[[policies]]{changed.rstrip()}\n\n[[policies]]{exports}")
    old, new = synth_variant({"config": str(before)}), synth_variant({"config": str(after)})
    assert old.nested_json["stale-sessions"] != new.nested_json["stale-sessions"]
    # exports is untouched: its template and its nested stack's logical ID in the root
    assert old.nested_json["exports"] == new.nested_json["exports"]
    assert _nested_stack_ids(old) == _nested_stack_ids(new)


def _nested_stack_ids(synth: Synth) -> list[str]:
    return sorted(
        logical_id
        for logical_id, r in synth.root_json["Resources"].items()
        if r["Type"] == "AWS::CloudFormation::Stack"
    )

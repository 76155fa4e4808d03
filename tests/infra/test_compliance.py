"""cdk-nag and cfn-lint: what an AWS reviewer would run on the template.

cdk-nag v3 runs the AwsSolutions pack as a CDK policy-validation plugin: an unacknowledged
error fails synth, and every finding (error or warning) lands in validation-report.json. Both are
checked here, for each variant of the app.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.infra.conftest import Synth

NAG_PACK = "AwsSolutions"
#: cfn-lint warnings that CDK itself produces and that change nothing: a DependsOn next to a
#: GetAtt that already orders the same two resources.
ACCEPTED_CFN_LINT_WARNINGS = {"W3005"}
#: The cfn-lint of the environment the tests run in.
CFN_LINT = str(Path(sys.executable).parent / "cfn-lint")
CFN_LINT_ERRORS = 2


def _violations(report: dict[str, Any]) -> list[str]:
    return [
        f"{violation['ruleName']} at {construct['constructPath']}"
        for plugin in report["pluginReports"]
        for violation in plugin.get("violations", [])
        for construct in violation["violatingConstructs"]
    ]


def test_cdk_nag_reports_no_unacknowledged_finding(every_variant: Synth) -> None:
    assert every_variant.validation_error is None, _violations(every_variant.report)
    nag_reports = [p for p in every_variant.report["pluginReports"] if p["pluginName"] == NAG_PACK]
    assert [v for p in nag_reports for v in p.get("violations", [])] == []


def test_default_synth_reports_nothing_at_all(default: Synth) -> None:
    assert _violations(default.report) == []


def test_every_acknowledgment_names_one_finding_and_gives_a_reason(every_variant: Synth) -> None:
    seen = 0
    for resource in every_variant.template_json["Resources"].values():
        rules = resource.get("Metadata", {}).get("cdk_nag", {}).get("rules_to_suppress", [])
        for rule in rules:
            if not rule["id"].startswith(f"{NAG_PACK}-"):
                continue  # CDK's own acknowledgments of its validator's rules
            seen += 1
            assert len(rule["reason"].split()) >= 8, rule
            if rule["id"].startswith(f"{NAG_PACK}-IAM"):
                assert "[" in rule["id"], f"{rule['id']} must name the one finding it accepts"
    assert seen > 0


def test_cfn_lint_finds_no_error(every_variant: Synth) -> None:
    # The root template and each policy's nested one
    assert_cfn_lint_clean(every_variant.template_files)


def assert_cfn_lint_clean(templates: list[Path]) -> None:
    """cfn-lint finds no error in `templates`, and no warning but the accepted ones."""
    result = subprocess.run(
        [CFN_LINT, "--format", "json", *map(str, templates)],
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
    )
    # Exit status is a bit mask: 2 errors, 4 warnings, 8 informational; anything else broke.
    assert result.returncode & ~(CFN_LINT_ERRORS | 4 | 8) == 0, result.stderr
    findings = json.loads(result.stdout)
    errors = [f for f in findings if f["Level"] == "Error"]
    assert errors == []
    assert not result.returncode & CFN_LINT_ERRORS
    unexpected = {f["Rule"]["Id"] for f in findings} - ACCEPTED_CFN_LINT_WARNINGS
    assert unexpected == set(), findings

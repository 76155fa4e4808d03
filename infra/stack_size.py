"""How many resources (and outputs) each synthesized template holds, against CloudFormation's
limits: `make synth` prints one line per stack and fails in one line when a template is over.

CDK's own check (a traceback naming only the first stack over 500) is switched off by the app
(STACK_RESOURCE_LIMIT_CONTEXT = 0): this one counts every template, the nested ones included.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from sweeper.errors import ConfigError
from sweeper_tools.planning.stack_estimate import CFN_MAX_OUTPUTS, CFN_MAX_RESOURCES

#: CDK context: its resource limit per stack, 0 for none (this module checks instead).
STACK_RESOURCE_LIMIT_CONTEXT = "@aws-cdk/core:stackResourceLimit"


@dataclass(frozen=True)
class TemplateSize:
    """One synthesized template: which stack, how many resources and outputs."""

    label: str
    template_file: Path
    resources: int
    outputs: int


def measure(label: str, template_file: Path) -> TemplateSize:
    """Count the resources and outputs of one synthesized template."""
    template = json.loads(template_file.read_text(encoding="utf-8"))
    return TemplateSize(
        label,
        template_file,
        len(template.get("Resources", {})),
        len(template.get("Outputs", {})),
    )


def report(sizes: list[TemplateSize]) -> str:
    """One line a stack: its resources against the limit."""
    width = max(len(size.label) for size in sizes)
    lines = [f"resources per stack (CloudFormation allows {CFN_MAX_RESOURCES} a stack):"]
    lines += [
        f"  {size.label:<{width}}  {size.resources:>4}  ({size.outputs} outputs)" for size in sizes
    ]
    return "\n".join(lines)


def check(sizes: list[TemplateSize]) -> None:
    """Raise a one-line ConfigError naming every template over a CloudFormation limit."""
    over = [
        f"{size.label} holds {size.resources} resources"
        for size in sizes
        if size.resources > CFN_MAX_RESOURCES
    ]
    over += [
        f"{size.label} has {size.outputs} outputs"
        for size in sizes
        if size.outputs > CFN_MAX_OUTPUTS
    ]
    if over:
        raise ConfigError(
            f"{'; '.join(over)}: CloudFormation allows {CFN_MAX_RESOURCES} resources and "
            f"{CFN_MAX_OUTPUTS} outputs a stack (split the policy file into two deployments, "
            "each with its own stack_name)"
        )

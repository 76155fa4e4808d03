"""CDK app entry: `python -m infra.app` (what cdk.json runs, and `make synth`).

Reads the deployment options from CDK context and the policy file they name (default
`sweeper.toml`), validates it with the same model the Lambdas use, and synthesizes one stack
with the cdk-nag AwsSolutions pack. Offline: no AWS lookups, no Docker. Outside the CDK CLI,
the context of cdk.json applies and `-c key=value` works as with `cdk synth`.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

from aws_cdk import App, Validations
from cdk_nag import AwsSolutionsChecks

from infra.options import DeploymentOptions
from infra.packaging import REPO_ROOT
from infra.stack import SweeperStack
from infra.stack_size import STACK_RESOURCE_LIMIT_CONTEXT, check, report
from layers.build import DEPS_LAYER_DIR, is_up_to_date
from sweeper.errors import ConfigError
from sweeper_tools.policy_file import load_config

DEFAULT_OUTDIR = "cdk.out"
CDK_JSON = REPO_ROOT / "cdk.json"
#: How a policy-validation failure (cdk-nag included) surfaces from synth.
VALIDATION_FAILED = "ValidationFailed"


def build_app(
    context: dict[str, Any] | None = None,
    *,
    deps_layer_dir: Path = DEPS_LAYER_DIR,
    outdir: str | None = None,
) -> tuple[App, SweeperStack]:
    """Construct the app and its stack (tests call this with their own context)."""
    # Every template is counted after synth (infra/stack_size.py), not only CDK's first over.
    app = App(context={STACK_RESOURCE_LIMIT_CONTEXT: 0, **(context or {})}, outdir=outdir)
    options = DeploymentOptions.from_context(app.node)
    config_path = options.config if options.config.is_absolute() else REPO_ROOT / options.config
    config = load_config(config_path)
    stack = SweeperStack(
        app, options.stack_name, config=config, options=options, deps_layer_dir=deps_layer_dir
    )
    # cdk-nag v3 runs as a policy-validation plugin, registered on the app: any finding that is
    # not acknowledged (with its reason, next to the resource) fails synth.
    Validations.of(app).add_plugins(
        AwsSolutionsChecks(app, verbose=True, write_suppressions_to_cloud_formation=True)
    )
    return app, stack


def _context_from_command_line(argv: list[str]) -> dict[str, Any]:
    """cdk.json's context, then `-c key=value` pairs (the CLI passes its own instead)."""
    context: dict[str, Any] = {}
    if "CDK_CONTEXT_JSON" not in os.environ and CDK_JSON.is_file():
        context.update(json.loads(CDK_JSON.read_text(encoding="utf-8")).get("context", {}))
    args = iter(argv)
    for arg in args:
        if arg in ("-c", "--context"):
            key, _, value = next(args, "").partition("=")
            context[key] = value
    return context


def main(argv: list[str] | None = None) -> int:
    context = _context_from_command_line(sys.argv[1:] if argv is None else argv)
    try:
        outdir = os.environ.get("CDK_OUTDIR", DEFAULT_OUTDIR)
        app, stack = build_app(context, outdir=outdir)
        if not is_up_to_date():
            raise ConfigError("the deps layer is stale: run `make layers` first")
        app.synth()
        sizes = stack.template_sizes(Path(outdir))
        sys.stdout.write(report(sizes) + "\n")
        check(sizes)
    except ConfigError as exc:
        sys.stderr.write(f"sweeper: {exc}\n")
        return 2
    except RuntimeError as exc:
        # cdk-nag or CloudFormation validation (the report above names each finding), or
        # anything else CDK refuses: its first line, never a traceback.
        sys.stderr.write(f"sweeper: {first_line(str(exc))}\n")
        return 1
    return 0


def first_line(message: str) -> str:
    """A CDK error's first line (jsii appends the JavaScript stack)."""
    return message.strip().splitlines()[0] if message.strip() else "synth failed"


if __name__ == "__main__":
    sys.exit(main())

"""Run a command (`make mutate` runs mutmut) with one set of local services for all its tests.

mutmut runs pytest once per mutant, so every session-scoped fixture starts again for each one:
a new PostgreSQL cluster (initdb, start, migrate) and a new moto server cost seconds, while most
mutants are killed by a test that takes a tenth of that. Here they are started once: one
cluster with one migrated template database, and one moto server. The fixtures in
tests/conftest.py use them when `DATABASE_URL`, `SWEEPER_TEST_TEMPLATE_DB` and
`SWEEPER_TEST_AWS_ENDPOINT` (with `SWEEPER_TEST_LITE_AWS_ENDPOINT`, the stand-in serving SQS and
DynamoDB) are set. Every test still gets a database of its own (a copy of the
template) and queues and tables under a name of its own, so concurrent mutants do not meet.

With `--module NAME`, the pyproject.toml in the working directory (the copy mutmut runs in) is
narrowed first to that module and its test selection, from `[tool.sweeper-mutate.NAME]`.

Usage: python tests/mutate_services.py [--module NAME] COMMAND [ARG...]
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import tomllib
from pathlib import Path

from sweeper.ledger.migrate import migrate
from sweeper_local.aws import LocalAws
from sweeper_local.postgres import LocalPostgres

TEMPLATE_DB = "sweeper_template_shared"
USAGE = "usage: python tests/mutate_services.py [--module NAME] COMMAND [ARG...]"


def narrow_to_module(pyproject: Path, module: str) -> None:
    """Point [tool.mutmut] of this copy at one module and its own test selection."""
    text = pyproject.read_text(encoding="utf-8")
    modules = tomllib.loads(text)["tool"]["sweeper-mutate"]
    if module not in modules:
        raise SystemExit(f"unknown module {module!r}: one of {', '.join(sorted(modules))}")
    chosen = modules[module]
    for key, value in (
        ("only_mutate", chosen["only_mutate"]),
        ("pytest_add_cli_args_test_selection", chosen["tests"]),
    ):
        text, found = re.subn(
            rf"^{key} = \[.*?^\]", f"{key} = {json.dumps(value)}", text, count=1, flags=re.M | re.S
        )
        assert found == 1, f"{key} not found in {pyproject}"
    pyproject.write_text(text, encoding="utf-8")


def main(argv: list[str]) -> int:
    if argv[:1] == ["--module"]:
        if len(argv) < 2:
            print(USAGE, file=sys.stderr)
            return 2
        narrow_to_module(Path("pyproject.toml"), argv[1])
        argv = argv[2:]
    if not argv:
        print(USAGE, file=sys.stderr)
        return 2
    with LocalPostgres() as pg, LocalAws() as aws:
        migrate(pg.create_database(TEMPLATE_DB))
        env = {
            **os.environ,
            "DATABASE_URL": pg.url,
            "SWEEPER_TEST_TEMPLATE_DB": TEMPLATE_DB,
            "SWEEPER_TEST_AWS_ENDPOINT": aws.endpoint_url,
            "SWEEPER_TEST_LITE_AWS_ENDPOINT": aws.lite_endpoint_url or "",
        }
        child = subprocess.Popen(argv, env=env)

        def stop(signum: int, _frame: object) -> None:
            child.send_signal(signum)  # the command stops first, then the services (with: exit)

        signal.signal(signal.SIGTERM, stop)
        try:
            return child.wait()
        except KeyboardInterrupt:  # the terminal sent SIGINT to the command too
            return child.wait()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""Run a command (`make mutate` runs mutmut) with one set of local services for all its tests.

mutmut runs pytest once per mutant, so every session-scoped fixture starts again for each one:
a new PostgreSQL cluster (initdb, start, migrate) and a new moto server cost seconds, while most
mutants are killed by a test that takes a tenth of that. Here they are started once: one
cluster with one migrated template database, and one moto server. The fixtures in
tests/conftest.py use them when `DATABASE_URL`, `SWEEPER_TEST_TEMPLATE_DB` and
`SWEEPER_TEST_AWS_ENDPOINT` are set. Every test still gets a database of its own (a copy of the
template) and queues and tables under a name of its own, so concurrent mutants do not meet.

Usage: python tests/mutate_services.py COMMAND [ARG...]
"""

from __future__ import annotations

import os
import subprocess
import sys

from sweeper.ledger.migrate import migrate
from sweeper.local.aws import LocalAws
from sweeper.local.postgres import LocalPostgres

TEMPLATE_DB = "sweeper_template_shared"


def main(argv: list[str]) -> int:
    if not argv:
        print("usage: python tests/mutate_services.py COMMAND [ARG...]", file=sys.stderr)
        return 2
    with LocalPostgres() as pg, LocalAws() as aws:
        migrate(pg.create_database(TEMPLATE_DB))
        env = {
            **os.environ,
            "DATABASE_URL": pg.url,
            "SWEEPER_TEST_TEMPLATE_DB": TEMPLATE_DB,
            "SWEEPER_TEST_AWS_ENDPOINT": aws.endpoint_url,
        }
        return subprocess.call(argv, env=env)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

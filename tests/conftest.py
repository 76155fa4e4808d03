"""Fixtures for every tier: the real local services are started once per test session.

PostgreSQL: `DATABASE_URL` when set, else a disposable local cluster. Each test that needs the
ledger gets a database of its own, copied from a migrated template (fast, and nothing leaks).
`SWEEPER_TEST_TEMPLATE_DB` names a template already migrated on that server, and
`SWEEPER_TEST_AWS_ENDPOINT` a moto server already running (and `SWEEPER_TEST_LITE_AWS_ENDPOINT`
the stand-in serving SQS and DynamoDB): tests/mutate_services.py sets them so that mutation
testing starts these services once, not once per mutant. SQS and DynamoDB are served by the
stand-in (sweeper_local.lite_aws), as everywhere locally; `SWEEPER_LOCAL_AWS=moto` puts them
back on moto.
"""

from __future__ import annotations

import itertools
import json
import os
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import psycopg
import pytest
from psycopg import sql

from sweeper import runtime
from sweeper.config import ConsumerConfig, HttpActionConfig, Policy
from sweeper.ledger.migrate import migrate
from sweeper.ledger.store import Ledger
from sweeper.models import NewJob
from sweeper.scheduling import schedule_jobs
from sweeper_local.aws import LocalAws, PipelineResources, provision
from sweeper_local.lambda_runtime import LocalLambdaContext
from sweeper_local.postgres import LocalPostgres
from sweeper_local.vendor import VendorSimulator

EVENTS_DIR = Path(__file__).resolve().parent.parent / "events"
TEMPLATE_DB = "sweeper_template"
#: The `pipeline` fixture's consumer timeout; its work queue's visibility timeout is six of them.
PIPELINE_CONSUMER_TIMEOUT_SECONDS = 10
_db_counter = itertools.count()


#: The test files that take longest (seconds of one worker, measured with `--durations=0` under
#: `make test`), run first: xdist deals whole files (`--dist loadfile`) in collection order (its
#: own reorder, by number of tests, is off: `--no-loadscope-reorder`), so a slow file dealt last
#: would run alone at the end while the other workers idle. Measured on 2026-12-02 at 105d7b1:
#: test_operator_api 193 s, test_bench_rate 183, test_console 142, test_demo 137, test_checks 83,
#: test_event_source 74, test_console_api 51, test_release 46, test_compliance 41.
RUN_FIRST = (
    "tests/integration/test_operator_api.py",
    "tests/integration/test_bench_rate.py",
    "tests/integration/test_console.py",
    "tests/integration/test_demo.py",
    "tests/integration/test_checks.py",
    "tests/integration/test_event_source.py",
    "tests/integration/test_console_api.py",
    "tests/integration/test_release.py",
    "tests/infra/test_compliance.py",
    "tests/integration/test_listings_example.py",
    "tests/integration/test_payments_example.py",
    "tests/integration/test_console_browser.py",
)


def run_first_order(nodeid: str) -> int:
    """Where a test's file comes in RUN_FIRST (after them all when it is not listed)."""
    path = nodeid.split("::", 1)[0]
    return RUN_FIRST.index(path) if path in RUN_FIRST else len(RUN_FIRST)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # A stable sort: within each file, and among the files not listed, the collection order.
    items.sort(key=lambda item: run_first_order(item.nodeid))


#: Test folders dealt to one worker as a whole: every file of tests/infra reads the same
#: synthesized templates (session fixtures, seconds of CDK each), which one worker makes once
#: where four would each make them.
ONE_WORKER_FOLDERS = ("tests/infra/",)


def work_unit(nodeid: str) -> str:
    """What `--dist loadfile` deals to one worker: a test's file, or its whole folder when the
    folder is in ONE_WORKER_FOLDERS."""
    path = nodeid.split("::", 1)[0]
    for folder in ONE_WORKER_FOLDERS:
        if path.startswith(folder):
            return folder
    return path


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """`--dist loadfile`, its work units being `work_unit`'s. (xdist_group marks would say
    this, but pytest-xdist 3.8 under pytest 9.2 ignores them: docs/decisions.md.)"""
    if config.getoption("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class FoldersAndFiles(LoadFileScheduling):  # type: ignore[misc]  # xdist ships no types
        def _split_scope(self, nodeid: str) -> str:
            return work_unit(nodeid)

    return FoldersAndFiles(config, log)


def load_event(name: str) -> dict[str, Any]:
    """One sample event from events/ (the only place tests take events from)."""
    data: dict[str, Any] = json.loads((EVENTS_DIR / name).read_text(encoding="utf-8"))
    return data


class PgServer:
    """Where the test PostgreSQL listens, and how to make a database on it."""

    def __init__(self, admin_url: str) -> None:
        self.admin_url = admin_url

    def url_for(self, dbname: str) -> str:
        info = psycopg.conninfo.conninfo_to_dict(self.admin_url)
        info["dbname"] = dbname
        return psycopg.conninfo.make_conninfo(**info)  # type: ignore[arg-type]

    def create_database(self, name: str, template: str | None = None) -> str:
        with psycopg.connect(self.admin_url, autocommit=True) as conn:
            conn.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )
            if template is None:
                conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
            else:
                conn.execute(
                    sql.SQL("CREATE DATABASE {} TEMPLATE {}").format(
                        sql.Identifier(name), sql.Identifier(template)
                    )
                )
        return self.url_for(name)

    def drop_database(self, name: str) -> None:
        with psycopg.connect(self.admin_url, autocommit=True) as conn:
            conn.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )


@pytest.fixture(scope="session")
def pg_server() -> Iterator[PgServer]:
    external = os.environ.get("DATABASE_URL")
    if external:
        yield PgServer(external)
        return
    with LocalPostgres() as local:
        yield PgServer(local.url)


@pytest.fixture(scope="session")
def pg_template(pg_server: PgServer) -> str:
    prepared = os.environ.get("SWEEPER_TEST_TEMPLATE_DB")
    if prepared:
        return prepared
    url = pg_server.create_database(TEMPLATE_DB)
    migrate(url)
    return TEMPLATE_DB


@pytest.fixture
def fresh_db_url(pg_server: PgServer) -> Iterator[str]:
    """An empty database, for migration tests."""
    name = f"sweeper_t{os.getpid()}_{next(_db_counter)}"
    yield pg_server.create_database(name)
    pg_server.drop_database(name)


@pytest.fixture
def db_url(pg_server: PgServer, pg_template: str) -> Iterator[str]:
    """A migrated database of this test's own."""
    name = f"sweeper_t{os.getpid()}_{next(_db_counter)}"
    yield pg_server.create_database(name, template=pg_template)
    pg_server.drop_database(name)


@pytest.fixture
def ledger(db_url: str) -> Iterator[Ledger]:
    store = Ledger(db_url)
    yield store
    store.close()


@pytest.fixture(scope="session")
def local_aws() -> Iterator[LocalAws]:
    """moto in server mode: a real HTTP endpoint for SQS and DynamoDB."""
    external = os.environ.get("SWEEPER_TEST_AWS_ENDPOINT")
    if external:
        port = urlsplit(external).port
        assert port is not None, "SWEEPER_TEST_AWS_ENDPOINT needs a port"
        lite = urlsplit(os.environ.get("SWEEPER_TEST_LITE_AWS_ENDPOINT", "")).port or 0
        yield LocalAws(port=port, lite_port=lite)  # already running; not started or stopped here
        return
    # SQS and DynamoDB on the stand-in (sweeper_local.lite_aws), as the demo and the drills run;
    # SWEEPER_LOCAL_AWS=moto runs the same tests with them on moto.
    with LocalAws() as aws:
        yield aws


@pytest.fixture
def aws_env(local_aws: LocalAws, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """Point every boto3 client of this test at moto, as the local stack does."""
    env = local_aws.env()
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return env


@pytest.fixture
def unique_name() -> str:
    return f"t{uuid.uuid4().hex[:10]}"


@pytest.fixture
def table(local_aws: LocalAws, unique_name: str) -> str:
    """A limiter table of this test's own."""
    return provision(
        local_aws.sqs(), local_aws.dynamodb(), Policy(name="p"), prefix=unique_name
    ).limiter_table


@pytest.fixture
def vendor() -> Iterator[VendorSimulator]:
    """The vendor simulator: a real HTTP server with an audit of calls and effects."""
    with VendorSimulator() as sim:
        yield sim


@dataclass
class Pipeline:
    """One policy's pipeline wired as on AWS: ledger, queue + DLQ, idempotency table, vendor."""

    policy: Policy
    ledger: Ledger
    resources: PipelineResources
    vendor: VendorSimulator
    aws: LocalAws
    env: dict[str, str]

    def seed(self, n: int, tenants: int = 3) -> None:
        now = datetime.now(UTC)
        jobs = [
            NewJob(f"tenant-{i % tenants}", f"obj-{i:05d}", now - timedelta(seconds=1))
            for i in range(n)
        ]
        schedule_jobs(self.ledger, self.policy, jobs, now)

    def lambda_context(self, name: str = "consumer") -> LocalLambdaContext:
        timeout = self.policy.consumer.timeout_seconds if name == "consumer" else 60
        return LocalLambdaContext(function_name=f"sweeper-{name}", timeout_seconds=timeout)


def function_env(policy: Policy, db_url: str, resources: PipelineResources) -> dict[str, str]:
    """The environment the CDK app gives a policy's functions, on the local stack."""
    return {
        "SWEEPER_POLICY": policy.model_dump_json(),
        "SWEEPER_DATABASE_URL": db_url,
        "SWEEPER_QUEUE_URL": resources.queue_url,
        "SWEEPER_IDEMPOTENCY_TABLE": resources.idempotency_table,
        "SWEEPER_LIMITER_TABLE": resources.limiter_table,
        "SWEEPER_DLQ_URL": resources.dlq_url,
        "POWERTOOLS_SERVICE_NAME": "sweeper",
    }


@pytest.fixture
def pipeline(
    db_url: str,
    local_aws: LocalAws,
    aws_env: dict[str, str],
    vendor: VendorSimulator,
    unique_name: str,
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[Pipeline]:
    """Everything a handler needs, with the function environment set as the CDK app sets it."""
    policy = Policy(
        name="exports",
        action=HttpActionConfig(
            api_url=vendor.url, allow_plain_http=True, read_timeout_seconds=2.0
        ),
        # A short function timeout keeps the queue's visibility timeout (six of them) short.
        consumer=ConsumerConfig(timeout_seconds=PIPELINE_CONSUMER_TIMEOUT_SECONDS),
    )
    resources = provision(local_aws.sqs(), local_aws.dynamodb(), policy, prefix=unique_name)
    env = {**aws_env, **function_env(policy, db_url, resources)}
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    runtime.reset()
    store = Ledger(db_url)
    yield Pipeline(policy, store, resources, vendor, local_aws, env)
    store.close()
    runtime.reset()

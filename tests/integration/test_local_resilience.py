"""The local stack's long-running parts outlive a transient fault, as the deployed system does.

On AWS a database restart fails the invocations that were running; the records come back and
the next ones succeed. Locally, the pause watcher, the producer ticker and the event source must
likewise log the fault, back off and carry on, not die and leave the stack looking alive.
"""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime
from pathlib import Path

import pytest

from sweeper.ledger.migrate import migrate
from sweeper.ledger.store import Ledger
from sweeper.models import JobStatus, NewJob
from sweeper.scheduling import schedule_jobs
from sweeper_local.aws import LocalAws
from sweeper_local.background import LocalConsoleStack
from sweeper_local.poller import EventSourceConfig, LocalEventSource, run_until
from sweeper_local.postgres import LocalPostgres
from sweeper_tools.policy_file import load_config
from tests.event_source_handlers import JOURNAL_ENV

pytestmark = pytest.mark.integration

#: One policy with a short consumer timeout (room for one call after the consumer's safety
#: margin); the work queue gets the shortest visibility timeout Lambda accepts, the function
#: timeout, so that a batch failed by the restart comes back soon.
CONSUMER_TIMEOUT_SECONDS = 7
CONFIG = f"""
[[policies]]
name = "exports"
schedule = "rate(1 minute)"
lease_seconds = 60
producer_budget_seconds = 5

[policies.quota]
limit = 50
period_seconds = 1.0

[policies.consumer]
reserved_concurrency = 2
max_concurrency = 2
timeout_seconds = {CONSUMER_TIMEOUT_SECONDS}
"""


def _seed(url: str, stack: LocalConsoleStack, first: int, count: int) -> None:
    policy = stack.policies["exports"].policy
    ledger = Ledger(url)
    try:
        now = datetime.now(UTC)
        jobs = [NewJob("tenant-1", f"object-{i:03d}", now) for i in range(first, first + count)]
        schedule_jobs(ledger, policy, jobs, now)
    finally:
        ledger.close()


def _succeeded(url: str) -> int:
    ledger = Ledger(url)
    try:
        return ledger.counts("exports")[JobStatus.SUCCEEDED]
    finally:
        ledger.close()


def test_the_local_stack_outlives_a_database_restart(tmp_path: Path) -> None:
    config_path = tmp_path / "sweeper.toml"
    config_path.write_text(CONFIG, encoding="utf-8")
    with LocalPostgres() as pg:
        migrate(pg.url)
        with LocalConsoleStack(
            load_config(config_path),
            config_path=str(config_path),
            database_url=pg.url,
            tick_seconds=1.0,
            visibility_timeout_seconds=CONSUMER_TIMEOUT_SECONDS,
        ) as stack:
            # Given the local stack at work
            _seed(pg.url, stack, 0, 3)
            assert run_until(lambda: _succeeded(pg.url) == 3, timeout_seconds=60)
            # When PostgreSQL restarts under it (every session ended with 57P01 admin_shutdown,
            # connections refused until it is back). A fast shutdown: an immediate one with
            # this cluster's synchronous_commit=off may also lose the last commits (a lease
            # reclaim then redoes them, a minute later).
            pg.restart(immediate=False)
            # Then the pause watcher met the fault and went on
            assert run_until(lambda: stack.ledger_errors >= 1, timeout_seconds=15)
            assert stack.failure() is None
            # And new work is still produced and consumed (the failed runs and batches retried)
            _seed(pg.url, stack, 3, 3)
            assert run_until(lambda: _succeeded(pg.url) == 6, timeout_seconds=90)
            # And the watcher still follows the paused flag
            ledger = Ledger(pg.url)
            try:
                ledger.pause("exports", "test", "after a restart", datetime.now(UTC))
            finally:
                ledger.close()
            assert run_until(lambda: stack.policies["exports"].paused, timeout_seconds=15)
            assert stack.failure() is None


def test_the_event_source_outlives_the_emulator_restarting(tmp_path: Path) -> None:
    with LocalAws() as aws:
        sqs = aws.sqs()
        name = f"evsrc-{uuid.uuid4().hex[:12]}"

        def make_queue() -> str:
            return sqs.create_queue(QueueName=name, Attributes={"VisibilityTimeout": "6"})[
                "QueueUrl"
            ]

        url = make_queue()
        arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"][
            "QueueArn"
        ]
        journal = tmp_path / "journal.jsonl"
        source = LocalEventSource(
            sqs,
            EventSourceConfig(
                queue_url=url,
                queue_arn=arn,
                function="tests.event_source_handlers:handler",
                timeout_seconds=1,
            ),
            {JOURNAL_ENV: str(journal)},
        ).start()
        try:
            source.wait_until_warm(60)
            # Given the emulator goes away under a running event source
            aws.stop()
            assert run_until(lambda: source.stats.sqs_errors >= 1, timeout_seconds=15)
            # When it comes back (empty, as moto restarts) and the queue is made again
            aws.start()
            assert make_queue() == url
            sent = sqs.send_message(QueueUrl=url, MessageBody="{}")["MessageId"]
            # Then the event source delivers again, never having stopped
            assert run_until(
                lambda: journal.exists() and sent in journal.read_text(encoding="utf-8"),
                timeout_seconds=30,
            )
            assert source.error is None
            ends = [json.loads(line) for line in journal.read_text(encoding="utf-8").splitlines()]
            assert [e["ids"] for e in ends if e["event"] == "end"] == [[sent]]
        finally:
            source.stop()

"""The ledger writes a job costs, measured on PostgreSQL: what `sweeper plan` bills as Aurora I/O.

Aurora (Standard) bills a write I/O for each push of up to 4 KB of log records to its storage; a
transaction's log under 4 KB is one, and concurrent commits may share one. So a job costs at most
its write transactions, or its log bytes over 4 KB where those are more. Reads cost an I/O only
when a page is not in the buffer cache; the rows a drain touches were written moments before.
"""

from __future__ import annotations

from typing import Any

import psycopg
import pytest

from functions.consumer import app as consumer_app
from sweeper.models import JobStatus
from sweeper_tools.planning.costs import AURORA_IOS_PER_JOB, LOG_BYTES_PER_WRITE_IO
from tests.conftest import Pipeline
from tests.integration.test_consumer import publish_all

pytestmark = pytest.mark.integration

JOBS = 100
BATCH = 10


def _position(db_url: str) -> tuple[int, int]:
    """(transactions that wrote so far, WAL position in bytes). Reading the transaction id
    takes one itself, counted out below."""
    with psycopg.connect(db_url, autocommit=True) as conn:
        row = conn.execute(
            "SELECT pg_current_xact_id()::text::bigint,"
            " pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::bigint"
        ).fetchone()
    assert row is not None
    return int(row[0]), int(row[1])


def test_a_job_costs_the_ledger_about_one_write_transaction(pipeline: Pipeline) -> None:
    # Given the ledger's position before a hundred jobs arrive
    db_url = pipeline.env["SWEEPER_DATABASE_URL"]
    xid_before, wal_before = _position(db_url)
    # When they are scheduled, claimed and published, and settled in batches of ten
    pipeline.seed(JOBS)
    records = publish_all(pipeline)
    assert len(records) == JOBS
    for start in range(0, JOBS, BATCH):
        event: dict[str, Any] = {"Records": records[start : start + BATCH]}
        response = consumer_app.handler(event, pipeline.lambda_context())
        assert response["batchItemFailures"] == []
    assert pipeline.ledger.counts(pipeline.policy.name)[JobStatus.SUCCEEDED] == JOBS
    xid_after, wal_after = _position(db_url)
    # Then the write transactions (each under 4 KB of log: one I/O at most) and the log bytes a
    # job are within what the plan bills
    writes_per_job = (xid_after - xid_before - 1) / JOBS
    log_per_job = (wal_after - wal_before) / JOBS
    measured = max(writes_per_job, log_per_job / LOG_BYTES_PER_WRITE_IO)
    figures = f"write transactions a job {writes_per_job:.3f}, log bytes a job {log_per_job:.0f}"
    assert measured <= AURORA_IOS_PER_JOB, figures
    # and the bill is not far above it either (it follows the code, not an old guess)
    assert measured + 0.25 >= AURORA_IOS_PER_JOB, figures

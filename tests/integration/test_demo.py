"""`sweeper demo`: the whole pipeline, locally, real at every hop."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from sweeper_cli import main
from sweeper_local.demo import DemoOptions, run_demo
from sweeper_local.doors import DEMO_STRAY_KEYS
from sweeper_local.vendor import VendorProcess
from tests.conftest import PgServer

pytestmark = pytest.mark.integration


def test_the_demo_settles_every_job_once_with_one_key_per_object(pg_server: PgServer) -> None:
    url = pg_server.create_database("sweeper_demo_1")
    report = run_demo(
        DemoOptions(jobs=120, tenants=4, consumers=3, database_url=url, timeout_seconds=240)
    )
    assert report.all_final
    assert (report.succeeded, report.terminal, report.pending) == (120, 0, 0)
    assert (report.vendor_calls, report.vendor_effects) == (120, 120)
    assert (report.idempotency_keys, report.max_keys_per_object) == (120, 1)
    assert report.published == report.discovered == 120
    # Each job's message was acknowledged exactly once: none duplicated, none lost (deliveries
    # beyond these were sent back to the queue, e.g. to wait for a slot)
    assert report.acknowledged == 120
    assert (report.duplicates, report.retries, report.leases_reclaimed, report.released) == (
        0,
        0,
        0,
        0,
    )
    assert (report.publish_failures, report.vendor_429s, report.throttle_events) == (0, 0, 0)


def test_the_demo_against_an_external_strict_vendor_causes_no_429(
    pg_server: PgServer, tmp_path: Path
) -> None:
    # Given a vendor that speaks the contract, in another process, with a strict quota
    vendor = VendorProcess("--rate", "20/1s", "--scope", "global")
    try:
        url = pg_server.create_database("sweeper_demo_2")
        # When the CLI runs the demo against it
        result = CliRunner().invoke(
            main,
            [
                "demo",
                *("--rate", "20/1s", "--jobs", "80", "--tenants", "3", "--consumers", "4"),
                *("--database-url", url, "--api-url", vendor.url, "--json"),
                *("--source", "sql", "--local-file", str(tmp_path / "local.json")),
            ],
        )
        audit = vendor.audit()
    finally:
        vendor.stop()
    # Then every job succeeded with one effect each, as seen by that vendor, and the vendor's
    # quota never answered 429 to sweeper
    assert result.exit_code == 0, result.output
    assert (audit.quota_rejections, audit.throttled_total) == (0, 0)
    assert audit.max_calls_in_window <= 20
    report = json.loads(result.output.strip().splitlines()[-1])
    # and the quota bound: 80 calls at 20/s took the limiter's waits, and it never throttled us
    assert report["limiter_waits"] > 0
    assert (report["throttle_events"], report["vendor_429s"]) == (0, 0)
    assert (report["succeeded"], report["vendor_effects"], report["max_keys_per_object"]) == (
        80,
        80,
        1,
    )


def test_the_demo_brings_obligations_in_by_every_door_and_reports_each_door(
    pg_server: PgServer, tmp_path: Path
) -> None:
    # Given a system-of-record database, a bucket, the webhook on loopback and the intake
    # queue, each door bringing a quarter of the obligations
    url = pg_server.create_database("sweeper_demo_doors")
    local_file = tmp_path / "local.json"
    seen: list[dict[str, Any]] = []

    def progress(done: int, total: int) -> None:
        if not seen:  # what a sender reads while the demo runs
            seen.append(json.loads(local_file.read_text(encoding="utf-8")))

    # When the demo feeds the ledger through every door and runs the pipeline
    report = run_demo(
        DemoOptions(
            jobs=60,
            tenants=3,
            consumers=2,
            database_url=url,
            timeout_seconds=240,
            sources=("sql", "s3", "webhook", "file"),
            local_file=local_file,
        ),
        progress,
    )
    # Then each door brought its quarter in, the bucket's stray keys were rejected, and every
    # obligation settled once
    doors = {d["door"]: (d["seeded"], d["brought_in"], d["rejected"]) for d in report.doors}
    assert doors == {
        "sql": (15, 15, 0),
        "s3": (15, 15, len(DEMO_STRAY_KEYS)),
        "webhook": (15, 15, 0),
        "file": (15, 15, 0),
    }
    assert report.all_final
    assert (report.succeeded, report.vendor_effects, report.max_keys_per_object) == (60, 60, 1)
    # and while it ran, the local file named its webhook and the secret that signs for it; it
    # is gone with the demo
    assert seen[0]["webhook_url"].startswith("http://127.0.0.1:")
    assert len(seen[0]["webhook_secret"]) == 64
    assert seen[0]["policies"][report.policy]["intake_queue_url"]
    assert report.local_file == str(local_file)
    assert not local_file.exists()

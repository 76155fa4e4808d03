"""`sweeper demo`: the whole pipeline, locally, real at every hop."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from sweeper.config import HttpActionConfig, Quota
from sweeper_cli import main
from sweeper_local.demo import (
    PROBE_CALLS,
    PROBE_TENANT,
    demo_policy,
    measure_latency,
    run_demo,
)
from sweeper_local.demo_report import DemoOptions
from sweeper_local.doors import DEMO_STRAY_KEYS
from sweeper_local.vendor import VendorProcess, VendorSimulator
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


def test_the_demo_measures_the_vendor_s_latency_on_probe_objects_of_its_own() -> None:
    # Given a vendor that takes 60-80 ms a call
    with VendorSimulator(latency_seconds=0.06, latency_jitter_seconds=0.02) as vendor:
        # When the demo measures it through the product's HTTP action
        action = HttpActionConfig(api_url=vendor.url, allow_plain_http=True)
        latency = measure_latency(action, Quota.parse("1000/1s"))
        audit = vendor.audit()
    # Then it saw that latency, from PROBE_CALLS calls one after another
    assert latency.calls == PROBE_CALLS
    assert 0.06 <= latency.p50_seconds <= latency.p95_seconds < 0.5
    assert (audit.calls_total, audit.max_in_flight) == (PROBE_CALLS, 1)
    # and called only objects of its probe tenant, never a policy's
    assert all(target.startswith(f"{PROBE_TENANT}/") for target in audit.keys_by_target)


def test_the_latency_probes_keep_the_rate_the_demo_is_about_to_keep() -> None:
    # Given a vendor that spaces calls strictly, as nginx's limit_req at 15 r/s without a burst
    # does (one call in any 1/15 s), and the demo asked to keep that rate
    rate = Quota.parse("15/1s bucket")
    with VendorSimulator(quota=(1, 1 / 15), quota_scope="global") as vendor:
        # When the demo plans its policy, measuring the vendor's latency first
        policy, latency = demo_policy(DemoOptions(rate=rate), vendor.url)
        audit = vendor.audit()
    # Then every probe went through: none was refused, each arrived at least 1/15 s after
    # the one before
    assert latency is not None
    assert latency.calls == PROBE_CALLS
    assert (audit.calls_total, audit.quota_rejections, audit.throttled_total) == (PROBE_CALLS, 0, 0)
    gaps = [b - a for a, b in zip(audit.arrivals, audit.arrivals[1:], strict=False)]
    assert min(gaps) >= 1 / 15
    assert policy.quota == rate


def test_a_team_s_own_policy_file_runs_as_it_is_against_the_simulator(
    pg_server: PgServer, tmp_path: Path
) -> None:
    # Given a team's policy file with its own quota and consumers (its vendor is not reachable
    # from here: the demo aims its action at the simulator)
    config = tmp_path / "sweeper.toml"
    config.write_text(
        "\n".join(
            [
                "[[policies]]",
                'name = "other"',
                "[[policies]]",
                'name = "exports"',
                "quota = { limit = 20, period_seconds = 1 }",
                'action = { api_url = "https://api.invalid" }',
                "consumer = { reserved_concurrency = 2, max_concurrency = 2, batch_size = 4, "
                "parallel_calls = 2, timeout_seconds = 20 }",
            ]
        )
        + "\n",
        encoding="utf-8",
    )
    url = pg_server.create_database("sweeper_demo_config")
    # When the demo runs that policy
    result = CliRunner().invoke(
        main,
        [
            "demo",
            *("--config", str(config), "--policy", "exports", "--jobs", "40", "--tenants", "2"),
            *("--database-url", url, "--source", "sql", "--json"),
            *("--local-file", str(tmp_path / "local.json")),
        ],
    )
    # Then it ran with the file's consumers, measured nothing, and settled every job once
    # within the file's quota
    assert result.exit_code == 0, result.output
    report = json.loads(result.output.strip().splitlines()[-1])
    assert report["policy"] == "exports"
    assert (report["batch_size"], report["parallel_calls"]) == (4, 2)
    assert report["latency_p50_seconds"] is None
    assert (report["succeeded"], report["vendor_effects"], report["max_keys_per_object"]) == (
        40,
        40,
        1,
    )
    assert (report["vendor_429s"], report["throttle_events"]) == (0, 0)


def test_the_listings_example_runs_as_a_demo_with_its_key_and_its_contract_audited(
    pg_server: PgServer, tmp_path: Path
) -> None:
    # Given the worked example's policy file as it is: an API key from a secret, a store and
    # an app limit, the marketplace's DELETE contract
    listings = Path(__file__).resolve().parents[2] / "docs" / "examples" / "listings.toml"
    url = pg_server.create_database("sweeper_demo_listings")
    # When the demo runs it (the key made locally, the simulator's marketplace checking it)
    result = CliRunner().invoke(
        main,
        [
            "demo",
            *("--config", str(listings), "--policy", "listings", "--jobs", "20"),
            *("--tenants", "4", "--database-url", url, "--source", "sql", "--timeout", "60"),
            "--json",
            *("--local-file", str(tmp_path / "local.json")),
        ],
    )
    # Then every listing was deleted once, as the marketplace's own audit counts its calls,
    # and neither limit answered 429
    assert result.exit_code == 0, result.output
    report = json.loads(result.output.strip().splitlines()[-1])
    assert report["all_final"]
    assert (report["succeeded"], report["terminal"]) == (20, 0)
    assert (report["vendor_calls"], report["vendor_effects"]) == (20, 20)
    assert report["max_effects_per_object"] == 1
    assert (report["vendor_429s"], report["throttle_events"]) == (0, 0)


def test_a_demo_whose_doors_refuse_every_job_is_not_final_and_says_why(
    pg_server: PgServer, tmp_path: Path
) -> None:
    # Given the payments example, whose obligations need a business_date param, and the s3
    # door, whose objects carry no params
    payments = Path(__file__).resolve().parents[2] / "docs" / "examples" / "payments.toml"
    url = pg_server.create_database("sweeper_demo_refused")
    # When the demo runs it
    result = CliRunner().invoke(
        main,
        [
            "demo",
            *("--config", str(payments), "--policy", "payments", "--jobs", "6"),
            *("--tenants", "2", "--database-url", url, "--source", "s3", "--timeout", "30"),
            "--json",
            *("--local-file", str(tmp_path / "local.json")),
        ],
    )
    # Then it does not report success: every job refused at the door, none in the ledger,
    # not final, and one actionable line on the way out
    assert result.exit_code == 1, result.output
    report = json.loads(result.output.strip().splitlines()[0])
    assert (report["refused"], report["in_ledger"], report["succeeded"]) == (6, 0, 0)
    assert not report["all_final"]
    assert (
        result.output.strip()
        .splitlines()[-1]
        .startswith("Error: demo: 6 of 6 obligations were refused at the doors")
    )
    # and it did not wait out its timeout for jobs that could never settle
    assert report["elapsed_seconds"] < 30


def test_the_payments_example_runs_by_the_sql_door_with_each_row_s_business_date(
    pg_server: PgServer, tmp_path: Path
) -> None:
    # Given the payments example, whose identity needs a business_date param, and the sql
    # door, whose rows give each identity param the row's due date
    payments = Path(__file__).resolve().parents[2] / "docs" / "examples" / "payments.toml"
    url = pg_server.create_database("sweeper_demo_payments_sql")
    # When the demo runs it
    result = CliRunner().invoke(
        main,
        [
            "demo",
            *("--config", str(payments), "--policy", "payments", "--jobs", "6"),
            *("--tenants", "2", "--database-url", url, "--source", "sql", "--timeout", "90"),
            "--json",
            *("--local-file", str(tmp_path / "local.json")),
        ],
    )
    # Then nothing was refused and every payment was reconciled once by the provider
    assert result.exit_code == 0, result.output
    report = json.loads(result.output.strip().splitlines()[-1])
    assert (report["refused"], report["in_ledger"]) == (0, 6)
    assert report["all_final"]
    assert (report["succeeded"], report["terminal"]) == (6, 0)
    assert (report["vendor_effects"], report["max_effects_per_object"]) == (6, 1)

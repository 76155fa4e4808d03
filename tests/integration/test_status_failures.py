"""Failures you can see (issue 41): `status` and `inspect` name the jobs that are retrying, by
outcome class and code with a count and the oldest, and each closed scope with why and until
when, directly, through the operator API (`--stack`) and on the console page."""

from __future__ import annotations

import json
import re
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest
from click.testing import CliRunner

from sweeper.config import Policy
from sweeper.ledger.store import Ledger
from sweeper.ledger.view_sql import RETRYING_BY_CODE
from sweeper.limiter import DynamoLimiter, closed_gates
from sweeper.models import NewJob, OutcomeClass
from sweeper.scheduling import scope_for
from sweeper_cli import main
from sweeper_cli.webconsole import page
from sweeper_cli.webconsole.backend import LedgerBackend
from sweeper_local.aws import LocalAws
from sweeper_local.operator_api import OperatorApiStandIn
from sweeper_tools.policy_file import load_config
from tests.integration.conftest import StartConsole
from tests.integration.test_status_limits import local_file_for

pytestmark = pytest.mark.integration

S3_EXPORTS = Path(__file__).resolve().parents[2] / "docs" / "examples" / "s3-exports.toml"
#: How late the oldest retrying job is when the test starts reading.
LATE_SECONDS = 95


def sweeper(local_file: Path, *args: str, api: bool = False) -> str:
    stack = ["--stack", "Sweeper"] if api else []
    result = CliRunner().invoke(main, [*args, "--local-file", str(local_file), *stack])
    assert result.exit_code == 0, result.output
    return result.output


def fail(
    ledger: Ledger,
    policy: Policy,
    jobs: list[NewJob],
    outcome: OutcomeClass | None,
    code: str | None,
) -> None:
    """Schedule `jobs`, lease them as a producer run does, and record for each a delivery that
    settled nothing, as the consumer does: a call that came to `outcome` with `code` (None: a
    wait on the limiter, no call made), the job due again in a minute."""
    now = datetime.now(UTC)
    ledger.schedule(policy.name, 1, lambda job: scope_for(policy, job), jobs, now)
    claimed = ledger.claim(policy.name, "run-1", now, timedelta(minutes=5), len(jobs))
    assert len(claimed) == len(jobs)
    for job in claimed:
        ledger.record_unsettled(
            job.operation_key,
            now,
            next_attempt_at=now + timedelta(minutes=1),
            lease_until=now + timedelta(minutes=5),
            outcome=outcome,
            code=code,
            count_attempt=outcome is not None,
        )


@pytest.mark.parametrize("through_api", [False, True], ids=["direct", "operator-api"])
def test_status_names_jobs_retrying_on_dns_errors_by_code_with_count_and_oldest(
    start_console: StartConsole, tmp_path: Path, db_url: str, through_api: bool
) -> None:
    # Given the local stack's policy paused (nothing consumes), 120 jobs due 95 s ago whose
    # every call failed on DNS (transient dns_error, each leased and retrying), and 5 more
    # leased that only waited on their scope (no call, no outcome: not a failure)
    _, local_file = start_console()
    if through_api:
        stand_in = OperatorApiStandIn(local_file).start()
        local_file = stand_in.write_local_file(tmp_path / "through-api.json")
    policy = load_config(json.loads(local_file.read_text())["config"]).policy("exports")
    ledger = Ledger(db_url)
    ledger.pause("exports", "test", None, datetime.now(UTC))
    late = datetime.now(UTC) - timedelta(seconds=LATE_SECONDS)
    failing = [NewJob(f"t{i % 4}", f"o{i}", late) for i in range(120)]
    fail(ledger, policy, failing, OutcomeClass.TRANSIENT, "dns_error")
    fail(ledger, policy, [NewJob("t9", f"w{i}", late) for i in range(5)], None, None)
    ledger.close()
    try:
        # When the operator asks for the status, as JSON and as text
        (item,) = json.loads(sweeper(local_file, "status", "--json", api=through_api))["policies"]
        text = sweeper(local_file, "status", api=through_api)
    finally:
        if through_api:
            stand_in.stop()
    # Then both name the retrying jobs by class and code, with their count and the oldest
    assert item["counts"]["leased"] == 125
    (group,) = item["retrying"]
    assert (group["outcome"], group["code"], group["jobs"]) == ("transient", "dns_error", 120)
    assert (group["most_attempts"], group["scopes"]) == (1, 1)
    assert LATE_SECONDS <= group["oldest_seconds"] < LATE_SECONDS + 60
    shown = re.search(r"retrying +transient dns_error: 120 jobs, oldest (\d+) s", text)
    assert shown is not None, text
    assert LATE_SECONDS <= int(shown[1]) < LATE_SECONDS + 60


def test_inspect_names_the_retrying_jobs_it_used_to_call_neither_stuck_nor_terminal(
    start_console: StartConsole, db_url: str
) -> None:
    # Given 120 leased jobs retrying on DNS errors, none terminal, none overdue past their lease
    _, local_file = start_console()
    policy = load_config(json.loads(local_file.read_text())["config"]).policy("exports")
    ledger = Ledger(db_url)
    ledger.pause("exports", "test", None, datetime.now(UTC))
    late = datetime.now(UTC) - timedelta(seconds=LATE_SECONDS)
    fail(
        ledger,
        policy,
        [NewJob("t1", f"o{i}", late) for i in range(120)],
        OutcomeClass.TRANSIENT,
        "dns_error",
    )
    ledger.close()
    # When the operator inspects with --stuck-after 10, as text and as JSON
    text = sweeper(local_file, "inspect", "--stuck-after", "10")
    data = json.loads(sweeper(local_file, "inspect", "--stuck-after", "10", "--json"))
    # Then both name them: class, code and count
    assert "transient dns_error: 120 jobs, oldest" in text
    (group,) = data["retrying"]
    assert (group["outcome"], group["code"], group["jobs"]) == ("transient", "dns_error", 120)


def _s3_exports(
    tmp_path: Path, local_aws: LocalAws, db_url: str, unique_name: str
) -> tuple[Path, Policy, DynamoLimiter, str, str]:
    """The s3-exports example with a missing bucket: tenant `gone`'s 50 exports failed with
    s3_NoSuchBucket (classed as auth) and its scope closed for auth; 21 other tenants hold
    more work each, so `gone` is not among the busiest scopes `status` reads gates of.
    (local file, policy, limiter, the closed scope, the limiter's table)"""
    local_file = local_file_for(tmp_path, local_aws, db_url, unique_name, S3_EXPORTS, "s3-exports")
    policy = load_config(str(S3_EXPORTS)).policy("s3-exports")
    now = datetime.now(UTC)
    ledger = Ledger(db_url)
    later = now + timedelta(days=1)  # not due: left pending by the run that leases `gone`'s
    busy = [NewJob(f"busy{t}", f"2026/11/{i}.csv", later) for t in range(21) for i in range(60)]
    ledger.schedule(policy.name, 1, lambda job: scope_for(policy, job), busy, now)
    gone = [NewJob("gone", f"2026/11/{i}.csv", now) for i in range(50)]
    fail(ledger, policy, gone, OutcomeClass.AUTH, "s3_NoSuchBucket")
    ledger.close()
    table = json.loads(local_file.read_text())["limiter_table"]
    limiter = DynamoLimiter(local_aws.dynamodb(), table)
    scope = scope_for(policy, gone[0])
    limiter.close(scope, time.time() + 300, "auth")
    return local_file, policy, limiter, scope, table


def test_status_names_a_scope_closed_for_auth_with_why_until_and_its_jobs_code(
    tmp_path: Path, local_aws: LocalAws, aws_env: dict[str, str], db_url: str, unique_name: str
) -> None:
    # Given an s3_delete policy whose bucket is missing for tenant `gone`: its jobs retrying on
    # s3_NoSuchBucket and its scope closed for auth, among 21 busier tenants
    local_file, _, limiter, scope, _ = _s3_exports(tmp_path, local_aws, db_url, unique_name)
    closed_until = limiter.state(scope).closed_until
    assert closed_until is not None
    reopens = datetime.fromtimestamp(closed_until, UTC).isoformat()
    # When the operator asks for the status and inspects
    (item,) = json.loads(sweeper(local_file, "status", "--json"))["policies"]
    text = sweeper(local_file, "status")
    inspected = json.loads(sweeper(local_file, "inspect", "--json"))
    # Then the closed scope is named with its reason, until when and why, though its gate is
    # not among the busiest the status reads
    assert scope not in [gate["scope"] for gate in item["gates"]]
    closed = {"scope": scope, "reopens_at": reopens, "reason": "auth", "why": "auth failure"}
    assert item["closed_scopes"] == [closed]
    assert inspected["closed_scopes"] == [closed]
    assert f"scope closed    {scope} until {reopens} (auth: auth failure)" in text
    # And its jobs by class and code
    (group,) = item["retrying"]
    assert (group["outcome"], group["code"], group["jobs"]) == ("auth", "s3_NoSuchBucket", 50)
    assert group["scopes"] == 1
    assert "retrying        auth s3_NoSuchBucket: 50 jobs, oldest" in text
    (seen,) = inspected["retrying"]
    assert (seen["outcome"], seen["code"], seen["jobs"]) == ("auth", "s3_NoSuchBucket", 50)


def test_the_console_page_shows_jobs_retrying_and_the_scope_closed(
    tmp_path: Path, local_aws: LocalAws, aws_env: dict[str, str], db_url: str, unique_name: str
) -> None:
    # Given the s3-exports policy's missing bucket: tenant `gone` retrying, its scope closed
    _, policy, limiter, scope, table = _s3_exports(tmp_path, local_aws, db_url, unique_name)
    ledger = Ledger(db_url)
    backend = LedgerBackend(
        load_config(str(S3_EXPORTS)),
        ledger,
        operator="ana",
        gate=limiter.state,
        closures=lambda now: closed_gates(local_aws.dynamodb(), table, now),
    )
    # When the page's overview is read and drawn
    item: dict[str, Any] = backend.overview(policy.name)
    drawn = page.overview(policy.name, item, [], [policy.name])
    ledger.close()
    # Then it shows the retrying jobs by class and code, and the closed scope with why
    (group,) = item["retrying"]
    assert (
        '<tr class="retrying" data-outcome="auth" data-code="s3_NoSuchBucket">'
        '<th>auth s3_NoSuchBucket</th><td class="n">50</td>'
    ) in drawn
    (closed,) = item["closed_scopes"]
    assert (
        f'<tr class="closed-scope" data-scope="{scope}"><th>{scope}</th>'
        f'<td class="closed">closed until {closed["reopens_at"]} (auth)</td>'
        "<td>auth failure</td></tr>"
    ) in drawn
    assert group["oldest_seconds"] >= 0


def test_the_retrying_read_is_served_by_its_partial_index(db_url: str) -> None:
    # Given the ledger's schema (a table scan made as costly as the planner allows)
    with psycopg.connect(db_url) as conn:
        conn.execute("SET enable_seqscan = off")
        # When the retrying read is planned
        plan = conn.execute(
            ("EXPLAIN " + RETRYING_BY_CODE).encode(), {"policy": "exports", "limit": 20}
        ).fetchall()
    # Then it reads sweeper_jobs_retrying: its predicate implies the index's
    assert "sweeper_jobs_retrying" in "\n".join(line for (line,) in plan)

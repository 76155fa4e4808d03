"""The console page's direct-ledger backend: actions by key or by tenant, previewed then done,
recorded with the operator and the reason."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psycopg
import pytest

from sweeper.config import Policy, SweeperConfig
from sweeper.errors import OperatorError
from sweeper.ledger.store import Ledger
from sweeper.limiter import DynamoLimiter, closed_gates
from sweeper.models import JobStatus, NewJob, OutcomeClass
from sweeper_cli.webconsole import page
from sweeper_cli.webconsole.backend import LedgerBackend
from sweeper_local.aws import LocalAws, provision
from sweeper_tools.policy_file import load_config

pytestmark = pytest.mark.integration

T0 = datetime(2026, 11, 29, 2, 0, tzinfo=UTC)
POLICY = Policy(name="exports", schedule="rate(5 minutes)")


@pytest.fixture
def backend(ledger: Ledger) -> LedgerBackend:
    """Tenant t1: two failed jobs and one pending; tenant t2: one failed."""
    jobs = [NewJob("t1", "a", T0), NewJob("t1", "b", T0), NewJob("t1", "c", T0)]
    ledger.schedule(POLICY.name, 1, lambda j: POLICY.name, [*jobs, NewJob("t2", "d", T0)], T0)
    for key in ("exports:t1:a:v1", "exports:t1:b:v1", "exports:t2:d:v1"):
        ledger.mark_failed(key, OutcomeClass.PERMANENT, "http_400", T0, count_attempt=True)
    return LedgerBackend(SweeperConfig(policies=[POLICY]), ledger, operator="ana", clock=lambda: T0)


def test_a_retry_by_tenant_is_previewed_then_moves_that_tenants_failed_jobs(
    backend: LedgerBackend, ledger: Ledger, db_url: str
) -> None:
    # When the page previews, then confirms, a retry of tenant t1
    def retry(dry_run: bool) -> dict[str, Any]:
        return backend.act(
            POLICY.name,
            "retry",
            key=None,
            tenant_id="t1",
            reason="vendor fixed",
            until=None,
            dry_run=dry_run,
        )

    preview = retry(True)
    failed_before = ledger.counts(POLICY.name)[JobStatus.FAILED]
    done = retry(False)
    # Then the preview named what the retry moved, and moved nothing itself
    assert failed_before == 3
    assert (preview["moved"], preview["from_states"]) == (2, {"failed": 2})
    assert (done["moved"], done["from_states"]) == (2, {"failed": 2})
    # And t2's failed job stays failed; the retry is recorded with the operator and reason
    job = ledger.get("exports:t2:d:v1")
    assert job is not None
    assert job.status is JobStatus.FAILED
    assert ledger.counts(POLICY.name)[JobStatus.PENDING] == 3
    with psycopg.connect(db_url) as conn:
        recorded = conn.execute("SELECT action, actor, reason FROM sweeper_operator_actions")
        assert recorded.fetchall() == [("retry", "ana", "vendor fixed")]


def test_a_cancel_by_key_is_recorded_with_the_operator(
    backend: LedgerBackend, ledger: Ledger
) -> None:
    report = backend.act(
        POLICY.name,
        "cancel",
        key="exports:t1:c:v1",
        tenant_id=None,
        reason="customer asked",
        until=None,
        dry_run=False,
    )
    job = ledger.get("exports:t1:c:v1")
    assert report["moved"] == 1
    assert job is not None
    assert (job.status, job.cancel_reason) == (JobStatus.CANCELLED, "customer asked")


@pytest.mark.parametrize(
    ("action", "key", "tenant"),
    [
        ("retry", "exports:t1:a:v1", "t1"),  # both a key and a tenant
        ("retry", None, None),  # neither
        ("delete", "exports:t1:a:v1", None),  # not an action of the page
    ],
)
def test_an_action_names_one_job_or_one_tenant_and_a_known_action(
    backend: LedgerBackend, action: str, key: str | None, tenant: str | None
) -> None:
    with pytest.raises(OperatorError):
        backend.act(
            POLICY.name,
            action,
            key=key,
            tenant_id=tenant,
            reason="x",
            until=None,
            dry_run=True,
        )


def test_a_policy_outside_the_policy_file_is_refused(backend: LedgerBackend) -> None:
    with pytest.raises(OperatorError, match="no policy"):
        backend.overview("reports")


def test_the_overview_shows_a_closed_app_limit_beside_the_gates(
    ledger: Ledger, local_aws: LocalAws, unique_name: str
) -> None:
    # Given the listings example (a store limit and an app limit) with its app limit closed by
    # a 429 with Retry-After: every store waits, though no store's gate is closed
    listings = Path(__file__).resolve().parents[2] / "docs" / "examples" / "listings.toml"
    config = load_config(str(listings))
    policy = config.policy("listings")
    table = provision(
        local_aws.sqs(), local_aws.dynamodb(), policy, prefix=unique_name
    ).limiter_table
    limiter = DynamoLimiter(local_aws.dynamodb(), table)
    limiter.close("app:marketplace.example.com", time.time() + 60, "throttled")
    backend = LedgerBackend(
        config,
        ledger,
        operator="ana",
        gate=limiter.state,
        closures=lambda now: closed_gates(local_aws.dynamodb(), table, now),
    )
    # When the page's overview is read and drawn
    item = backend.overview("listings")
    drawn = page.overview("listings", item, [], ["listings"])
    # Then the gates table names the closed limit, its key, until when and why
    (closure,) = item["closed_limits"]
    assert (closure["limit"], closure["key"]) == ("app", "app:marketplace.example.com")
    row = (
        '<tr class="limit-gate" data-limit="app" data-key="app:marketplace.example.com">'
        "<th>app:marketplace.example.com</th>"
        f'<td class="closed">closed until {closure["reopens_at"]} (throttled)</td>'
        "<td>limit app: 429 with Retry-After</td></tr>"
    )
    assert row in drawn


def test_the_overview_lists_each_action_with_its_actor_reason_and_progress(
    backend: LedgerBackend, ledger: Ledger
) -> None:
    from datetime import timedelta

    from sweeper.prune.run import prune

    # Given a hold by ana, and a prune by bo that deleted two old settled jobs in two batches
    backend.act(
        POLICY.name,
        "hold",
        key="exports:t1:c:v1",
        tenant_id=None,
        reason="legal",
        until=None,
        dry_run=False,
    )
    old = [NewJob("t3", f"old{i}", T0) for i in range(2)]
    ledger.schedule(POLICY.name, 1, lambda j: POLICY.name, old, T0)
    for job in old:
        key = f"exports:t3:{job.object_id}:v1"
        ledger.mark_succeeded(key, OutcomeClass.ACCEPTED, T0 - timedelta(days=40))
    prune(
        ledger,
        older_than=timedelta(days=30),
        failed_older_than=timedelta(days=90),
        now=T0,
        actor="bo",
        reason="quarterly cleanup",
        policy=POLICY.name,
        batch_rows=1,
    )
    # When the page's overview is read and drawn
    item = backend.overview(POLICY.name)
    drawn = page.overview(POLICY.name, item, [], [POLICY.name])
    # Then each action shows who, why and how far it got (a prune: its batches and totals)
    pruned, held = item["actions"][:2]
    assert (pruned["action"], pruned["actor"], pruned["reason"]) == (
        "prune",
        "bo",
        "quarterly cleanup",
    )
    assert pruned["progress"] == {
        "steps": 3,
        "totals": {"jobs": 2, "failed_jobs": 0, "job_events": 0},
        "done": True,
    }
    assert (held["action"], held["actor"], held["reason"], held["progress"]) == (
        "hold",
        "ana",
        "legal",
        None,
    )
    assert (
        '<td class="actor">bo</td><td class="reason">quarterly cleanup</td>'
        '<td class="progress">3 steps: failed_jobs 0 · job_events 0 · jobs 2, done</td>'
    ) in drawn

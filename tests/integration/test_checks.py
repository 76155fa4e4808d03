"""`sweeper smoke` and `sweeper ramp-check` against the local stack, as they run after a deploy."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from sweeper.config import HttpActionConfig, Policy, SmokeConfig
from sweeper.endpoints import LocalFile, PolicyEndpoints
from sweeper.errors import OperatorError
from sweeper.ledger.store import Ledger
from sweeper.models import JobStatus, NewJob
from sweeper.scheduling import schedule_jobs
from sweeper_cli import main
from sweeper_local.scenarios import SCENARIO_CONFIG
from sweeper_tools.endpoints import write_local_file
from sweeper_tools.ramp import RampFigures, decide
from sweeper_tools.smoke import delete_canary, run_smoke
from tests.integration.conftest import StartConsole

pytestmark = pytest.mark.integration

SANDBOX = "sweeper-sandbox"
SMOKE_SECTION = f"""
[policies.smoke]
tenant_id = "{SANDBOX}"
timeout_seconds = 60
"""


@pytest.fixture
def console_config(tmp_path: Path) -> Path:
    """The scenarios' policy file, with a sandbox target for the smoke."""
    path = tmp_path / "sweeper.toml"
    path.write_text(SCENARIO_CONFIG + SMOKE_SECTION, encoding="utf-8")
    return path


@pytest.fixture
def ledger(db_url: str) -> Iterator[Ledger]:
    found = Ledger(db_url)
    yield found
    found.close()


def run(local_file: Path, *args: str, code: int = 0) -> tuple[dict[str, Any], str]:
    result = CliRunner().invoke(main, [*args, "--local-file", str(local_file), "--json"])
    assert result.exit_code == code, result.output
    lines = result.stdout.strip().splitlines()
    return json.loads(lines[-1]), result.stderr


def canary_rows(db_url: str) -> int:
    import psycopg

    with psycopg.connect(db_url) as conn:
        row = conn.execute(
            "SELECT count(*) FROM sweeper_jobs WHERE tenant_id = %s", (SANDBOX,)
        ).fetchone()
    assert row is not None
    return int(row[0])


def test_a_smoke_follows_its_canary_through_every_hop_and_deletes_it(
    start_console: StartConsole, db_url: str
) -> None:
    # Given the local stack (its producer a minute away: the smoke releases by itself)
    stack, local_file = start_console()
    # When the smoke runs
    report, _ = run(local_file, "smoke")
    # Then every hop passed, in order, each timed, and the canary is gone from the ledger
    assert report["passed"] is True
    assert [h["hop"] for h in report["hops"]] == ["ledger", "queue", "consumer", "vendor", "ledger"]
    assert all(h["passed"] for h in report["hops"])
    times = [h["at_seconds"] for h in report["hops"]]
    assert times == sorted(times)
    assert sum(h["seconds"] for h in report["hops"]) == pytest.approx(times[-1], abs=0.01)
    assert report["cleaned_up"] is True
    assert canary_rows(db_url) == 0
    assert report["action"].startswith("http DELETE ")  # what the canary's call was
    # and the vendor was called once, with one effect, for the canary under the sandbox tenant
    key = report["operation_key"]
    assert key.startswith(f"exports:{SANDBOX}:sweeper-smoke-")
    assert stack.stack.vendor is not None
    audit = stack.stack.vendor.audit()
    assert (audit.calls_by_key[key], audit.effects_by_key[key]) == (1, 1)
    # (the consumer is seen by the call's arrival, or first by a ledger write when it had to
    # return the canary, e.g. without Lambda time left for a call on a loaded machine)
    assert report["hops"][2]["detail"] in (
        "the vendor received 1 call(s) with the canary's key",
        "a consumer handled the canary",
    )


def test_a_smoke_names_the_consumer_when_no_consumer_reads_the_queue(
    start_console: StartConsole, db_url: str, tmp_path: Path
) -> None:
    # Given a target whose work queue no consumer reads (the consumer is stopped for it)
    stack, local_file = start_console()
    sqs = stack.stack.aws.sqs()
    unread = sqs.create_queue(QueueName="sweeper-smoke-unread")["QueueUrl"]
    found = LocalFile.model_validate_json(local_file.read_text())
    where = found.policies["exports"]
    detached = tmp_path / "detached.json"
    write_local_file(
        found.model_copy(
            update={
                "policies": {
                    "exports": PolicyEndpoints(**{**where.model_dump(), "queue_url": unread})
                }
            }
        ),
        detached,
    )
    # When the smoke runs
    report, stderr = run(detached, "smoke", "--timeout", "3", code=1)
    # Then it fails at the consumer, says so in one line, and still deletes its canary
    assert (report["failed_hop"], report["failed_hop_number"]) == ("consumer", 3)
    assert [h["passed"] for h in report["hops"]] == [True, True, False, False, False]
    assert "smoke failed at hop 3/5 consumer: published but no consumer took" in stderr
    assert report["cleaned_up"] is True
    assert canary_rows(db_url) == 0


def test_a_smoke_names_the_vendor_when_it_refuses(start_console: StartConsole, db_url: str) -> None:
    # Given the vendor answering 503 to everything
    stack, local_file = start_console()
    assert stack.stack.vendor is not None
    stack.stack.vendor.start_incident(60, status=503)
    # When the smoke runs
    report, stderr = run(local_file, "smoke", "--timeout", "20", code=1)
    # Then the consumer called, and the vendor's refusal is named with its outcome class
    assert report["failed_hop"] == "vendor"
    assert [h["passed"] for h in report["hops"]] == [True, True, True, False, False]
    # (a 503 with Retry-After is the vendor asking to slow down: throttled)
    assert "the vendor answered throttled, http_503" in report["failure"]
    assert "smoke failed at hop 4/5 vendor" in stderr
    assert canary_rows(db_url) == 0


def test_a_smoke_on_a_paused_policy_fails_at_the_queue(
    start_console: StartConsole, ledger: Ledger, db_url: str
) -> None:
    _, local_file = start_console()
    ledger.pause("exports", "test", None, datetime.now(UTC))
    report, stderr = run(local_file, "smoke", code=1)
    assert report["failed_hop"] == "queue"
    assert "paused" in report["failure"]
    assert "smoke failed at hop 2/5 queue: the release failed: policy exports is paused" in stderr
    # and for a person: each hop's line, the failed one marked, the canary's fate
    text = CliRunner().invoke(main, ["smoke", "--local-file", str(local_file)])
    assert text.exit_code == 1
    lines = text.stdout.splitlines()
    assert lines[1].startswith("  action    http DELETE ")
    assert lines[2].startswith("  ok   ledger")
    assert lines[3].startswith("  FAIL queue")
    assert lines[-1] == "  canary deleted"
    assert canary_rows(db_url) == 0


#: Settled jobs the test waits for: enough for figures, few enough for a busy machine (the
#: rule itself, which needs 200 calls, is tests/unit/test_ramp.py's).
SETTLED = 10


def test_ramp_check_reads_the_local_stacks_emf_log(
    start_console: StartConsole, ledger: Ledger
) -> None:
    # Given jobs released and (some of them) settled by the local stack
    stack, local_file = start_console()
    policy = stack.config.policy("exports")
    now = datetime.now(UTC)
    schedule_jobs(ledger, policy, [NewJob("t1", f"o{i}", now) for i in range(40)], now)
    run(local_file, "release")
    deadline = time.monotonic() + 240
    while ledger.counts("exports")[JobStatus.SUCCEEDED] < SETTLED:
        assert time.monotonic() < deadline, ledger.counts("exports")
        time.sleep(0.2)
    # When ramp-check reads the last hour
    found: dict[str, Any] = {}
    while time.monotonic() < deadline:  # EMF lines land when each invocation returns
        found, _ = run(local_file, "ramp-check", "--hours", "1")
        if found["figures"]["succeeded"] >= SETTLED:
            break
        time.sleep(0.2)
    settled_in_ledger = ledger.counts("exports")[JobStatus.SUCCEEDED]
    # Then it counted the calls and settlements the consumers made, and timed the deliveries
    figures = found["figures"]
    assert figures["source"].startswith("emf:")
    assert SETTLED <= figures["succeeded"] <= settled_in_ledger
    assert figures["calls"] >= figures["succeeded"]
    assert set(figures["attempts"]) == {"accepted"}  # the simulator refused nothing
    assert figures["throttled_rate"] == 0.0
    # (records may be DLQ-bound here: on a loaded machine a 10 s consumer returns records it
    # has no time left to call, and each return costs a receive)
    assert 0 < figures["p50_seconds"] <= figures["p95_seconds"]
    # and decided by the rule on those figures (which verdict depends on this machine's speed)
    expected = decide(
        RampFigures(
            hours=figures["hours"],
            attempts=figures["attempts"],
            succeeded=figures["succeeded"],
            terminal=figures["terminal"],
            duplicates=figures["duplicates"],
            dead_letter_bound=figures["dead_letter_bound"],
            p50_seconds=figures["p50_seconds"],
            p95_seconds=figures["p95_seconds"],
        ),
        policy.consumer,
        policy.quota.rate_per_second,
    )
    assert (found["verdict"], found["recommended_environments"]) == (
        expected.verdict,
        expected.recommended,
    )
    assert found["verdict"] == "insufficient"
    assert found["current_environments"] == 2
    assert found["reasons"] == list(expected.reasons)
    # and for a person: the verdict, the figures and why
    text = CliRunner().invoke(main, ["ramp-check", "--hours", "1", "--local-file", str(local_file)])
    assert text.exit_code == 0, text.output
    assert text.stdout.startswith("policy exports: NOT ENOUGH DATA; stay at 2 environment(s)")
    assert "(429 rate 0.00%)" in text.stdout
    assert "  why             " in text.stdout


def test_the_canary_cleanup_deletes_only_a_sandbox_canary(ledger: Ledger) -> None:
    # Given a customer's job, a sandbox job without the canary prefix, and a canary
    from sweeper.config import Policy

    policy = Policy.model_validate({"name": "exports", "smoke": {"tenant_id": SANDBOX}})
    now = datetime.now(UTC)
    jobs = [
        NewJob("customer-1", "sweeper-smoke-1", now),
        NewJob(SANDBOX, "report.csv", now),
        NewJob(SANDBOX, "sweeper-smoke-2", now),
    ]
    schedule_jobs(ledger, policy, jobs, now)
    keys = [f"exports:{j.tenant_id}:{j.object_id}:v1" for j in jobs]

    def delete(key: str) -> bool:
        return delete_canary(
            ledger, key, policy="exports", tenant_id=SANDBOX, prefix="sweeper-smoke-"
        )

    # When the canary is asked for under another policy, then each as the canary
    other_policy = delete_canary(
        ledger, keys[2], policy="imports", tenant_id=SANDBOX, prefix="sweeper-smoke-"
    )
    deleted = [delete(key) for key in keys]
    # Then only the canary went; the others are untouched
    assert deleted == [False, False, True]
    assert other_policy is False
    assert [ledger.get(k) is not None for k in keys] == [True, True, False]


def test_a_smoke_refuses_a_canary_its_action_could_not_send(ledger: Ledger, db_url: str) -> None:
    # Given a policy whose URL names a param (a canary carries only ids)
    policy = Policy(
        name="payments",
        smoke=SmokeConfig(tenant_id=SANDBOX),
        action=HttpActionConfig(url_template="{api_url}/v1/days/{params.day}/{object_id}"),
    )
    released: list[str] = []

    def release() -> dict[str, Any]:
        released.append("released")
        return {}

    # When the smoke is asked for
    with pytest.raises(OperatorError, match=r"could not send a smoke canary \(param_missing\)"):
        run_smoke(
            policy,
            ledger,
            release,
            clock=lambda: datetime.now(UTC),
        )
    # Then nothing was written or released
    assert canary_rows(db_url) == 0
    assert released == []

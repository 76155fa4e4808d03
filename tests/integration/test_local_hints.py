"""Hints into the local stack as a sender reaches it: the webhook on loopback and the intake
queue, both named in the local file, feeding the ledger through the intake function."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import psycopg
import pytest
from click.testing import CliRunner

from sweeper_cli import main
from sweeper_local.webhook import post_signed
from tests.integration.conftest import StartConsole

pytestmark = pytest.mark.integration

#: The intake function runs once its event source receives (long polling, a second at most).
ARRIVAL_TIMEOUT_SECONDS = 30.0


def _objects(db_url: str) -> dict[str, datetime]:
    with psycopg.connect(db_url) as conn:
        rows = conn.execute(
            "SELECT object_id, due_at FROM sweeper_jobs WHERE policy = 'exports'"
        ).fetchall()
    return {object_id: due_at for object_id, due_at in rows}


def _wait_for(db_url: str, object_id: str) -> dict[str, datetime]:
    deadline = time.monotonic() + ARRIVAL_TIMEOUT_SECONDS
    while time.monotonic() < deadline:
        found = _objects(db_url)
        if object_id in found:
            return found
        time.sleep(0.2)
    return _objects(db_url)


def test_a_signed_hint_to_the_local_webhook_reaches_the_ledger_and_a_forged_one_does_not(
    start_console: StartConsole, db_url: str
) -> None:
    # Given the local stack as `local up` runs it, and only what its local file says
    _, local_file = start_console()
    local = json.loads(local_file.read_text(encoding="utf-8"))
    url, secret = local["webhook_url"], local["webhook_secret"]
    assert url.startswith("http://127.0.0.1:")
    assert len(secret) >= 32
    due = datetime.now(UTC).replace(microsecond=0) - timedelta(minutes=5)

    # When a hint signed with another secret is posted, then one signed with the file's secret
    forged = post_signed(url, "exports", f"not-{secret}", {"tenant_id": "t", "object_id": "forged"})
    status, body = post_signed(
        url, "exports", secret, {"tenant_id": "t1", "object_id": "o-1", "due_at": due.isoformat()}
    )

    # Then the forged one is refused and the signed one is accepted, and the intake function
    # puts its job in the ledger with the hint's due time; the forged one wrote nothing
    assert forged == (401, {"error": "signature_mismatch"})
    assert (status, body["result"], body["accepted"]) == (202, "accepted", 1)
    assert _wait_for(db_url, "o-1") == {"o-1": due}


def test_schedule_stack_sends_a_file_through_the_local_intake_queue_into_the_ledger(
    start_console: StartConsole, db_url: str, tmp_path: Path
) -> None:
    # Given the local stack, whose file names each policy's intake queue
    _, local_file = start_console()
    assert json.loads(local_file.read_text(encoding="utf-8"))["policies"]["exports"][
        "intake_queue_url"
    ]
    obligations = tmp_path / "due.jsonl"
    obligations.write_text('{"tenant_id": "t1", "object_id": "from-file"}\n', encoding="utf-8")
    # When an operator schedules a file with --stack (no database path of their own)
    result = CliRunner().invoke(
        main,
        [
            *("schedule", str(obligations), "--policy", "exports", "--stack", "Sweeper"),
            *("--local-file", str(local_file), "--json"),
        ],
    )
    # Then it went by the intake queue, and the intake function wrote the job
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["via"] == "intake queue"
    assert "from-file" in _wait_for(db_url, "from-file")

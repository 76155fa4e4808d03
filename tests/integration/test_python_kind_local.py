"""A python action kind on the local stack as `sweeper local up` runs it: the team's package at
`package_path` (next to the policy file) is on the consumers' path, as its layer is on Lambda."""

from __future__ import annotations

import shutil
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from sweeper.ledger.store import Ledger
from sweeper.models import JobStatus, NewJob, OutcomeClass, operation_key
from sweeper.scheduling import schedule_jobs
from sweeper_local.background import LocalConsoleStack
from sweeper_tools.policy_file import load_config

pytestmark = pytest.mark.integration

PACKAGE = Path(__file__).resolve().parents[1] / "infra" / "fixtures" / "actions_pkg"
POLICY = """
[[policies]]
name = "cleanup"

[policies.consumer]
reserved_concurrency = 1
max_concurrency = 2

[policies.action]
kind = "python"
callable = "acme_actions.cleanup:run"
package_path = "actions_pkg"
"""


def test_the_local_stack_runs_the_teams_callable_from_its_package(
    db_url: str, ledger: Ledger, tmp_path: Path
) -> None:
    # Given a policy file whose python action's package sits next to it
    shutil.copytree(PACKAGE, tmp_path / "actions_pkg")
    config_path = tmp_path / "sweeper.toml"
    config_path.write_text(POLICY, encoding="utf-8")
    config = load_config(config_path)
    stack = LocalConsoleStack(
        config, config_path=str(config_path), database_url=db_url, tick_seconds=0.5
    ).start()
    try:
        # When two jobs are due
        now = datetime.now(UTC)
        jobs = [NewJob("t1", f"o{i}", now - timedelta(seconds=1)) for i in range(2)]
        schedule_jobs(ledger, config.policies[0], jobs, now)
        keys = [operation_key("cleanup", "t1", f"o{i}", 1) for i in range(2)]
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            found = [ledger.get(key) for key in keys]
            if all(j is not None and j.status is JobStatus.SUCCEEDED for j in found):
                break
            time.sleep(0.5)
    finally:
        stack.stop()
    # Then the callable answered each: accepted, with its own code
    for key in keys:
        job = ledger.get(key)
        assert job is not None
        assert (job.status, job.last_outcome) == (JobStatus.SUCCEEDED, OutcomeClass.ACCEPTED)

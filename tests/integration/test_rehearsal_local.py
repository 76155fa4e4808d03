"""A per-tenant policy rehearsed on the local stack reaches only the rehearsal's vendor, and a
policy whose calls cannot be sent there is refused (issue 41, point 3).

The stack runs as `sweeper local up --api-url URL` runs it, URL a loopback vendor (the
simulator, standing in for an outside one). The policy names real hosts only: a tenant's own
host (`https://{tenant_id}.helpdesk.example`) and an OAuth2 token endpoint of its own. The
consumers are worker processes, so what they resolve is not seen here: the vendor's audit is
the witness, every call arriving there named with the host it was for (the unit of the
transport, tests/integration/test_rehearsal_transport.py, shows no name of the policy's is
ever resolved).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from click.testing import CliRunner

from sweeper.config import SweeperConfig
from sweeper.ledger.store import Ledger
from sweeper.models import JobStatus, NewJob, OutcomeClass, operation_key
from sweeper.scheduling import schedule_jobs
from sweeper_cli import main
from sweeper_local.background import LocalConsoleStack
from sweeper_local.vendor import VendorSimulator
from tests.integration.test_scheduling_concurrency import wait_until

pytestmark = pytest.mark.integration

SECRET_ARN = "arn:aws:secretsmanager:eu-west-1:111122223333:secret:helpdesk-oauth"
POLICY = {
    "name": "helpdesk",
    "consumer": {"reserved_concurrency": 1, "max_concurrency": 2},
    "action": {
        "kind": "http",
        "api_url": "https://{tenant_id}.helpdesk.example",
        "url_template": "{api_url}/v1/objects/{object_id}",
        "auth": {
            "type": "oauth2",
            "token_url": "https://login.helpdesk.example/oauth/token",
            "secret_arn": SECRET_ARN,
            "client_id": "sweeper-helpdesk",
        },
    },
}
TENANTS, OBJECTS = ("acme", "globex"), ("t1", "t2", "t3")
DEADLINE_SECONDS = 90.0


@pytest.fixture
def outside_vendor() -> Iterator[VendorSimulator]:
    """The vendor `--api-url` names, knowing the user's OAuth2 client."""
    with VendorSimulator(latency_seconds=0.0, latency_jitter_seconds=0.0) as vendor:
        vendor.payments.add_client("sweeper-helpdesk", "the-users-secret")
        yield vendor


def test_a_per_tenant_policy_rehearsed_calls_only_the_rehearsals_vendor(
    db_url: str, ledger: Ledger, tmp_path: Path, outside_vendor: VendorSimulator
) -> None:
    # Given a per-tenant policy with a token endpoint of its own, rehearsed with --api-url
    config = SweeperConfig.model_validate({"policies": [POLICY]})
    stack = LocalConsoleStack(
        config,
        config_path=str(tmp_path / "sweeper.toml"),
        database_url=db_url,
        api_url=outside_vendor.url,
        tick_seconds=0.5,
        secret_values={SECRET_ARN: {"client_secret": "the-users-secret"}},
        intake_consumers=False,
    ).start()
    keys = [operation_key("helpdesk", t, o, 1) for t in TENANTS for o in OBJECTS]
    try:
        # When each tenant has jobs due
        now = datetime.now(UTC)
        jobs = [NewJob(t, o, now - timedelta(seconds=1)) for t in TENANTS for o in OBJECTS]
        schedule_jobs(ledger, config.policies[0], jobs, now)
        wait_until(
            lambda: ledger.counts("helpdesk")[JobStatus.SUCCEEDED] == len(keys), DEADLINE_SECONDS
        )
    finally:
        stack.stop()
    # Then every job was accepted by the loopback vendor
    found = [ledger.get(key) for key in keys]
    assert [(j.status, j.last_outcome) for j in found if j is not None] == [
        (JobStatus.SUCCEEDED, OutcomeClass.ACCEPTED)
    ] * len(keys)
    audit = outside_vendor.audit()
    # And each deletion arrived there for its tenant, told apart by the host it was for
    assert sorted(audit.keys_by_target) == sorted(f"{t}/{o}" for t in TENANTS for o in OBJECTS)
    assert audit.effects_total == len(keys)
    # And every call (the token's too) named its own host: none was sent anywhere else
    hosts = Counter(audit.calls_by_original_host)
    assert set(hosts) == {
        "acme.helpdesk.example",
        "globex.helpdesk.example",
        "login.helpdesk.example",
    }
    assert hosts["acme.helpdesk.example"] + hosts["globex.helpdesk.example"] == audit.calls_total
    assert hosts["login.helpdesk.example"] == outside_vendor.payments_audit().tokens_issued


PYTHON_POLICY = """
[[policies]]
name = "cleanup"

[policies.action]
kind = "python"
callable = "acme_actions.cleanup:run"
package_path = "actions_pkg"
"""


@pytest.mark.parametrize(
    ("policy", "api_url", "said"),
    [
        (PYTHON_POLICY, "http://127.0.0.1:9", "python callable acme_actions.cleanup:run"),
        ('[[policies]]\nname = "p"\n', "http://127.0.0.1:9/prefix", "not an origin"),
    ],
)
def test_local_up_refuses_a_rehearsal_it_could_not_redirect(
    tmp_path: Path, policy: str, api_url: str, said: str
) -> None:
    # Given a policy file and an --api-url the stack could not send every call to
    config_path = tmp_path / "sweeper.toml"
    config_path.write_text(policy, encoding="utf-8")
    local_file = tmp_path / "local.json"
    # When `local up` is asked to rehearse it
    result = CliRunner().invoke(
        main,
        ["local", "up", "--config", str(config_path), "--local-file", str(local_file)],
        env={"SWEEPER_API_URL": api_url},
    )
    # Then it refuses in one line, naming why, and starts nothing
    assert result.exit_code != 0
    assert said in result.output
    assert len(result.output.strip().splitlines()) == 1
    assert "Traceback" not in result.output
    assert not local_file.exists()

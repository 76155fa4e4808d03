"""`sweeper status` names a closed further limit (an app-wide limit holding every store), read
from the limiter table on the local DynamoDB stand-in, not only the closed scopes."""

from __future__ import annotations

import json
import os
import time
from datetime import UTC, datetime
from pathlib import Path

from click.testing import CliRunner

from sweeper.endpoints import LocalFile, PolicyEndpoints
from sweeper.ledger.store import Ledger
from sweeper.limiter import DynamoLimiter
from sweeper.models import NewJob
from sweeper.scheduling import scope_for
from sweeper_cli import main
from sweeper_local.aws import LOCAL_REGION, LocalAws, provision
from sweeper_tools.endpoints import write_local_file
from sweeper_tools.policy_file import load_config

LISTINGS = Path(__file__).resolve().parents[2] / "docs" / "examples" / "listings.toml"
#: The app limit's limiter key: `NAME:KEY`, the key being the marketplace's host.
APP_KEY = "app:marketplace.example.com"


def _local_file(tmp_path: Path, local_aws: LocalAws, db_url: str, unique_name: str) -> Path:
    """A local file naming this test's ledger, queues and limiter table, and the listings
    policy file (two limits: `store` per store, `app` for the marketplace)."""
    return local_file_for(tmp_path, local_aws, db_url, unique_name, LISTINGS, "listings")


def local_file_for(
    tmp_path: Path, local_aws: LocalAws, db_url: str, unique_name: str, config: Path, name: str
) -> Path:
    """A local file naming this test's ledger, the policy's queues and limiter table, and the
    policy file `config` whose policy `name` it serves (nothing runs: the commands read)."""
    policy = load_config(str(config)).policy(name)
    resources = provision(local_aws.sqs(), local_aws.dynamodb(), policy, prefix=unique_name)
    path = tmp_path / "local.json"
    write_local_file(
        LocalFile(
            pid=os.getpid(),
            database_url=db_url,
            aws_endpoint_url=local_aws.endpoint_url,
            service_endpoint_urls=local_aws.service_endpoint_urls(),
            region=LOCAL_REGION,
            vendor_url=None,
            limiter_table=resources.limiter_table,
            idempotency_table=resources.idempotency_table,
            log_file=None,
            config=str(config),
            policies={
                name: PolicyEndpoints(
                    queue_url=resources.queue_url,
                    dlq_url=resources.dlq_url,
                    consumer_function=f"sweeper-{name}-consumer",
                    producer_function=f"sweeper-{name}-producer",
                )
            },
        ),
        path,
    )
    return path


def test_status_names_a_closed_app_limit_with_its_key_until_and_why(
    tmp_path: Path, local_aws: LocalAws, aws_env: dict[str, str], db_url: str, unique_name: str
) -> None:
    # Given the listings policy's app limit closed by a 429 with Retry-After (every store
    # waits), another marketplace's app limit closed too, and store s1, which holds a
    # listing due, closed by a bare 429 (its scope's gate)
    local_file = _local_file(tmp_path, local_aws, db_url, unique_name)
    policy = load_config(str(LISTINGS)).policy("listings")
    now = datetime.now(UTC)
    store = scope_for(policy, NewJob("s1", "l1", now))
    ledger = Ledger(db_url)
    ledger.schedule(
        "listings", 1, lambda job: scope_for(policy, job), [NewJob("s1", "l1", now)], now
    )
    ledger.close()
    table = json.loads(local_file.read_text())["limiter_table"]
    limiter = DynamoLimiter(local_aws.dynamodb(), table)
    until = time.time() + 60
    limiter.close(APP_KEY, until, "throttled")
    limiter.close("app:other.example.com", until, "throttled")
    limiter.close(store, until, "backoff")
    runner = CliRunner()
    # When an operator asks for the status, as text and as JSON
    text = runner.invoke(main, ["status", "--local-file", str(local_file)])
    data = runner.invoke(main, ["status", "--json", "--local-file", str(local_file)])
    # Then both name the closed app limit: its name, key, end and why (and not the other
    # marketplace's, nor the store key, which is a scope, not a further limit)
    assert text.exit_code == 0, text.output
    assert data.exit_code == 0, data.output
    reopens = datetime.fromtimestamp(int(until * 1e6) / 1e6, UTC).isoformat()
    (item,) = json.loads(data.output)["policies"]
    assert item["closed_limits"] == [
        {
            "limit": "app",
            "key": APP_KEY,
            "reopens_at": reopens,
            "reason": "throttled",
            "why": "429 with Retry-After",
        }
    ]
    assert (
        f"limit app       {APP_KEY} CLOSED until {reopens} (throttled: 429 with Retry-After)"
        in text.output
    )
    assert "other.example.com" not in text.output
    # And the store's gate is still shown as a scope's, closed by the bare 429's backoff
    (gate,) = item["gates"]
    assert (gate["scope"], gate["closed"], gate["reason"]) == (store, True, "backoff")
    assert f"gate {store}" in text.output


def test_status_says_a_bare_429_closed_a_limit_for_sweepers_own_backoff(
    tmp_path: Path, local_aws: LocalAws, aws_env: dict[str, str], db_url: str, unique_name: str
) -> None:
    # Given the app limit closed by a 429 without Retry-After, and an ended closure
    local_file = _local_file(tmp_path, local_aws, db_url, unique_name)
    table = json.loads(local_file.read_text())["limiter_table"]
    limiter = DynamoLimiter(local_aws.dynamodb(), table)
    limiter.close(APP_KEY, time.time() + 30, "backoff")
    # When the status is read
    data = CliRunner().invoke(main, ["status", "--json", "--local-file", str(local_file)])
    # Then the closure says it is the doubling backoff, not the vendor's Retry-After
    assert data.exit_code == 0, data.output
    (closure,) = json.loads(data.output)["policies"][0]["closed_limits"]
    assert (closure["limit"], closure["reason"]) == ("app", "backoff")
    assert closure["why"] == "429 without Retry-After: doubling backoff"

"""`sweeper status` and the console show a shared quota's split beside the scope's gate:
sweeper's share and the others', as a consumer last wrote it on the scope's limiter item."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime
from pathlib import Path

from click.testing import CliRunner

from sweeper.config import SweeperConfig
from sweeper.ledger.store import Ledger
from sweeper.limiter import DynamoLimiter
from sweeper.limiter.base import ShareSeen
from sweeper.models import NewJob
from sweeper.scheduling import scope_for
from sweeper_cli import main
from sweeper_cli.webconsole import page
from sweeper_cli.webconsole.backend import LedgerBackend
from sweeper_local.aws import LocalAws
from sweeper_tools.policy_file import load_config
from tests.integration.test_status_limits import LISTINGS, local_file_for


def test_status_and_the_console_show_sweepers_share_of_the_quota_and_the_others(
    tmp_path: Path, local_aws: LocalAws, aws_env: dict[str, str], db_url: str, unique_name: str
) -> None:
    # Given store s1 holding a listing due, and a consumer that worked out its scope's quota
    # of 600 as 300 spent by sweeper and 180 by others in the vendor's window
    local_file = local_file_for(tmp_path, local_aws, db_url, unique_name, LISTINGS, "listings")
    config = load_config(str(LISTINGS))
    policy = config.policy("listings")
    now = datetime.now(UTC)
    store = scope_for(policy, NewJob("s1", "l1", now))
    ledger = Ledger(db_url)
    ledger.schedule("listings", 1, lambda j: scope_for(policy, j), [NewJob("s1", "l1", now)], now)
    table = json.loads(local_file.read_text())["limiter_table"]
    limiter = DynamoLimiter(local_aws.dynamodb(), table)
    seen_at = time.time()
    limiter.spend().seen(store, ShareSeen(quota=600, own=300, others=180, seen_at=seen_at))
    limiter.spend().add(store, 1, seen_at, 10.0)
    # When an operator asks for the status, as text and as JSON, and opens the console
    runner = CliRunner()
    text = runner.invoke(main, ["status", "--local-file", str(local_file)])
    data = runner.invoke(main, ["status", "--json", "--local-file", str(local_file)])
    backend = LedgerBackend(
        SweeperConfig(policies=[policy]), ledger, operator="ana", gate=limiter.state
    )
    drawn = page.overview("listings", backend.overview("listings"), [], ["listings"])
    ledger.close()
    # Then each shows the split beside the store's gate
    assert text.exit_code == 0, text.output
    assert data.exit_code == 0, data.output
    (gate,) = json.loads(data.output)["policies"][0]["gates"]
    at = datetime.fromtimestamp(int(seen_at * 1e6) / 1e6, UTC).isoformat()
    assert gate["share"] == {
        "quota": 600,
        "own": 300,
        "others": 180,
        "own_percent": 50.0,
        "others_percent": 30.0,
        "seen_at": at,
    }
    line = f"shared quota: sweeper 300 (50 %), others 180 (30 %) of 600, seen {at}"
    assert line in text.output
    assert f'<td class="share">{line}</td>' in drawn

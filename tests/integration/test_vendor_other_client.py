"""The vendor simulator's other client: a share of the same quota spent by someone else, seen in
the Remaining each dialect states, counted in the audit."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
import urllib3

from sweeper.actions.answer_match import Answer
from sweeper.vendor_limits import RateLimitSource
from sweeper_local.limit_dialects import POLICY_NAME
from sweeper_local.vendor import VendorAudit, VendorProcess, VendorSimulator

pytestmark = pytest.mark.integration


@pytest.fixture
def http() -> Iterator[urllib3.PoolManager]:
    pool = urllib3.PoolManager(retries=False, timeout=urllib3.Timeout(total=5.0))
    yield pool
    pool.clear()


def _remaining(http: urllib3.PoolManager, url: str, n: int) -> int | None:
    response = http.request(
        "DELETE", f"{url}/v1/tenants/t1/objects/o{n}", headers={"Idempotency-Key": f"k{n}"}
    )
    answer = Answer.of(response.status, dict(response.headers), response.data)
    limit = RateLimitSource().read(answer, time.time()).limit(POLICY_NAME)
    assert limit is not None
    return limit.remaining


def test_another_clients_share_of_the_quota_is_gone_from_the_remaining(
    http: urllib3.PoolManager,
) -> None:
    # Given 100 calls per minute, another client spending 30 % of them
    with VendorSimulator(
        quota=(100, 60.0), limit_dialect="ratelimit", other_client_share=0.3
    ) as sim:
        # When sweeper makes its first call
        remaining = _remaining(http, sim.url, 0)
        audit = sim.audit()
    # Then the window holds the other client's 30 calls of the last minute and sweeper's one
    assert remaining == 100 - 30 - 1
    assert audit.other_calls == 30
    assert audit.other_rejections == 0
    assert audit.least_remaining == 69


def test_the_other_client_is_refused_when_sweeper_filled_the_window() -> None:
    # Given 10 calls per second, another client spending half, and 8 calls made at once
    with VendorSimulator(quota=(10, 1.0), other_client_share=0.5, quota_scope="global") as sim:
        http = urllib3.PoolManager(retries=False)
        for n in range(8):
            http.request("DELETE", f"{sim.url}/v1/tenants/t/objects/o{n}")
        # When calls go on until the other client's next one is due (polled, with a deadline)
        deadline = time.monotonic() + 5.0
        while sim.audit().other_rejections == 0 and time.monotonic() < deadline:
            http.request("DELETE", f"{sim.url}/v1/tenants/t/objects/more")
        audit = sim.audit()
    # Then its call met a full window, and sweeper's calls left less than nothing
    assert audit.other_rejections > 0
    assert audit.least_remaining is not None
    assert audit.least_remaining < 0
    assert VendorAudit.from_json(audit.to_json()) == audit


def test_the_simulator_process_takes_the_other_clients_share_from_the_command_line(
    http: urllib3.PoolManager,
) -> None:
    process = VendorProcess(
        *("--rate", "50/10s", "--scope", "global", "--limit-dialect", "ratelimit"),
        *("--other-client-share", "0.3"),
    )
    try:
        remaining = _remaining(http, process.url, 0)
    finally:
        process.stop()
    assert remaining == 50 - 15 - 1


def test_a_share_of_the_whole_quota_or_more_is_refused() -> None:
    with pytest.raises(ValueError, match="other_client_share"):
        VendorSimulator(quota=(10, 1.0), other_client_share=1.0)

"""The vendor simulator keeps the contract sweeper is tested against, over real HTTP."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from urllib.parse import quote

import pytest
import urllib3

from sweeper.local.vendor import VendorAudit, VendorSimulator, max_calls_in_window

pytestmark = pytest.mark.integration

DEADLINE_SECONDS = 5.0


@pytest.fixture
def vendor() -> Iterator[VendorSimulator]:
    with VendorSimulator() as sim:
        yield sim


@pytest.fixture
def http() -> Iterator[urllib3.PoolManager]:
    pool = urllib3.PoolManager(retries=False, timeout=urllib3.Timeout(total=DEADLINE_SECONDS))
    yield pool
    pool.clear()


def delete(
    http: urllib3.PoolManager,
    sim: VendorSimulator,
    tenant_id: str = "t1",
    object_id: str = "o1",
    key: str | None = "k1",
) -> urllib3.BaseHTTPResponse:
    headers = {} if key is None else {"Idempotency-Key": key}
    url = f"{sim.url}/v1/tenants/{quote(tenant_id, safe='')}/objects/{quote(object_id, safe='')}"
    return http.request("DELETE", url, headers=headers)


def wait_until(condition: Callable[[], bool]) -> None:
    deadline = time.monotonic() + DEADLINE_SECONDS
    while not condition():
        assert time.monotonic() < deadline, "condition not met before the deadline"
        time.sleep(0.01)


def test_first_delete_deletes_once_and_answers_204(
    vendor: VendorSimulator, http: urllib3.PoolManager
) -> None:
    # When
    response = delete(http, vendor, key="k1")
    # Then
    assert response.status == 204
    assert "Idempotent-Replayed" not in response.headers
    audit = vendor.audit()
    assert audit.calls_by_key == {"k1": 1}
    assert audit.effects_by_key == {"k1": 1}
    assert audit.effects_total == 1
    assert audit.responses_by_status == {204: 1}


def test_repeat_with_the_same_key_replays_without_a_new_effect(
    vendor: VendorSimulator, http: urllib3.PoolManager
) -> None:
    # Given
    delete(http, vendor, key="k1")
    # When
    response = delete(http, vendor, key="k1")
    # Then
    assert response.status == 204
    assert response.headers["Idempotent-Replayed"] == "true"
    audit = vendor.audit()
    assert audit.calls_by_key == {"k1": 2}
    assert audit.effects_by_key == {"k1": 1}


def test_another_key_for_a_deleted_object_gets_404(
    vendor: VendorSimulator, http: urllib3.PoolManager
) -> None:
    # Given
    delete(http, vendor, key="k1")
    # When
    response = delete(http, vendor, key="k2")
    # Then
    assert response.status == 404
    assert vendor.audit().effects_total == 1


def test_an_object_registered_absent_gets_404(http: urllib3.PoolManager) -> None:
    # Given
    with VendorSimulator(absent={("t1", "gone")}) as sim:
        # When
        response = delete(http, sim, object_id="gone")
        # Then
        assert response.status == 404
        assert sim.audit().effects_total == 0


def test_percent_encoded_ids_are_decoded(http: urllib3.PoolManager) -> None:
    # Given: ids with characters that must be encoded inside one path segment
    with VendorSimulator(absent={("team/a b", "x:y?z%")}) as sim:
        # When
        response = delete(http, sim, tenant_id="team/a b", object_id="x:y?z%")
        # Then
        assert response.status == 404


def test_a_call_without_a_key_gets_400(vendor: VendorSimulator, http: urllib3.PoolManager) -> None:
    # When
    response = delete(http, vendor, key=None)
    # Then
    assert response.status == 400
    assert vendor.audit().effects_total == 0


def test_a_key_reused_for_another_object_gets_422(
    vendor: VendorSimulator, http: urllib3.PoolManager
) -> None:
    # Given
    delete(http, vendor, object_id="o1", key="k1")
    # When
    response = delete(http, vendor, object_id="o2", key="k1")
    # Then
    assert response.status == 422
    assert vendor.audit().effects_total == 1


def test_concurrent_calls_with_one_key_have_one_effect(
    vendor: VendorSimulator, http: urllib3.PoolManager
) -> None:
    # When
    with ThreadPoolExecutor(max_workers=8) as pool:
        statuses = list(pool.map(lambda _: delete(http, vendor, key="k1").status, range(16)))
    # Then
    assert statuses == [204] * 16
    assert vendor.audit().effects_by_key == {"k1": 1}


def test_calls_over_a_strict_quota_get_429_with_retry_after(http: urllib3.PoolManager) -> None:
    # Given
    with VendorSimulator(quota=(3, 60.0)) as sim:
        # When
        responses = [delete(http, sim, object_id=f"o{i}", key=f"k{i}") for i in range(5)]
        # Then
        assert [r.status for r in responses] == [204, 204, 204, 429, 429]
        assert responses[3].headers["Retry-After"] == "60"
        audit = sim.audit()
        assert audit.effects_total == 3
        assert audit.throttled_total == 2
        assert audit.responses_by_status == {204: 3, 429: 2}
        assert audit.max_calls_in_window == 5  # rejected calls count toward the window
        assert audit.window_seconds == 60.0


def test_a_rejected_call_counts_toward_the_window(http: urllib3.PoolManager) -> None:
    # Given: a quota of 1 whose slot is taken
    with VendorSimulator(quota=(1, 60.0)) as sim:
        delete(http, sim, key="k1")
        # When
        first, second = delete(http, sim, key="k2"), delete(http, sim, key="k2")
        # Then
        assert (first.status, second.status) == (429, 429)
        assert sim.audit().calls_by_key == {"k1": 1, "k2": 2}


def test_a_tenant_quota_is_kept_per_tenant(http: urllib3.PoolManager) -> None:
    # Given
    with VendorSimulator(quota=(1, 60.0), quota_scope="tenant") as sim:
        # When
        statuses = [delete(http, sim, tenant_id=t, key=f"k{i}").status for i, t in enumerate("aba")]
        # Then
        assert statuses == [204, 204, 429]
        assert sim.audit().max_calls_in_window == 2


def test_a_global_quota_covers_every_tenant(http: urllib3.PoolManager) -> None:
    # Given
    with VendorSimulator(quota=(1, 60.0), quota_scope="global") as sim:
        # When
        statuses = [delete(http, sim, tenant_id=t, key=f"k{i}").status for i, t in enumerate("ab")]
        # Then
        assert statuses == [204, 429]


def test_max_calls_in_window_counts_half_open_windows() -> None:
    # Given: arrivals 1 s apart exactly leave a 1 s window
    arrivals = [0.0, 0.5, 0.9, 1.0, 1.4, 3.0]
    # Then: (0.0, 1.0] holds 0.5, 0.9, 1.0; (0.4, 1.4] holds 0.5, 0.9, 1.0, 1.4
    assert max_calls_in_window(arrivals, 1.0) == 4
    assert max_calls_in_window([], 1.0) == 0


def test_latency_is_applied_after_the_arrival_is_recorded(http: urllib3.PoolManager) -> None:
    # Given
    with VendorSimulator(latency_seconds=0.2) as sim:
        started = time.monotonic()
        # When
        response = delete(http, sim)
        # Then
        elapsed = time.monotonic() - started
        assert response.status == 204
        assert elapsed >= 0.2
        assert sim.audit().arrivals[0] - started < 0.2


def test_fail_next_forces_statuses_without_effect(
    vendor: VendorSimulator, http: urllib3.PoolManager
) -> None:
    # Given
    vendor.fail_next(2, 500)
    vendor.fail_next(1, 503, retry_after="7")
    # When
    responses = [delete(http, vendor, key="k1") for _ in range(4)]
    # Then
    assert [r.status for r in responses] == [500, 500, 503, 204]
    assert responses[2].headers["Retry-After"] == "7"
    assert vendor.audit().effects_by_key == {"k1": 1}


def test_an_error_rate_of_one_answers_503_without_effect(http: urllib3.PoolManager) -> None:
    # Given
    with VendorSimulator(error_rate=1.0) as sim:
        # When
        response = delete(http, sim)
        # Then
        assert response.status == 503
        assert "Retry-After" not in response.headers
        assert sim.audit().effects_total == 0


def test_the_audit_endpoint_returns_the_audit(
    vendor: VendorSimulator, http: urllib3.PoolManager
) -> None:
    # Given
    delete(http, vendor, key="k1")
    delete(http, vendor, key="k1")
    delete(http, vendor, key=None)
    # When
    response = http.request("GET", f"{vendor.url}/_audit")
    # Then
    assert response.status == 200
    served = VendorAudit.from_json(json.loads(response.data))
    assert served == vendor.audit()
    assert served.calls_total == 3  # the audit itself is not a call
    assert served.responses_by_status == {204: 2, 400: 1}


def test_the_reset_endpoint_forgets_everything(
    vendor: VendorSimulator, http: urllib3.PoolManager
) -> None:
    # Given
    delete(http, vendor, key="k1")
    vendor.fail_next(1, 500)
    # When
    response = http.request("POST", f"{vendor.url}/_reset")
    # Then
    assert response.status == 204
    assert vendor.audit().calls_total == 0
    assert delete(http, vendor, key="k2").status == 204  # deletable again, no fault left


def test_the_command_line_serves_until_sigterm(http: urllib3.PoolManager) -> None:
    # Given
    command = [sys.executable, "-m", "sweeper.local.vendor", "--port", "0", "--rate", "40/1s"]
    with subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
    ) as process:
        try:
            assert process.stdout is not None
            url = process.stdout.readline().strip()  # EOF if the process died
            assert url.startswith("http://127.0.0.1:")
            # When
            deleted = http.request(
                "DELETE", f"{url}/v1/tenants/t/objects/o", headers={"Idempotency-Key": "k"}
            )
            audit = json.loads(http.request("GET", f"{url}/_audit").data)
            process.send_signal(signal.SIGTERM)
            # Then
            assert deleted.status == 204
            assert audit["window_seconds"] == 1.0
            assert process.wait(timeout=DEADLINE_SECONDS) == 0
        finally:
            process.kill()  # a no-op once it has exited

"""The vendor simulator keeps the contract sweeper is tested against, over real HTTP."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import fields
from typing import Any
from urllib.parse import quote

import pytest
import urllib3

from sweeper_local import vendor as vendor_module
from sweeper_local.vendor import VendorAudit, VendorSimulator, max_calls_in_window
from tests.wire import count_writes, exchange

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
        assert "X-RateLimit-Reset-Ms" not in responses[3].headers  # only when asked for
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


def test_mean_in_flight_integrates_the_calls_held_at_once_over_the_span() -> None:
    # Given: calls held over [0, 2], [1, 2] and [3, 4], and one arrived at 5, unanswered
    audit = _audit_of(arrivals=(0.0, 1.0, 3.0, 5.0), answered=((1.0, 2.0), (0.0, 2.0), (3.0, 4.0)))
    # Then: by default from the first arrival to the last answer, 4 call-seconds over 4 s
    assert audit.mean_in_flight() == pytest.approx(1.0)
    # Two at once over [1, 2]; one over [0.5, 1]; none over [2, 3]
    assert audit.mean_in_flight(1.0, 2.0) == pytest.approx(2.0)
    assert audit.mean_in_flight(0.5, 1.0) == pytest.approx(1.0)
    assert audit.mean_in_flight(2.0, 3.0) == pytest.approx(0.0)
    # The unanswered call counts until the span's end: over [3.5, 6], 0.5 + 1 call-seconds
    assert audit.mean_in_flight(3.5, 6.0) == pytest.approx(1.5 / 2.5)
    # The mean latency is over the answered calls: (1 + 2 + 1) / 3
    assert audit.mean_latency_seconds() == pytest.approx(4.0 / 3.0)
    assert _audit_of(arrivals=(1.0,), answered=()).mean_latency_seconds() is None
    assert _audit_of(arrivals=(), answered=()).mean_in_flight() == 0.0


def _audit_of(
    *, arrivals: tuple[float, ...], answered: tuple[tuple[float, float], ...]
) -> VendorAudit:
    return VendorAudit(
        calls_total=len(arrivals),
        calls_by_key={},
        effects_by_key={},
        effects_total=0,
        responses_by_status={},
        throttled_total=0,
        max_calls_in_window=0,
        window_seconds=1.0,
        arrivals=arrivals,
        answered=answered,
    )


def test_the_audit_measures_two_overlapping_calls_then_one_alone(
    http: urllib3.PoolManager,
) -> None:
    # Given: each call held 0.3 s
    with VendorSimulator(latency_seconds=0.3) as sim:
        # When: two calls at once, then one alone
        with ThreadPoolExecutor(max_workers=2) as pool:
            list(pool.map(lambda n: delete(http, sim, object_id=f"o{n}", key=f"k{n}"), (1, 2)))
        delete(http, sim, object_id="o3", key="k3")
        audit = sim.audit()
    # Then: each held its latency, and no more than the time to wake a thread
    latency = audit.mean_latency_seconds()
    assert latency is not None
    assert 0.3 <= latency < 0.35
    # Two in flight from the pair's second arrival to its first answer
    first, second, _ = audit.arrivals
    first_answer = audit.answered[0][1]
    assert second < first_answer
    assert audit.mean_in_flight(second, first_answer) == pytest.approx(2.0)
    assert 1.0 < audit.mean_in_flight(first, first_answer) <= 2.0
    # From the first arrival to the last answer: three calls' time over the span
    span = audit.answered[-1][1] - first
    assert audit.mean_in_flight() == pytest.approx(3 * latency / span)
    assert 1.3 < audit.mean_in_flight() < 1.5


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
    vendor.set_auth_failing(True)
    vendor.start_incident(60.0)
    # When
    response = http.request("POST", f"{vendor.url}/_reset")
    # Then
    assert response.status == 204
    audit = vendor.audit()
    assert (audit.calls_total, audit.incidents) == (0, ())
    assert delete(http, vendor, key="k2").status == 204  # deletable again, no fault left


def test_the_command_line_serves_until_sigterm(http: urllib3.PoolManager) -> None:
    # Given
    command = [sys.executable, "-m", "sweeper_local.vendor", "--port", "0", "--rate", "40/1s"]
    command += ["--scope", "global", "--retry-after-ms-header", "--server-error-rate", "0"]
    command += ["--latency-distribution", "lognormal", "--timeout-after-effect-rate", "0"]
    command += ["--auth-failure-rate", "0", "--incident-at", "60", "--incident-for", "5"]
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
            [(start, end)] = audit["incidents"]  # scheduled, not yet begun
            assert end - start == pytest.approx(5.0)
            assert audit["calls_during_closure"] == 0
            assert process.wait(timeout=DEADLINE_SECONDS) == 0
        finally:
            process.kill()  # a no-op once it has exited


def test_the_quota_counts_rejected_calls_and_reports_its_rejections(
    http: urllib3.PoolManager,
) -> None:
    # Given
    with VendorSimulator(quota=(2, 60.0)) as sim:
        # When
        statuses = [delete(http, sim, object_id=f"o{i}", key=f"k{i}").status for i in range(5)]
        # Then
        assert statuses == [204, 204, 429, 429, 429]
        audit = sim.audit()
        assert (audit.quota_rejections, audit.throttled_total) == (3, 3)
        assert (audit.max_calls_in_window, audit.max_accepted_in_window) == (5, 2)
        assert audit.accepted_total == 2


def test_the_reset_ms_header_names_the_wait_in_milliseconds(http: urllib3.PoolManager) -> None:
    # Given: a quota whose one slot is taken
    with VendorSimulator(quota=(1, 60.0), retry_after_ms_header=True) as sim:
        delete(http, sim, key="k1")
        # When
        response = delete(http, sim, key="k2")
        # Then
        assert response.status == 429
        assert response.headers["Retry-After"] == "60"
        assert 59_000 < int(response.headers["X-RateLimit-Reset-Ms"]) <= 60_000


def test_a_client_waiting_the_advertised_reset_is_admitted(http: urllib3.PoolManager) -> None:
    # Given: a full window, then a rejected call that counts in it too
    with VendorSimulator(quota=(1, 0.2), retry_after_ms_header=True) as sim:
        delete(http, sim, key="k1")
        rejected = delete(http, sim, object_id="o2", key="k2")
        # When: the client obeys the header exactly (the wait is the behaviour under test)
        time.sleep(int(rejected.headers["X-RateLimit-Reset-Ms"]) / 1000)
        admitted = delete(http, sim, object_id="o2", key="k2")
        # Then
        assert (rejected.status, admitted.status) == (429, 204)


def test_lognormal_latency_is_the_same_for_the_same_seed(http: urllib3.PoolManager) -> None:
    # Given
    def delays(seed: int) -> tuple[float, ...]:
        with VendorSimulator(
            latency_seconds=0.005, latency_distribution="lognormal", latency_sigma=0.5, seed=seed
        ) as sim:
            for i in range(5):
                delete(http, sim, object_id=f"o{i}", key=f"k{i}")
            return sim.audit().delays_seconds

    # When
    first, again, other = delays(7), delays(7), delays(8)
    # Then
    assert first == again
    assert first != other
    assert len(set(first)) == 5
    assert all(d > 0 for d in first)


def test_random_faults_are_the_same_for_the_same_seed(http: urllib3.PoolManager) -> None:
    # Given
    def statuses(seed: int) -> list[int]:
        with VendorSimulator(error_rate=0.3, server_error_rate=0.3, seed=seed) as sim:
            return [delete(http, sim, object_id=f"o{i}", key=f"k{i}").status for i in range(20)]

    # When
    first, again = statuses(3), statuses(3)
    # Then
    assert first == again
    assert {500, 503, 204} <= set(first)


def test_a_server_error_rate_of_one_answers_500_without_effect(http: urllib3.PoolManager) -> None:
    # Given
    with VendorSimulator(server_error_rate=1.0) as sim:
        # When
        response = delete(http, sim)
        # Then
        assert response.status == 500
        assert sim.audit().effects_total == 0


def test_a_lost_answer_times_out_the_client_and_the_retry_replays_the_204(
    http: urllib3.PoolManager,
) -> None:
    # Given: every answer lost after the effect, the connection held far beyond the client's wait
    with VendorSimulator(timeout_after_effect_rate=1.0, hang_seconds=30.0) as sim:
        url = f"{sim.url}/v1/tenants/t1/objects/o1"
        # When
        with pytest.raises(urllib3.exceptions.ReadTimeoutError):
            http.request("DELETE", url, headers={"Idempotency-Key": "k1"}, timeout=0.3)
        # Then: the deletion happened although the client never heard of it
        wait_until(lambda: sim.audit().effects_by_key == {"k1": 1})
        assert sim.audit().answers_lost == 1
        # And a retry with the same key gets the original answer, without a second effect
        sim.set_fault_rates(timeout_after_effect_rate=0.0)
        retried = delete(http, sim, key="k1")
        assert retried.status == 204
        assert retried.headers["Idempotent-Replayed"] == "true"
        assert sim.audit().effects_by_key == {"k1": 1}


def test_a_lost_answer_may_close_the_connection_unanswered(http: urllib3.PoolManager) -> None:
    # Given
    with VendorSimulator(timeout_after_effect_rate=1.0, lost_answer="close") as sim:
        # When
        with pytest.raises(urllib3.exceptions.ProtocolError):
            delete(http, sim, key="k1")
        # Then
        assert sim.audit().effects_by_key == {"k1": 1}


def test_auth_failing_answers_401_without_effect_until_turned_off(
    vendor: VendorSimulator, http: urllib3.PoolManager
) -> None:
    # Given
    vendor.set_auth_failing(True)
    # When
    failed = delete(http, vendor, key="k1")
    vendor.set_auth_failing(False)
    recovered = delete(http, vendor, key="k1")
    # Then
    assert (failed.status, recovered.status) == (401, 204)
    assert vendor.audit().effects_by_key == {"k1": 1}


def test_an_auth_failure_rate_of_one_answers_401_without_effect(
    http: urllib3.PoolManager,
) -> None:
    # Given
    with VendorSimulator(auth_failure_rate=1.0) as sim:
        # When
        response = delete(http, sim)
        # Then
        assert response.status == 401
        assert sim.audit().effects_total == 0


def test_an_incident_closes_the_api_until_it_ends(http: urllib3.PoolManager) -> None:
    # Given: a quota the calls stay well within
    with VendorSimulator(quota=(1000, 60.0)) as sim:
        sim.start_incident(0.3)
        # When: the client keeps calling until the API answers again
        closed: list[urllib3.BaseHTTPResponse] = []
        deadline = time.monotonic() + DEADLINE_SECONDS
        while (response := delete(http, sim, key="k1")).status == 429:
            assert time.monotonic() < deadline, "the incident did not end"
            closed.append(response)
            time.sleep(0.01)
        # Then
        assert response.status == 204
        assert closed
        assert all(r.headers["Retry-After"] == "1" for r in closed)
        audit = sim.audit()
        assert audit.calls_during_closure == len(closed)
        assert audit.quota_rejections == 0  # the 429s were the incident's
        assert audit.effects_by_key == {"k1": 1}
        [(start, end)] = audit.incidents
        assert end - start == pytest.approx(0.3)
        [reopened_after] = audit.first_success_after_reopen_seconds
        assert reopened_after is not None
        assert 0.0 <= reopened_after < DEADLINE_SECONDS


def test_an_incident_may_answer_503_with_a_given_retry_after(
    vendor: VendorSimulator, http: urllib3.PoolManager
) -> None:
    # Given
    vendor.start_incident(60.0, retry_after_seconds=7, status=503)
    # When
    response = delete(http, vendor)
    # Then
    assert (response.status, response.headers["Retry-After"]) == (503, "7")
    audit = vendor.audit()
    assert audit.effects_total == 0
    assert audit.first_success_after_reopen_seconds == (None,)


def test_the_incident_endpoint_starts_an_incident(
    vendor: VendorSimulator, http: urllib3.PoolManager
) -> None:
    # When
    started = http.request("POST", f"{vendor.url}/_incident?seconds=5&status=429")
    response = delete(http, vendor)
    # Then
    assert started.status == 200
    assert (response.status, response.headers["Retry-After"]) == (429, "5")
    audit = vendor.audit()
    assert (audit.calls_total, audit.calls_during_closure, audit.effects_total) == (1, 1, 0)
    assert len(audit.incidents) == 1


@pytest.mark.parametrize("query", ["", "seconds=x", "seconds=0", "seconds=5&status=500"])
def test_the_incident_endpoint_rejects_a_bad_incident(
    vendor: VendorSimulator, http: urllib3.PoolManager, query: str
) -> None:
    # When
    response = http.request("POST", f"{vendor.url}/_incident?{query}")
    # Then
    assert response.status == 400
    assert vendor.audit().incidents == ()


@pytest.mark.parametrize(
    "options",
    [
        {"server_error_rate": 1.5},
        {"timeout_after_effect_rate": -0.1},
        {"latency_distribution": "lognormal", "latency_jitter_seconds": 0.1},
        {"lost_answer": "drop"},
    ],
)
def test_bad_options_are_refused(options: dict[str, Any]) -> None:
    with pytest.raises(ValueError):  # noqa: PT011 - each option has its own message
        VendorSimulator(**options)


def test_the_audit_round_trips_through_json() -> None:
    # Given: an audit in which no field keeps its default
    audit = VendorAudit(
        calls_total=9,
        calls_by_key={"k1": 2},
        effects_by_key={"k1": 1},
        effects_total=1,
        responses_by_status={204: 1, 429: 8},
        throttled_total=8,
        max_calls_in_window=6,
        window_seconds=0.5,
        arrivals=(1.25, 2.5),
        keys_by_target={"t1/o1": ("k1",)},
        max_accepted_in_window=1,
        accepted_total=1,
        quota_rejections=3,
        calls_during_closure=5,
        answers_lost=1,
        incidents=((3.0, 4.0), (10.0, 11.5)),
        first_success_after_reopen_seconds=(0.125, None),
        delays_seconds=(0.01, 0.02),
        max_in_flight=2,
        answered=((1.25, 1.5), (2.5, 2.75)),
        other_calls=4,
        other_rejections=1,
        least_remaining=2,
        quota_rejected_at=(2.5,),
        quota_changed_at=(2.0,),
    )
    assert all(getattr(audit, f.name) != f.default for f in fields(audit))
    # When
    again = VendorAudit.from_json(json.loads(json.dumps(audit.to_json())))
    # Then
    assert again == audit


def test_an_answer_leaves_in_one_write_and_header_names_are_read_in_any_case(
    vendor: VendorSimulator, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given the writes to the connections counted
    writes = count_writes(vendor_module._Handler, monkeypatch)
    port = int(vendor.url.rsplit(":", 1)[1])
    # When a DELETE names its key in lower case, and a second names two keys (the first
    # another object's, the second this one's) and asks to close
    first = b"DELETE /v1/tenants/t1/objects/o1 HTTP/1.1\r\nidempotency-key: k1\r\n\r\n"
    second = (
        b"DELETE /v1/tenants/t1/objects/o2 HTTP/1.1\r\nIDEMPOTENCY-KEY: k1\r\n"
        b"Idempotency-Key: k2\r\nConnection: close\r\n\r\n"
    )
    answer = exchange(port, first + second)
    # Then the first deleted its object, the second was read with its first key (k1, used for
    # o1 already: 422), as http.client's HTTPMessage.get reads a repeated name
    assert answer.startswith(b"HTTP/1.1 204 No Content\r\n")
    assert b"HTTP/1.1 422 Unprocessable Content\r\n" in answer
    # and each answer (status line, header fields, body) was one write
    assert len(writes) == 2
    assert answer == b"".join(writes)

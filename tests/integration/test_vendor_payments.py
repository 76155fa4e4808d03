"""The vendor simulator's payments provider (docs/examples/payments.toml) over real HTTP."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

from sweeper_local.vendor import (
    PAYMENTS_CLIENTS_ENV,
    PaymentsAudit,
    VendorProcess,
    VendorSimulator,
    fetch_payments_audit,
)

pytestmark = pytest.mark.integration

CLIENT_ID, CLIENT_SECRET = "payments-client", "s3cr3t"


@pytest.fixture
def vendor() -> Iterator[VendorSimulator]:
    with VendorSimulator(token_lifetime_seconds=60) as sim:
        sim.payments.add_client(CLIENT_ID, CLIENT_SECRET)
        yield sim


def _post(url: str, body: bytes, headers: dict[str, str]) -> tuple[int, dict[str, str], Any]:
    request = urllib.request.Request(url, data=body, headers=headers, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return answer.status, dict(answer.headers), json.loads(answer.read() or b"null")
    except urllib.error.HTTPError as exc:
        return exc.code, dict(exc.headers), json.loads(exc.read() or b"null")


def _token(sim: VendorSimulator, secret: str = CLIENT_SECRET) -> tuple[int, Any]:
    form = urllib.parse.urlencode(
        {"grant_type": "client_credentials", "client_id": CLIENT_ID, "client_secret": secret}
    ).encode()
    status, _, answer = _post(
        f"{sim.url}/oauth/token", form, {"Content-Type": "application/x-www-form-urlencoded"}
    )
    return status, answer


def _reconcile(
    sim: VendorSimulator, token: str, key: str | None, body: object
) -> tuple[int, dict[str, str]]:
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    if key is not None:
        headers["X-Idempotency-Token"] = key
    status, answer_headers, _ = _post(
        f"{sim.url}/v1/reconciliations", json.dumps(body).encode(), headers
    )
    return status, answer_headers


def _body(payment: str = "pay_9", day: str = "2026-11-30") -> dict[str, str]:
    return {"payment_id": payment, "business_date": day}


def test_the_token_endpoint_issues_bearer_tokens_to_a_registered_client_only(
    vendor: VendorSimulator,
) -> None:
    status, answer = _token(vendor)
    assert status == 200
    assert answer["token_type"] == "Bearer"
    assert answer["expires_in"] == 60
    assert _token(vendor, secret="wrong")[0] == 401
    audit = vendor.payments_audit()
    assert (audit.tokens_issued, audit.token_refusals) == (1, 1)


def test_a_reconciliation_takes_effect_once_and_a_replay_of_its_token_answers_200(
    vendor: VendorSimulator,
) -> None:
    token = _token(vendor)[1]["access_token"]
    assert _reconcile(vendor, token, "k1", _body())[0] == 201
    status, headers = _reconcile(vendor, token, "k1", _body())
    assert status == 200
    assert headers["Idempotent-Replayed"] == "true"
    assert _reconcile(vendor, token, "k1", _body(day="2026-12-01"))[0] == 422  # token reused
    assert _reconcile(vendor, token, "k2", _body(day="2026-12-01"))[0] == 201
    audit = vendor.payments_audit()
    assert audit.effects_by_pair == {"pay_9/2026-11-30": 1, "pay_9/2026-12-01": 1}
    assert audit.effects_by_token == {"k1": 1, "k2": 1}
    assert audit.replays == 1


def test_an_unknown_or_expired_token_is_refused_401_without_effect(
    vendor: VendorSimulator,
) -> None:
    token = _token(vendor)[1]["access_token"]
    assert _reconcile(vendor, "made-up", "k1", _body())[0] == 401
    vendor.payments.expire_tokens()
    status, headers = _reconcile(vendor, token, "k1", _body())
    assert status == 401
    assert "invalid_token" in headers["WWW-Authenticate"]
    fresh = _token(vendor)[1]["access_token"]
    assert _reconcile(vendor, fresh, "k1", _body())[0] == 201
    audit = vendor.payments_audit()
    assert audit.expired_token_calls == 1
    assert audit.expired_token_calls_by_key == {"k1": 1}
    assert audit.effects_total == 1


def test_a_token_lives_as_long_as_its_expires_in_says() -> None:
    with VendorSimulator(token_lifetime_seconds=0.2) as sim:
        sim.payments.add_client(CLIENT_ID, CLIENT_SECRET)
        token = _token(sim)[1]["access_token"]
        assert _reconcile(sim, token, "k1", _body())[0] == 201
        time.sleep(0.3)  # the token's own lifetime is what is tested
        assert _reconcile(sim, token, "k2", _body(day="2026-12-01"))[0] == 401


def test_a_locked_payment_answers_409_with_retry_after_then_takes_effect(
    vendor: VendorSimulator,
) -> None:
    vendor.payments.lock("pay_9", 2, retry_after_seconds=3)
    token = _token(vendor)[1]["access_token"]
    for _ in range(2):
        status, headers = _reconcile(vendor, token, "k1", _body())
        assert status == 409
        assert headers["Retry-After"] == "3"
    assert _reconcile(vendor, token, "k1", _body())[0] == 201
    assert _reconcile(vendor, token, "k2", _body("pay_1"))[0] == 201  # only pay_9 was locked
    assert vendor.payments_audit().locked_answers == 2


@pytest.mark.parametrize(
    "body",
    [
        {"payment_id": "pay_9"},
        {"payment_id": "pay_9", "business_date": "2026-02-30"},
        {"payment_id": "pay_9", "business_date": "30/11/2026"},
        {"payment_id": 9, "business_date": "2026-11-30"},
        {**_body(), "amount": 1},
        ["pay_9", "2026-11-30"],
    ],
)
def test_a_malformed_body_is_refused_422_without_effect(
    vendor: VendorSimulator, body: object
) -> None:
    token = _token(vendor)[1]["access_token"]
    assert _reconcile(vendor, token, "k1", body)[0] == 422
    assert vendor.payments_audit().effects_total == 0


def test_a_call_without_the_idempotency_token_is_refused_400(vendor: VendorSimulator) -> None:
    token = _token(vendor)[1]["access_token"]
    assert _reconcile(vendor, token, None, _body())[0] == 400


def test_a_lost_answer_keeps_its_effect_and_the_retry_is_a_replay(
    vendor: VendorSimulator,
) -> None:
    vendor.payments.lose_answer_once("pay_9")
    token = _token(vendor)[1]["access_token"]
    with pytest.raises((urllib.error.URLError, ConnectionError)):
        _reconcile(vendor, token, "k1", _body())
    assert _reconcile(vendor, token, "k1", _body())[0] == 200
    audit = fetch_payments_audit(vendor.url)
    assert isinstance(audit, PaymentsAudit)
    assert (audit.effects_total, audit.answers_lost, audit.replays) == (1, 1, 1)


def test_a_simulator_process_accepts_the_payments_clients_its_environment_names(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(PAYMENTS_CLIENTS_ENV, json.dumps({CLIENT_ID: CLIENT_SECRET}))
    process = VendorProcess("--token-lifetime", "7")
    try:
        form = urllib.parse.urlencode(
            {"grant_type": "client_credentials", "client_id": CLIENT_ID, "client_secret": "x"}
        )
        bad, _, _ = _post(f"{process.url}/oauth/token", form.encode(), {})
        good, _, answer = _post(
            f"{process.url}/oauth/token",
            form.replace("client_secret=x", f"client_secret={CLIENT_SECRET}").encode(),
            {},
        )
    finally:
        process.stop()
    assert (bad, good, answer["expires_in"]) == (401, 200, 7)

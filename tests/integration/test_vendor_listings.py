"""The vendor simulator's marketplace (sweeper_local.marketplace) over HTTP: the contract of
docs/examples/listings.toml, its API key, and its two sliding windows naming their limit."""

from __future__ import annotations

import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from sweeper.actions.http import HttpActionConfig
from sweeper.actions.http_auth import HeaderAuth
from sweeper_local.action_secrets import with_local_secrets
from sweeper_local.aws import LocalAws
from sweeper_local.marketplace import max_in_window
from sweeper_local.vendor import (
    LISTINGS_API_KEYS_ENV,
    VendorProcess,
    VendorSimulator,
    fetch_listings_audit,
)
from sweeper_tools.policy_file import load_config

pytestmark = pytest.mark.integration

EXAMPLE = Path(__file__).parents[2] / "docs" / "examples" / "listings.toml"
KEY = "k-test"
#: Periods long enough that no window empties while a test makes its calls.
LONG_SECONDS = 30.0


@pytest.fixture
def vendor() -> Iterator[VendorSimulator]:
    with VendorSimulator(
        listings_store_rate=(2, LONG_SECONDS), listings_app_rate=(5, LONG_SECONDS)
    ) as sim:
        sim.listings.add_api_key(KEY)
        yield sim


def delete(url: str, store: str, listing: str, key: str | None = KEY) -> tuple[int, dict[str, str]]:
    request = urllib.request.Request(f"{url}/v1/stores/{store}/listings/{listing}", method="DELETE")
    if key is not None:
        request.add_header("X-Api-Key", key)
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, dict(response.headers)
    except urllib.error.HTTPError as exc:
        return exc.code, dict(exc.headers)


def test_a_listing_is_deleted_once_then_absent(vendor: VendorSimulator) -> None:
    vendor.listings.add_absent("s3", "never")
    assert delete(vendor.url, "s1", "l1")[0] == 204
    assert delete(vendor.url, "s1", "l1")[0] == 404
    assert delete(vendor.url, "s2", "never")[0] == 204  # another store's listing of that id
    assert delete(vendor.url, "s3", "never")[0] == 404
    audit = vendor.listings_audit()
    assert audit.effects_by_listing == {"s1/l1": 1, "s2/never": 1}
    assert audit.calls_by_listing == {"s1/l1": 2, "s2/never": 1, "s3/never": 1}


def test_a_call_without_the_api_key_or_with_another_is_refused_401(
    vendor: VendorSimulator,
) -> None:
    assert delete(vendor.url, "s1", "l1", key=None)[0] == 401
    assert delete(vendor.url, "s1", "l1", key="not-the-key")[0] == 401
    audit = vendor.listings_audit()
    assert audit.effects_by_listing == {}
    assert audit.responses_by_status == {401: 2}
    assert audit.arrivals_by_store == {}  # not counted in any window


def test_a_store_over_its_window_is_refused_naming_the_store(vendor: VendorSimulator) -> None:
    # Given a store that used its 2 calls of the window
    assert [delete(vendor.url, "s1", f"l{i}")[0] for i in range(2)] == [204, 204]
    # When it calls a third time
    status, headers = delete(vendor.url, "s1", "l2")
    # Then the store's limit refuses it, with the time its window admits a call again
    assert status == 429
    assert headers["X-RateLimit-Scope"] == "store"
    assert 1 <= int(headers["Retry-After"]) <= LONG_SECONDS
    # And another store is still admitted
    assert delete(vendor.url, "s2", "l0")[0] == 204
    audit = vendor.listings_audit()
    assert audit.throttled_by_scope == {"store": 1}
    assert audit.effects_by_listing.get("s1/l2") is None


def test_the_app_over_its_window_is_refused_naming_the_app(vendor: VendorSimulator) -> None:
    # Given five stores' calls, the app's whole window, each store within its own
    assert [delete(vendor.url, f"s{i}", "l")[0] for i in range(5)] == [204] * 5
    # When a sixth store calls
    status, headers = delete(vendor.url, "s5", "l")
    # Then the app's limit refuses it (the store has used none of its own)
    assert status == 429
    assert headers["X-RateLimit-Scope"] == "app"
    assert int(headers["Retry-After"]) >= 1
    audit = vendor.listings_audit()
    assert audit.throttled_by_scope == {"app": 1}
    assert audit.most_in_an_app_window() == 6  # the refused call arrived, and counts
    assert audit.most_in_a_store_window() == 1


def test_an_injected_429_names_its_scope_and_is_not_counted_as_the_windows(
    vendor: VendorSimulator,
) -> None:
    vendor.listings.throttle_next("app", store="s2", retry_after_seconds=3)
    assert delete(vendor.url, "s1", "l")[0] == 204  # another store's call passes
    status, headers = delete(vendor.url, "s2", "l")
    assert (status, headers["X-RateLimit-Scope"], headers["Retry-After"]) == (429, "app", "3")
    assert delete(vendor.url, "s2", "l")[0] == 204
    audit = vendor.listings_audit()
    assert (audit.forced_throttles, audit.throttled_by_scope) == (1, {})
    assert len(audit.forced_at) == 1


def test_max_in_window_counts_arrivals_within_one_period() -> None:
    assert max_in_window([0.0, 0.5, 0.99, 1.5], 1.0) == 3
    assert max_in_window([0.0, 1.0, 2.0], 1.0) == 1  # a window is (t - 1, t]
    assert max_in_window([], 1.0) == 0


def test_the_simulator_process_takes_its_windows_and_keys_from_its_options(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(LISTINGS_API_KEYS_ENV, '["k-proc"]')  # inherited by the process
    proc = VendorProcess("--listings-store-rate", "1/30s", "--listings-app-rate", "7/30s")
    try:
        assert delete(proc.url, "s1", "a", key="k-proc")[0] == 204
        assert delete(proc.url, "s1", "b", key="k-proc")[0] == 429
        assert delete(proc.url, "s1", "c", key=KEY)[0] == 401
        audit = fetch_listings_audit(proc.url)
        assert (audit.store_rate, audit.app_rate) == ((1, 30.0), (7, 30.0))
        assert audit.throttled_by_scope == {"store": 1}
    finally:
        proc.stop()


def test_the_simulator_process_refuses_a_window_that_is_not_sliding() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "sweeper_local.vendor", "--listings-app-rate", "40/1s bucket"],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert result.returncode == 2
    assert "sliding" in result.stderr
    assert "Traceback" not in result.stderr


def test_against_the_simulator_the_local_stack_makes_an_api_key_the_marketplace_accepts(
    vendor: VendorSimulator, local_aws: LocalAws
) -> None:
    # Given the listings example rehearsed against the simulator, as `local up` without --api-url
    policy = load_config(EXAMPLE).policy("listings")
    sm = local_aws.secretsmanager()
    # When the local stack makes its secret
    local = with_local_secrets(sm, policy, prefix="test-listings", vendor=vendor, given={})
    # Then the policy names a local secret holding a key the marketplace accepts in X-Api-Key
    assert isinstance(local.action, HttpActionConfig)
    assert isinstance(local.action.auth, HeaderAuth)
    assert local.action.auth.header == "X-Api-Key"
    key = sm.get_secret_value(SecretId=local.action.auth.secret_arn)["SecretString"]
    assert key != KEY
    assert delete(vendor.url, "s1", "l1", key=key)[0] == 204

"""A 429 closes the limit it belongs to, for a policy with a store limit and an app limit.

The vendor here is a small HTTP server answering every call 429, with or without the header
that names the limit (`X-RateLimit-Scope: store|app`); the limiter is the real one on moto.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from dataclasses import replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from sweeper import runtime
from sweeper.config import LimitConfig, Policy, Quota
from sweeper.limiter import DynamoLimiter
from sweeper.limiter.paired import Want
from tests.conftest import Pipeline
from tests.integration.test_consumer import publish_all
from tests.integration.test_parallel_calls import invoke

pytestmark = pytest.mark.integration


class Refusing:
    """Answers every DELETE 429 (or its first `refusals`, the later ones 204), naming `scope`
    in X-RateLimit-Scope when it is set, and with `retry_after` (seconds) in Retry-After when
    that is; `arrivals`: when each DELETE came (epoch seconds)."""

    def __init__(self) -> None:
        self.scope: str | None = None
        self.retry_after: int | None = None
        self.refusals: int | None = None
        self.arrivals: list[float] = []
        lock = threading.Lock()
        refusing = self

        class Handler(BaseHTTPRequestHandler):
            def do_DELETE(self) -> None:
                with lock:
                    refusing.arrivals.append(time.time())
                    refused = refusing.refusals is None or (
                        len(refusing.arrivals) <= refusing.refusals
                    )
                if not refused:
                    self.send_response(204)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                self.send_response(429)
                if refusing.scope is not None:
                    self.send_header("X-RateLimit-Scope", refusing.scope)
                if refusing.retry_after is not None:
                    self.send_header("Retry-After", str(refusing.retry_after))
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: object) -> None:
                return

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def refusing() -> Iterator[Refusing]:
    vendor = Refusing()
    try:
        yield vendor
    finally:
        vendor.close()


def two_limits(p: Pipeline, monkeypatch: pytest.MonkeyPatch, url: str) -> Pipeline:
    data = p.policy.model_dump(exclude={"quota", "scope"})
    data["limits"] = [
        LimitConfig(
            name="store", key="{policy}:{tenant_id}", rate=Quota(limit=2, period_seconds=1)
        ),
        LimitConfig(name="app", key="app", rate=Quota(limit=40, period_seconds=1)),
    ]
    data["consumer"]["parallel_calls"] = 1
    data["action"].update(
        api_url=url,
        allow_plain_http=True,
        limit_header="X-RateLimit-Scope",
        limit_header_values={"store": "store", "app": "app"},
    )
    policy = Policy.model_validate(data)
    monkeypatch.setenv("SWEEPER_POLICY", policy.model_dump_json())
    runtime.reset()
    return replace(p, policy=policy)


def closed(p: Pipeline, key: str) -> bool:
    """Whether the test's 429s closed `key`'s gate (each test has its own limiter table). Not
    whether it is closed still: a bare 429's first closure lasts about a second, which a loaded
    machine can outlast between the call and this look."""
    limiter = DynamoLimiter(p.aws.dynamodb(), p.resources.limiter_table)
    return limiter.state(key).closed_until is not None


def test_a_429_naming_the_app_closes_the_app_limit_and_not_the_store(
    pipeline: Pipeline, refusing: Refusing, monkeypatch: pytest.MonkeyPatch
) -> None:
    p = two_limits(pipeline, monkeypatch, refusing.url)
    refusing.scope = "app"
    p.seed(1, tenants=1)
    invoke(p, publish_all(p))
    assert closed(p, "app:app")
    assert not closed(p, "exports:tenant-0")


def test_a_429_naming_the_store_closes_the_store_only(
    pipeline: Pipeline, refusing: Refusing, monkeypatch: pytest.MonkeyPatch
) -> None:
    p = two_limits(pipeline, monkeypatch, refusing.url)
    refusing.scope = "store"
    p.seed(1, tenants=1)
    invoke(p, publish_all(p))
    assert closed(p, "exports:tenant-0")
    assert not closed(p, "app:app")


def test_a_bare_429_closes_the_narrowest_limit_the_call_holds(
    pipeline: Pipeline, refusing: Refusing, monkeypatch: pytest.MonkeyPatch
) -> None:
    p = two_limits(pipeline, monkeypatch, refusing.url)
    p.seed(1, tenants=1)
    invoke(p, publish_all(p))
    assert closed(p, "exports:tenant-0")
    assert not closed(p, "app:app")


def test_bare_429s_from_two_stores_within_a_period_close_the_app_limit(
    pipeline: Pipeline, refusing: Refusing, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given two stores' calls in one batch, each refused with a bare 429 within a second
    p = two_limits(pipeline, monkeypatch, refusing.url)
    p.seed(2, tenants=2)
    invoke(p, publish_all(p))
    # Then each store is closed, and so is the app: two stores refused at once is the app
    assert closed(p, "exports:tenant-0")
    assert closed(p, "exports:tenant-1")
    assert closed(p, "app:app")


def test_a_closed_store_gets_no_paired_slot_while_the_app_item_keeps_its_gate(
    pipeline: Pipeline, refusing: Refusing, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given the store's slots kept on the app's item (two rate limits, the app's key constant)
    p = two_limits(pipeline, monkeypatch, refusing.url)
    refusing.scope = "store"
    # (for long enough that a loaded machine still finds it closed: a bare 429's first closure
    # is about a second, which a CI run once outlasted between the call and the look)
    refusing.retry_after = 60
    p.seed(1, tenants=1)
    # When a 429 naming the store closes it
    invoke(p, publish_all(p))
    # Then the app's item holds the store's closure too: a look at both gates finds the store
    # closed, and a paired reservation gives it no slot; another store still gets one
    limiter = DynamoLimiter(p.aws.dynamodb(), p.resources.limiter_table)
    store = "exports:tenant-0"
    assert limiter.paired_states("app:app", [store])[store].closed(time.time())
    step = 500_000
    mine, denial = limiter.reserve_paired(
        "app:app", 0.025, [Want("exports:tenant-0", step, 1)], 5.0, 0.2, 1
    )
    assert (mine, denial and denial.reason) == ({}, "throttled")
    other, denial = limiter.reserve_paired(
        "app:app", 0.025, [Want("exports:tenant-1", step, 1)], 5.0, 0.2, 1
    )
    assert denial is None
    assert list(other) == ["exports:tenant-1"]

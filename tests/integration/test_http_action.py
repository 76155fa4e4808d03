"""HttpAction against the vendor simulator: every outcome class, over real HTTP."""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import quote, unquote

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sweeper.actions import Action, url_template
from sweeper.actions.http import HttpAction
from sweeper.actions.http_action import USER_AGENT
from sweeper.actions.retry_after import parse_retry_after
from sweeper.actions.url_template import climbs
from sweeper.config import DEFAULT_URL_TEMPLATE, HttpActionConfig
from sweeper.models import ActionCall, ActionResult, OutcomeClass, operation_key
from sweeper_local.vendor import VendorSimulator
from tests.tls import trusted_server_context

pytestmark = pytest.mark.integration

DEADLINE_SECONDS = 5.0
SHORT_CODE = re.compile(r"^[a-z0-9_]{1,64}$")


def job_for(tenant_id: str = "t1", object_id: str = "o1", policy_version: int = 1) -> ActionCall:
    key = operation_key("exports", tenant_id, object_id, policy_version)
    return ActionCall(
        key=key,
        idempotency_key=key,
        policy="exports",
        policy_version=policy_version,
        tenant_id=tenant_id,
        object_id=object_id,
        scope="exports",
        attempt=0,
        batch_id="b1",
    )


def action_for(url: str, **config: float) -> HttpAction:
    return HttpAction(HttpActionConfig(api_url=url, allow_plain_http=True, **config))


def wait_until(condition: Callable[[], bool]) -> None:
    deadline = time.monotonic() + DEADLINE_SECONDS
    while not condition():
        assert time.monotonic() < deadline, "condition not met before the deadline"
        time.sleep(0.01)


@pytest.fixture
def vendor() -> Iterator[VendorSimulator]:
    with VendorSimulator() as sim:
        yield sim


@pytest.fixture
def action(vendor: VendorSimulator) -> Iterator[Action]:
    http_action = action_for(vendor.url)
    yield http_action
    http_action.close()


def test_a_deletion_is_accepted_with_the_operation_key_as_idempotency_key(
    vendor: VendorSimulator, action: Action
) -> None:
    # Given
    job = job_for()
    # When
    result = action.perform(job)
    # Then
    expected = ActionResult(outcome=OutcomeClass.ACCEPTED, status_code=204, code="http_204")
    assert result.model_dump() == expected.model_dump()  # what the idempotency record stores
    assert result.request_sent_at is not None  # and, not stored, when its request left
    audit = vendor.audit()
    assert audit.calls_by_key == {job.key: 1}
    assert audit.effects_by_key == {job.key: 1}


def test_a_retry_with_the_same_key_is_accepted_without_a_second_effect(
    vendor: VendorSimulator, action: Action
) -> None:
    # Given
    job = job_for()
    action.perform(job)
    # When
    result = action.perform(job)
    # Then
    assert result.outcome is OutcomeClass.ACCEPTED
    assert vendor.audit().effects_by_key == {job.key: 1}


def test_an_object_another_key_deleted_is_absent(vendor: VendorSimulator, action: Action) -> None:
    # Given: the same object deleted under another policy version's key
    action.perform(job_for(policy_version=1))
    # When
    result = action.perform(job_for(policy_version=2))
    # Then
    assert result.outcome is OutcomeClass.ABSENT
    assert (result.status_code, result.code) == (404, "http_404")
    assert "object_not_found" not in result.code  # the body's words never reach the result


def test_an_object_registered_absent_is_absent_with_its_ids_decoded() -> None:
    # Given: ids that need encoding to stay one path segment each
    tenant_id, object_id = "team/a b", "x:y?z%"
    with VendorSimulator(absent={(tenant_id, object_id)}) as sim:
        http_action = action_for(sim.url)
        # When
        result = http_action.perform(job_for(tenant_id, object_id))
        http_action.close()
    # Then
    assert result.outcome is OutcomeClass.ABSENT


def test_over_the_quota_is_throttled_with_retry_after_seconds() -> None:
    # Given: a quota whose one slot is taken
    with VendorSimulator(quota=(1, 60.0)) as sim:
        http_action = action_for(sim.url)
        http_action.perform(job_for(object_id="first"))
        # When
        result = http_action.perform(job_for(object_id="second"))
        http_action.close()
    # Then: throttled until the slot frees, in whole seconds (60 less the seconds between the
    # two calls, which a loaded machine can stretch past one)
    assert (result.outcome, result.status_code, result.code) == (
        OutcomeClass.THROTTLED,
        429,
        "http_429",
    )
    assert result.retry_after_seconds is not None
    assert 50.0 <= result.retry_after_seconds <= 60.0
    assert result.retry_after_seconds == int(result.retry_after_seconds)


def test_a_429_with_an_http_date_is_throttled_until_that_date(
    vendor: VendorSimulator, action: Action
) -> None:
    # Given
    until = datetime.now(UTC) + timedelta(seconds=30)
    vendor.fail_next(1, 429, retry_after=format_datetime(until, usegmt=True))
    # When
    result = action.perform(job_for())
    # Then
    assert result.outcome is OutcomeClass.THROTTLED
    assert result.retry_after_seconds is not None
    assert 25.0 <= result.retry_after_seconds <= 30.0


def test_a_503_naming_a_wait_is_throttled(vendor: VendorSimulator, action: Action) -> None:
    # Given
    vendor.fail_next(1, 503, retry_after="5")
    # When
    result = action.perform(job_for())
    # Then
    assert (result.outcome, result.retry_after_seconds) == (OutcomeClass.THROTTLED, 5.0)


def test_a_503_without_a_wait_is_transient() -> None:
    # Given
    with VendorSimulator(error_rate=1.0) as sim:
        http_action = action_for(sim.url)
        # When
        result = http_action.perform(job_for())
        http_action.close()
    # Then
    assert (result.outcome, result.status_code) == (OutcomeClass.TRANSIENT, 503)


@pytest.mark.parametrize(
    ("status", "outcome"),
    [
        (500, OutcomeClass.TRANSIENT),
        (502, OutcomeClass.TRANSIENT),
        (401, OutcomeClass.AUTH),
        (403, OutcomeClass.AUTH),
        (400, OutcomeClass.PERMANENT),
        (422, OutcomeClass.PERMANENT),
        (409, OutcomeClass.PERMANENT),
        (410, OutcomeClass.ABSENT),
        (200, OutcomeClass.ACCEPTED),
        (301, OutcomeClass.PERMANENT),
    ],
)
def test_a_status_is_classified_with_a_short_code(
    vendor: VendorSimulator, action: Action, status: int, outcome: OutcomeClass
) -> None:
    # Given
    vendor.fail_next(1, status)
    # When
    result = action.perform(job_for())
    # Then
    assert (result.outcome, result.status_code, result.code) == (outcome, status, f"http_{status}")
    assert "injected" not in result.code
    assert vendor.audit().effects_total == 0


def test_a_refused_connection_is_transient() -> None:
    # Given: a port nobody listens on any more
    with VendorSimulator() as sim:
        url = sim.url
    http_action = action_for(url)
    # When
    result = http_action.perform(job_for())
    # Then
    assert result == ActionResult(outcome=OutcomeClass.TRANSIENT, code="connect_error")


def test_a_read_timeout_is_unknown_and_the_effect_may_still_happen() -> None:
    # Given: a vendor slower than the call's budget
    with VendorSimulator(latency_seconds=0.5) as sim:
        http_action = action_for(sim.url)
        job = job_for()
        started = time.monotonic()
        # When
        result = http_action.perform(job, timeout_seconds=0.1)
        # Then
        assert time.monotonic() - started < 0.45
        assert result == ActionResult(outcome=OutcomeClass.UNKNOWN, code="read_timeout")
        wait_until(lambda: sim.audit().effects_by_key.get(job.key) == 1)
        # And a retry with the same key is accepted without a second effect
        retried = http_action.perform(job)
        assert retried.outcome is OutcomeClass.ACCEPTED
        assert sim.audit().effects_by_key == {job.key: 1}
        http_action.close()


def test_the_result_says_when_its_request_left_a_latency_before_the_answer() -> None:
    # Given a vendor that answers 0.6 s after a request arrives, called twice on one connection
    with VendorSimulator(latency_seconds=0.6) as sim:
        http_action = action_for(sim.url)
        sent, answered = [], []
        for object_id in ("o1", "o2"):
            before = time.monotonic()
            result = http_action.perform(job_for(object_id=object_id))
            answered.append(time.monotonic())
            assert result.outcome is OutcomeClass.ACCEPTED
            assert result.request_sent_at is not None
            sent.append(result.request_sent_at)
            # Then the request left after the call began and well before its answer (the bound
            # leaves half the latency for this thread to be descheduled on a loaded machine)
            assert before <= result.request_sent_at <= answered[-1] - 0.3
        http_action.close()
    # And the second call's time is its own request's, not the connection's first
    assert sent[1] > answered[0]


def test_the_configured_read_timeout_applies_without_a_budget() -> None:
    # Given
    with VendorSimulator(latency_seconds=0.5) as sim:
        http_action = action_for(sim.url, read_timeout_seconds=0.1)
        # When
        result = http_action.perform(job_for())
        http_action.close()
    # Then
    assert (result.outcome, result.code) == (OutcomeClass.UNKNOWN, "read_timeout")


def test_no_time_left_sends_nothing(vendor: VendorSimulator, action: Action) -> None:
    # When
    result = action.perform(job_for(), timeout_seconds=0.0)
    # Then
    assert (result.outcome, result.code) == (OutcomeClass.TRANSIENT, "no_time_left")
    assert vendor.audit().calls_total == 0


def test_codes_are_short_and_never_carry_the_body(vendor: VendorSimulator, action: Action) -> None:
    # Given: one call per kind of answer the vendor gives
    vendor.fail_next(1, 500)
    results = [action.perform(job_for(object_id=f"o{i}")) for i in range(2)]
    results.append(action.perform(job_for(object_id="o1", policy_version=2)))
    # Then
    assert [r.status_code for r in results] == [500, 204, 404]
    for result in results:
        assert SHORT_CODE.match(result.code)
        assert "error" not in result.code


class _HeaderCapture(BaseHTTPRequestHandler):
    """Answers 204 and keeps the headers of each request (the simulator records keys only)."""

    protocol_version = "HTTP/1.1"
    seen: list[dict[str, str]] = []  # noqa: RUF012  # reset per test by the fixture

    def do_DELETE(self) -> None:
        self.seen.append(dict(self.headers.items()))
        self.send_response(204)
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def capture() -> Iterator[tuple[str, list[dict[str, str]]]]:
    _HeaderCapture.seen = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _HeaderCapture)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    host, port = server.socket.getsockname()[:2]
    yield f"http://{host}:{port}", _HeaderCapture.seen
    server.shutdown()
    server.server_close()
    thread.join()


def test_the_bearer_token_and_user_agent_are_sent(
    capture: tuple[str, list[dict[str, str]]],
) -> None:
    # Given
    url, seen = capture
    http_action = HttpAction(HttpActionConfig(api_url=url, allow_plain_http=True), token="s3cret")
    job = job_for()
    # When
    result = http_action.perform(job)
    http_action.close()
    # Then
    assert result.outcome is OutcomeClass.ACCEPTED
    assert seen[0]["Authorization"] == "Bearer s3cret"
    assert seen[0]["User-Agent"] == USER_AGENT
    assert seen[0]["Idempotency-Key"] == job.key
    assert "s3cret" not in repr(http_action)


TRICKLE_BYTE_EVERY_SECONDS = 0.2
TRICKLE_BODY_BYTES = 100  # 20 s at one byte per 0.2 s: far past any deadline below


class _Trickle(BaseHTTPRequestHandler):
    """Answers 200 at once, then sends its body one byte every 0.2 s: every read succeeds."""

    protocol_version = "HTTP/1.1"

    def do_DELETE(self) -> None:
        self.send_response(200)
        self.send_header("Content-Length", str(TRICKLE_BODY_BYTES))
        self.end_headers()
        try:
            for _ in range(TRICKLE_BODY_BYTES):
                self.wfile.write(b"x")
                self.wfile.flush()
                time.sleep(TRICKLE_BYTE_EVERY_SECONDS)  # the vendor's pace, not a wait for it
        except OSError:
            pass  # the client hung up: what the deadline is for

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def trickle() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Trickle)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    host, port = server.socket.getsockname()[:2]
    yield f"http://{host}:{port}"
    server.shutdown()
    server.server_close()
    thread.join()


def test_a_trickled_body_ends_the_call_at_its_deadline(trickle: str) -> None:
    # Given a vendor that answers 200 and then trickles its body, each read within the timeout
    http_action = action_for(trickle, read_timeout_seconds=1.0)
    # When the call is given 1 s in all
    started = time.monotonic()
    result = http_action.perform(job_for(), timeout_seconds=1.0)
    took = time.monotonic() - started
    http_action.close()
    # Then it returns by its deadline, classified by the status it received (the body decides
    # nothing), instead of holding the thread for the 20 s of the body
    assert took < 1.0 + 0.5
    assert result.outcome is OutcomeClass.ACCEPTED
    assert result.status_code == 200


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (None, None),
        ("120", 120.0),
        (" 1.5 ", 1.5),
        ("soon", None),
        ("-3", None),
        ("Thu, 01 Jan 2026 00:00:30 GMT", 30.0),
        ("Wed, 31 Dec 2025 23:59:00 GMT", 0.0),  # in the past: no wait
    ],
)
def test_retry_after_is_read_as_seconds_or_a_date(
    value: str | None, expected: float | None
) -> None:
    now = datetime(2026, 1, 1, tzinfo=UTC)
    assert parse_retry_after(value, now=now) == expected


class _PathCapture(BaseHTTPRequestHandler):
    """Answers 204 and keeps each request's target exactly as it arrived on the request line."""

    protocol_version = "HTTP/1.1"
    seen: list[str] = []  # noqa: RUF012  # reset per test by the fixture

    def do_DELETE(self) -> None:
        self.seen.append(self.path)
        self.send_response(204)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def paths() -> Iterator[tuple[str, list[str]]]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _PathCapture)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    host, port = server.socket.getsockname()[:2]
    yield f"http://{host}:{port}", _PathCapture.seen
    server.shutdown()
    server.server_close()
    thread.join()


#: Any id at all, the door's rule bypassed: dots, slashes, percent signs, spaces, controls.
ANY_ID = st.one_of(
    st.sampled_from([".", "..", "...", "%2E%2E", "%2e.", "/", "../..", "a/../b", " ", "?x", "#"]),
    st.text(st.characters(codec="utf-8"), max_size=40),
)


@settings(
    max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(tenant_id=ANY_ID, object_id=ANY_ID, refuse_dot_segments=st.booleans())
def test_any_id_reaches_the_vendor_as_exactly_its_own_path_segment(
    paths: tuple[str, list[str]], tenant_id: str, object_id: str, refuse_dot_segments: bool
) -> None:
    # Given an action on the shipped template, and ids no door checked
    url, seen = paths
    config = HttpActionConfig(
        api_url=url, allow_plain_http=True, refuse_dot_segments=refuse_dot_segments
    )
    http_action = HttpAction(config)
    seen.clear()
    # When the call is made
    result = http_action.perform(job_for(tenant_id, object_id))
    http_action.close()
    # Then an id that climbs once decoded is refused when the policy says so, and sends nothing
    if refuse_dot_segments and (climbs(tenant_id) or climbs(object_id)):
        assert (result.outcome, result.code) == (OutcomeClass.PERMANENT, "dot_segment")
        assert seen == []
        return
    # Else the vendor's request line has the template's segments, each decoding to its id
    assert result.outcome is OutcomeClass.ACCEPTED
    (target,) = seen
    segments = target.split("/")
    assert len(segments) == len(DEFAULT_URL_TEMPLATE.removeprefix("{api_url}").split("/"))
    assert segments[:3] == ["", "v1", "tenants"]
    assert segments[4] == "objects"
    assert unquote(segments[3]) == tenant_id
    assert unquote(segments[5]) == object_id
    assert segments[3] not in (".", "..")
    assert segments[5] not in (".", "..")


def test_a_lone_surrogate_in_an_id_is_a_bad_url_and_nothing_is_sent(
    paths: tuple[str, list[str]],
) -> None:
    url, seen = paths
    seen.clear()
    http_action = HttpAction(HttpActionConfig(api_url=url, allow_plain_http=True))
    # (no operation key can be made of it either: the call is built by hand)
    call = job_for().model_copy(update={"object_id": "o\ud800"})
    result = http_action.perform(call)
    assert (result.outcome, result.code) == (OutcomeClass.PERMANENT, "bad_url")
    assert seen == []


def test_a_path_whose_shape_an_id_changed_is_never_sent(
    paths: tuple[str, list[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given the dot-segment encoding gone (an encoder regression), so ".." reaches urllib3
    url, seen = paths
    seen.clear()
    monkeypatch.setattr(url_template, "path_segment", lambda value: quote(value, safe=""))
    config = HttpActionConfig(api_url=url, allow_plain_http=True, refuse_dot_segments=False)
    http_action = HttpAction(config)
    # When an object id of ".." is called
    result = http_action.perform(job_for("t1", ".."))
    # Then the segment-count check refuses it: nothing reaches the vendor
    assert (result.outcome, result.code) == (OutcomeClass.PERMANENT, "bad_url")
    assert seen == []


class _SlowNoContent(BaseHTTPRequestHandler):
    """Answers every DELETE 204, 0.6 s after the request came."""

    protocol_version = "HTTP/1.1"

    def do_DELETE(self) -> None:
        time.sleep(0.6)
        self.send_response(204)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:
        return None


@pytest.fixture
def tls_vendor(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A vendor over TLS with a certificate made here for localhost, trusted through
    SSL_CERT_FILE (OpenSSL's default verify paths, which urllib3 loads): its https URL."""
    context = trusted_server_context(tmp_path, monkeypatch, ["localhost"])
    server = ThreadingHTTPServer(("127.0.0.1", 0), _SlowNoContent)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    yield f"https://localhost:{server.socket.getsockname()[1]}"
    server.shutdown()
    server.server_close()
    thread.join()


def test_a_request_over_tls_says_when_it_left_too(tls_vendor: str) -> None:
    # Given a vendor over TLS that answers 0.6 s after a request arrives
    http_action = HttpAction(HttpActionConfig(api_url=tls_vendor))
    before = time.monotonic()
    # When a call is made (certificate checked, as for any vendor)
    result = http_action.perform(job_for())
    answered = time.monotonic()
    http_action.close()
    # Then it was accepted, and its request left after the call began and well before its answer
    assert (result.outcome, result.status_code) == (OutcomeClass.ACCEPTED, 204)
    assert result.request_sent_at is not None
    assert before <= result.request_sent_at <= answered - 0.3

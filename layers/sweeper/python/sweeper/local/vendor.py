"""The vendor simulator: the external cleanup API over real HTTP, for tests and the local stack.

A hand-written test double (stdlib `http.server` in a background thread), not derived from any
vendor's code. It speaks the contract `sweeper.actions.http.HttpAction` targets:

* `DELETE /v1/tenants/{tenant_id}/objects/{object_id}` with an `Idempotency-Key` header; the path
  components arrive percent-encoded and are decoded;
* every object exists until deleted, except those registered as absent;
* the first DELETE with key K deletes the object (204); a repeat with K replays the stored status
  without a new effect (`Idempotent-Replayed: true`); another key for a gone object gets 404; a
  call without a key gets 400; a key reused for another object gets 422;
* an optional strict sliding-window quota, per tenant or global: every arriving call counts, even a
  rejected one; a call over it gets 429 with `Retry-After`;
* latency, forced responses (`fail_next`) and a random 503 rate;
* an audit (`audit()`, `GET /_audit`) and `POST /_reset`, neither of which counts as a call.

Run it as its own process: `python -m sweeper.local.vendor --port 8900 --rate 40/1s`.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import random
import signal
import socketserver
import sys
import threading
import time
from collections import Counter, deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, Final, Literal, Self, cast
from urllib.parse import unquote

from sweeper.config import Quota
from sweeper.errors import ConfigError

logger = logging.getLogger(__name__)

QuotaScope = Literal["global", "tenant"]
Target = tuple[str, str]  # (tenant_id, object_id), decoded

#: The bucket of a global quota, and of calls naming no tenant (a tenant id is never empty).
ONE_SCOPE: Final = ""
#: Window of `max_calls_in_window` when the simulator has no quota.
DEFAULT_WINDOW_SECONDS: Final = 1.0
#: An idle keep-alive connection is closed after this long, so handler threads do not pile up.
KEEP_ALIVE_SECONDS: Final = 30.0
#: Request bodies are read and thrown away; past this size the connection is closed instead.
MAX_BODY_BYTES: Final = 64 * 1024
#: How often the serving thread looks for stop(); small so that tests stop fast.
POLL_INTERVAL_SECONDS: Final = 0.05
#: Pending connections the listening socket holds (the stdlib default of 5 drops bursts).
LISTEN_BACKLOG: Final = 128
#: Statuses that carry no body.
_BODYLESS: Final = frozenset({204, 304})


def max_calls_in_window(arrivals: Sequence[float], window_seconds: float) -> int:
    """The most arrivals in any window `(t - window_seconds, t]`, for arrival times in order."""
    best = start = 0
    for end, at in enumerate(arrivals):
        while arrivals[start] <= at - window_seconds:
            start += 1
        best = max(best, end - start + 1)
    return best


@dataclass(frozen=True, slots=True)
class VendorAudit:
    """What the vendor saw, at one instant. Keys are operation keys; nothing else is recorded.

    `max_calls_in_window` is per quota scope (each tenant, or all calls for a global quota), over
    every call including rejected ones, in windows of `window_seconds` (the quota period).
    `arrivals` are `time.monotonic()` readings of every call, in order.
    """

    calls_total: int
    calls_by_key: dict[str, int]
    effects_by_key: dict[str, int]
    effects_total: int
    responses_by_status: dict[int, int]
    throttled_total: int
    max_calls_in_window: int
    window_seconds: float
    arrivals: tuple[float, ...]
    #: "tenant/object" -> every distinct idempotency key that object was called with
    keys_by_target: dict[str, tuple[str, ...]] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict (status codes become string keys)."""
        return {
            "calls_total": self.calls_total,
            "calls_by_key": self.calls_by_key,
            "effects_by_key": self.effects_by_key,
            "effects_total": self.effects_total,
            "responses_by_status": {str(k): v for k, v in self.responses_by_status.items()},
            "throttled_total": self.throttled_total,
            "max_calls_in_window": self.max_calls_in_window,
            "window_seconds": self.window_seconds,
            "arrivals": list(self.arrivals),
            "keys_by_target": {t: list(k) for t, k in self.keys_by_target.items()},
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> VendorAudit:
        """Read what `GET /_audit` returns (the inverse of `to_json`)."""
        return cls(
            calls_total=int(data["calls_total"]),
            calls_by_key={str(k): int(v) for k, v in data["calls_by_key"].items()},
            effects_by_key={str(k): int(v) for k, v in data["effects_by_key"].items()},
            effects_total=int(data["effects_total"]),
            responses_by_status={int(k): int(v) for k, v in data["responses_by_status"].items()},
            throttled_total=int(data["throttled_total"]),
            max_calls_in_window=int(data["max_calls_in_window"]),
            window_seconds=float(data["window_seconds"]),
            arrivals=tuple(float(t) for t in data["arrivals"]),
            keys_by_target={
                str(t): tuple(str(k) for k in keys)
                for t, keys in data.get("keys_by_target", {}).items()
            },
        )


@dataclass(frozen=True, slots=True)
class ForcedResponse:
    """One response `fail_next` queued: a status, optionally with a Retry-After value."""

    status: int
    retry_after: str | None = None


@dataclass(slots=True)
class Faults:
    """Injected failures. Each kind is a field; none of them has an effect.

    They apply to calls the quota admitted, before the request itself is looked at; a forced
    response wins over the random error rate.
    """

    error_rate: float = 0.0
    forced: deque[ForcedResponse] = field(default_factory=deque)


@dataclass(frozen=True, slots=True)
class _Reply:
    status: int
    error: str | None = None  # short machine code for the JSON body
    headers: tuple[tuple[str, str], ...] = ()
    body: bytes | None = None  # replaces the error body (the audit)

    def payload(self) -> bytes | None:
        if self.status in _BODYLESS:
            return None
        if self.body is not None:
            return self.body
        return json.dumps({"error": self.error or "error", "status": self.status}).encode()


@dataclass(frozen=True, slots=True)
class _Arrival:
    """A call as recorded when it arrived, before the simulated latency."""

    method: str
    target: Target | None
    key: str | None
    retry_after_seconds: int | None  # set when the quota rejected the call
    delay_seconds: float


@dataclass(frozen=True, slots=True)
class _Completed:
    """What a key's first complete answer was, to replay."""

    target: Target
    status: int
    error: str | None


def _parse_target(path: str) -> Target | None:
    """`/v1/tenants/{t}/objects/{o}` with percent-encoded parts -> decoded (t, o)."""
    parts = path.split("/")
    if len(parts) != 6 or parts[:3] != ["", "v1", "tenants"] or parts[4] != "objects":
        return None
    tenant_id, object_id = unquote(parts[3]), unquote(parts[5])
    if not tenant_id or not object_id:
        return None
    return tenant_id, object_id


class _VendorState:
    """Everything the simulator knows, behind one lock; the HTTP layer only carries calls in."""

    def __init__(
        self,
        *,
        quota: tuple[int, float] | None,
        quota_scope: QuotaScope,
        latency_seconds: float,
        latency_jitter_seconds: float,
        error_rate: float,
        absent: frozenset[Target],
        seed: int,
    ) -> None:
        self._quota = quota
        self._quota_scope = quota_scope
        self._latency_seconds = latency_seconds
        self._jitter_seconds = latency_jitter_seconds
        self._error_rate = error_rate
        self._absent = absent
        self._seed = seed
        self._lock = threading.Lock()
        self._clear()

    def _clear(self) -> None:
        self._rng = random.Random(self._seed)
        self._faults = Faults(error_rate=self._error_rate)
        self._deleted: set[Target] = set()
        self._completed: dict[str, _Completed] = {}
        self._windows: dict[str, deque[float]] = {}
        self._arrivals: list[float] = []
        self._arrivals_by_scope: dict[str, list[float]] = {}
        self._calls_by_key: Counter[str] = Counter()
        self._keys_by_target: dict[Target, dict[str, None]] = {}
        self._effects_by_key: Counter[str] = Counter()
        self._responses: Counter[int] = Counter()

    def reset(self) -> None:
        """Back to the state the simulator was built with."""
        with self._lock:
            self._clear()

    def fail_next(self, n: int, response: ForcedResponse) -> None:
        with self._lock:
            self._faults.forced.extend([response] * n)

    def arrive(self, method: str, path: str, key: str | None) -> _Arrival:
        """Record a call as it arrives and decide the quota now, before any latency."""
        target = _parse_target(path)
        scope = target[0] if target is not None and self._quota_scope == "tenant" else ONE_SCOPE
        with self._lock:
            now = time.monotonic()  # read under the lock so that arrivals stay in order
            self._arrivals.append(now)
            self._arrivals_by_scope.setdefault(scope, []).append(now)
            if key is not None:
                self._calls_by_key[key] += 1
                if target is not None:
                    self._keys_by_target.setdefault(target, {})[key] = None
            retry_after = self._admit(scope, now)
            delay = self._latency_seconds
            if self._jitter_seconds > 0:
                delay += self._rng.uniform(0.0, self._jitter_seconds)
        return _Arrival(method, target, key, retry_after, delay)

    def _admit(self, scope: str, now: float) -> int | None:
        """Count the call in its scope's window; the whole seconds to wait if it is over quota."""
        if self._quota is None:
            return None
        limit, period = self._quota
        window = self._windows.setdefault(scope, deque())
        while window and window[0] <= now - period:
            window.popleft()
        retry_after = None
        if len(window) >= limit:
            # Until the oldest call in the window leaves it; rejected calls count too.
            retry_after = max(1, math.ceil(window[0] + period - now))
        window.append(now)
        return retry_after

    def answer(self, arrival: _Arrival) -> _Reply:
        """Decide the response (and the effect, if any) once the latency has passed."""
        with self._lock:
            reply = self._decide(arrival)
            self._responses[reply.status] += 1
        return reply

    def _decide(self, call: _Arrival) -> _Reply:
        if call.retry_after_seconds is not None:
            return _Reply(429, "rate_limited", (("Retry-After", str(call.retry_after_seconds)),))
        if self._faults.forced:
            forced = self._faults.forced.popleft()
            headers = () if forced.retry_after is None else (("Retry-After", forced.retry_after),)
            return _Reply(forced.status, "injected_fault", headers)
        if self._faults.error_rate > 0 and self._rng.random() < self._faults.error_rate:
            return _Reply(503, "injected_unavailable")
        if call.target is None:
            return _Reply(404, "no_such_route")
        if call.method != "DELETE":
            return _Reply(405, "method_not_allowed", (("Allow", "DELETE"),))
        if not call.key:
            return _Reply(400, "idempotency_key_required")
        done = self._completed.get(call.key)
        if done is not None:
            if done.target != call.target:
                return _Reply(422, "idempotency_key_reused")
            return _Reply(done.status, done.error, (("Idempotent-Replayed", "true"),))
        if call.target in self._absent or call.target in self._deleted:
            reply = _Reply(404, "object_not_found")
        else:
            self._deleted.add(call.target)
            self._effects_by_key[call.key] += 1
            reply = _Reply(204)
        self._completed[call.key] = _Completed(call.target, reply.status, reply.error)
        return reply

    def audit(self) -> VendorAudit:
        with self._lock:
            window = self._quota[1] if self._quota is not None else DEFAULT_WINDOW_SECONDS
            peak = max(
                (max_calls_in_window(t, window) for t in self._arrivals_by_scope.values()),
                default=0,
            )
            return VendorAudit(
                calls_total=len(self._arrivals),
                calls_by_key=dict(self._calls_by_key),
                effects_by_key=dict(self._effects_by_key),
                effects_total=sum(self._effects_by_key.values()),
                responses_by_status=dict(sorted(self._responses.items())),
                throttled_total=self._responses[429],
                max_calls_in_window=peak,
                window_seconds=window,
                arrivals=tuple(self._arrivals),
                keys_by_target={
                    f"{tenant}/{obj}": tuple(keys)
                    for (tenant, obj), keys in self._keys_by_target.items()
                },
            )


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = LISTEN_BACKLOG

    def __init__(
        self, address: tuple[str, int], state: _VendorState, stopping: threading.Event
    ) -> None:
        self.state = state
        self.stopping = stopping
        super().__init__(address, _Handler)

    def server_bind(self) -> None:
        # HTTPServer.server_bind looks up the host's FQDN, which can stall where DNS is missing.
        socketserver.TCPServer.server_bind(self)
        host, port = self.socket.getsockname()[:2]
        self.server_name = str(host)
        self.server_port = int(port)

    def handle_error(self, request: Any, client_address: Any) -> None:
        if isinstance(sys.exception(), ConnectionError):
            # The client gave up (a read timeout): expected, and the effect may still have happened.
            logger.debug("vendor: client closed the connection before the answer")
            return
        logger.exception("vendor: handler failed")


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as a real API and urllib3's pool expect
    timeout = KEEP_ALIVE_SECONDS
    server_version = "sweeper-vendor-simulator"
    sys_version = ""

    def do_DELETE(self) -> None:
        self._dispatch()

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE

    def _dispatch(self) -> None:
        server = cast(_Server, self.server)
        self._discard_body()
        path = self.path.split("?", 1)[0]
        if path == "/_audit" and self.command == "GET":
            body = json.dumps(server.state.audit().to_json()).encode()
            reply = _Reply(200, body=body)
        elif path == "/_reset" and self.command == "POST":
            server.state.reset()
            reply = _Reply(204)
        else:
            arrival = server.state.arrive(self.command, path, self.headers.get("Idempotency-Key"))
            if arrival.delay_seconds > 0:
                server.stopping.wait(arrival.delay_seconds)  # stop() cuts it short
            reply = server.state.answer(arrival)
            tenant_id, object_id = arrival.target or ("-", "-")
            logger.debug(
                "vendor %s tenant=%s object=%s -> %d",
                self.command,
                tenant_id,
                object_id,
                reply.status,
            )
        self._send(reply)

    def _discard_body(self) -> None:
        try:
            length = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            length = -1
        if 0 <= length <= MAX_BODY_BYTES and "Transfer-Encoding" not in self.headers:
            self.rfile.read(length)
        else:
            # The next request's start cannot be found: answer, then close.
            self.close_connection = True

    def _send(self, reply: _Reply) -> None:
        self.send_response(reply.status)
        for name, value in reply.headers:
            self.send_header(name, value)
        payload = reply.payload()
        if payload is not None:
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        if payload:
            self.wfile.write(payload)

    def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
        """Calls are logged by `_dispatch` with ids and status only."""

    def log_message(self, format: str, *args: Any) -> None:
        logger.debug("vendor: " + format, *args)


class VendorSimulator:
    """The vendor API on a local port, in a background thread. See the module docstring."""

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        quota: tuple[int, float] | None = None,
        quota_scope: QuotaScope = "tenant",
        latency_seconds: float = 0.0,
        latency_jitter_seconds: float = 0.0,
        error_rate: float = 0.0,
        absent: frozenset[Target] | set[Target] = frozenset(),
        seed: int = 0,
    ) -> None:
        if quota is not None and (quota[0] < 1 or quota[1] <= 0):
            raise ValueError("quota must be (limit >= 1, period_seconds > 0)")
        if quota_scope not in ("global", "tenant"):
            raise ValueError("quota_scope must be 'global' or 'tenant'")
        if latency_seconds < 0 or latency_jitter_seconds < 0:
            raise ValueError("latencies must not be negative")
        if not 0.0 <= error_rate <= 1.0:
            raise ValueError("error_rate must be within [0, 1]")
        self._address = (host, port)
        self._state = _VendorState(
            quota=quota,
            quota_scope=quota_scope,
            latency_seconds=latency_seconds,
            latency_jitter_seconds=latency_jitter_seconds,
            error_rate=error_rate,
            absent=frozenset(absent),
            seed=seed,
        )
        self._stopping = threading.Event()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        self._url: str | None = None

    def start(self) -> Self:
        """Bind (port 0 picks a free port) and serve in a background thread."""
        if self._server is not None:
            raise RuntimeError("the vendor simulator is already running")
        self._stopping.clear()
        server = _Server(self._address, self._state, self._stopping)
        thread = threading.Thread(
            target=server.serve_forever,
            kwargs={"poll_interval": POLL_INTERVAL_SECONDS},
            name="vendor-simulator",
            daemon=True,
        )
        thread.start()
        self._server, self._thread = server, thread
        self._url = f"http://{server.server_name}:{server.server_port}"
        logger.info("vendor simulator listening on %s", self._url)
        return self

    def stop(self) -> None:
        """Stop serving and close the port; calls still sleeping in latency are answered at once."""
        server, thread = self._server, self._thread
        if server is None or thread is None:
            return
        self._stopping.set()
        server.shutdown()
        server.server_close()
        thread.join()
        self._server = self._thread = None

    @property
    def url(self) -> str:
        """`http://HOST:PORT` of the last start (kept after stop, for connection-refused tests)."""
        if self._url is None:
            raise RuntimeError("the vendor simulator has not been started")
        return self._url

    def audit(self) -> VendorAudit:
        """What the vendor has seen so far (thread-safe, at any time)."""
        return self._state.audit()

    def fail_next(self, n: int, status: int, *, retry_after: str | None = None) -> None:
        """Answer the next `n` admitted calls with `status`, without effect."""
        if n < 0:
            raise ValueError("n must not be negative")
        if not 200 <= status <= 599:
            raise ValueError("status must be a final HTTP status (200-599)")
        self._state.fail_next(n, ForcedResponse(status, retry_after))

    def reset(self) -> None:
        """Forget every call, effect and pending fault (what `POST /_reset` does)."""
        self._state.reset()

    def __enter__(self) -> Self:
        return self if self._server is not None else self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


def _quota_arg(text: str) -> Quota:
    try:
        return Quota.parse(text)
    except ConfigError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc


def main(argv: Sequence[str] | None = None) -> int:
    """Serve the simulator until SIGTERM or SIGINT; print its URL first."""
    parser = argparse.ArgumentParser(
        prog="python -m sweeper.local.vendor",
        description="Serve the vendor simulator until SIGTERM or SIGINT.",
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8900, help="0 picks a free port")
    parser.add_argument("--rate", type=_quota_arg, default=None, help="strict quota, e.g. 40/1s")
    parser.add_argument("--scope", choices=("tenant", "global"), default="tenant")
    parser.add_argument("--latency", type=float, default=0.0, help="seconds added to each call")
    parser.add_argument("--jitter", type=float, default=0.0, help="up to this many more seconds")
    parser.add_argument("--error-rate", type=float, default=0.0, help="share of calls given 503")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")

    # Blocked before the serving thread starts (it inherits the mask), then awaited: no handler
    # runs in the middle of anything.
    stop_signals = {signal.SIGTERM, signal.SIGINT}
    signal.pthread_sigmask(signal.SIG_BLOCK, stop_signals)
    quota: Quota | None = args.rate
    with VendorSimulator(
        args.host,
        args.port,
        quota=None if quota is None else (quota.limit, quota.period_seconds),
        quota_scope=args.scope,
        latency_seconds=args.latency,
        latency_jitter_seconds=args.jitter,
        error_rate=args.error_rate,
        seed=args.seed,
    ) as sim:
        sys.stdout.write(f"{sim.url}\n")
        sys.stdout.flush()
        received = signal.sigwait(stop_signals)
        logger.info("vendor simulator stopping on %s", signal.Signals(received).name)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

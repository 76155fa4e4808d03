"""HttpAction.warm against a real local TCP server: a connection opened before the slot, never a
byte of a request, and the call sent on that same connection."""

from __future__ import annotations

import contextlib
import inspect
import queue
import socket
import threading
import time
from collections.abc import Callable, Iterator

import pytest
from urllib3.connectionpool import HTTPConnectionPool

from sweeper.actions.http_action import POOL_MAX_CONNECTIONS
from sweeper.models import OutcomeClass
from tests.integration.test_http_action import DEADLINE_SECONDS, action_for, job_for, wait_until

pytestmark = pytest.mark.integration

#: The request line the job below is sent with (DELETE of the default URL template).
REQUEST_LINE = b"DELETE /v1/tenants/t1/objects/o1 HTTP/1.1\r\n"


class CountingServer:
    """A keep-alive HTTP/1.1 server on a raw socket: counts the connections it accepts and
    keeps every byte each one received, answering each request (no body) with a 204."""

    def __init__(self) -> None:
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.settimeout(0.05)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._conns: list[socket.socket] = []
        self._received: list[bytearray] = []
        self._threads: list[threading.Thread] = []
        self.url = f"http://127.0.0.1:{self._listener.getsockname()[1]}"

    def __enter__(self) -> CountingServer:
        self._spawn(self._accept)
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self.drop_all()
        for thread in self._threads:
            thread.join(timeout=DEADLINE_SECONDS)
        self._listener.close()

    @property
    def accepted(self) -> int:
        with self._lock:
            return len(self._conns)

    def received(self, index: int) -> bytes:
        with self._lock:
            return bytes(self._received[index])

    def drop_all(self) -> None:
        """Close every accepted connection, as a vendor closes idle keep-alive ones."""
        with self._lock:
            conns = list(self._conns)
        for conn in conns:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)

    def _spawn(self, target: Callable[..., None], *args: object) -> None:
        thread = threading.Thread(target=target, args=args, daemon=True)
        self._threads.append(thread)
        thread.start()

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._listener.accept()
            except TimeoutError:
                continue
            with self._lock:
                self._conns.append(conn)
                self._received.append(bytearray())
                index = len(self._conns) - 1
            self._spawn(self._serve, conn, index)

    def _serve(self, conn: socket.socket, index: int) -> None:
        pending = b""
        with conn:
            while True:
                try:
                    chunk = conn.recv(4096)
                except OSError:
                    return
                if not chunk:
                    return
                with self._lock:
                    self._received[index] += chunk
                pending += chunk
                while b"\r\n\r\n" in pending:  # a request without a body: answer it
                    _, pending = pending.split(b"\r\n\r\n", 1)
                    conn.sendall(b"HTTP/1.1 204 No Content\r\n\r\n")


@pytest.fixture
def server() -> Iterator[CountingServer]:
    with CountingServer() as running:
        yield running


def test_a_warm_connects_without_a_request_and_the_call_reuses_that_connection(
    server: CountingServer,
) -> None:
    # Given an action that has not called the vendor yet
    action = action_for(server.url)
    job = job_for()
    # When it is warmed
    action.warm(job)
    # Then the vendor has accepted a connection and received nothing on it
    wait_until(lambda: server.accepted == 1)
    assert server.received(0) == b""
    # And when the call follows, its request is sent on that connection, first of all bytes
    result = action.perform(job)
    assert result.outcome is OutcomeClass.ACCEPTED
    assert server.accepted == 1
    assert server.received(0).startswith(REQUEST_LINE)
    assert server.received(0).count(b"HTTP/1.1\r\n") == 1
    action.close()


def test_a_warm_pool_is_left_as_it_is(server: CountingServer) -> None:
    # Given an action whose last call left its connection idle in the pool
    action = action_for(server.url)
    assert action.perform(job_for(object_id="o1")).outcome is OutcomeClass.ACCEPTED
    # When it is warmed for the next job
    action.warm(job_for(object_id="o2"))
    # Then no connection was opened, and the next call goes on the same one
    assert action.perform(job_for(object_id="o2")).outcome is OutcomeClass.ACCEPTED
    assert server.accepted == 1
    assert server.received(0).count(b"HTTP/1.1\r\n") == 2
    action.close()


def test_a_connection_the_vendor_dropped_is_replaced_by_the_warm(server: CountingServer) -> None:
    # Given an idle connection the vendor has since closed (its keep-alive ran out)
    action = action_for(server.url)
    assert action.perform(job_for(object_id="o1")).outcome is OutcomeClass.ACCEPTED
    server.drop_all()
    # When the action is warmed
    action.warm(job_for(object_id="o2"))
    # Then a new connection is open before the call, and the call is sent on it
    wait_until(lambda: server.accepted == 2)
    assert server.received(1) == b""
    assert action.perform(job_for(object_id="o2")).outcome is OutcomeClass.ACCEPTED
    assert server.accepted == 2
    assert server.received(1).startswith(REQUEST_LINE.replace(b"o1", b"o2"))
    action.close()


def test_a_warm_opens_nothing_when_every_pooled_connection_is_out(
    server: CountingServer,
) -> None:
    # Given a pool whose every connection is out on a call (maxsize of them)
    action = action_for(server.url)
    pool = action.pool_manager().connection_from_url(server.url)
    out = [pool._get_conn() for _ in range(POOL_MAX_CONNECTIONS)]
    assert pool.num_connections == POOL_MAX_CONNECTIONS
    # When the action is warmed
    action.warm(job_for())
    # Then no connection beyond the pool's maxsize was made
    assert pool.num_connections == POOL_MAX_CONNECTIONS
    assert server.accepted == 0
    for conn in out:
        pool._put_conn(conn)
    action.close()


def test_a_warm_against_a_port_nobody_listens_on_returns_quietly() -> None:
    # Given a port nothing listens on any more
    with CountingServer() as gone:
        url = gone.url
    action = action_for(url, connect_timeout_seconds=0.5)
    job = job_for()
    # When the action is warmed
    started = time.monotonic()
    action.warm(job)
    # Then it returned without raising, within the connect timeout
    assert time.monotonic() - started < 0.5
    # And the call meets the refusal itself, classified as ever
    result = action.perform(job)
    assert (result.outcome, result.code) == (OutcomeClass.TRANSIENT, "connect_error")


def test_a_warm_that_cannot_connect_gives_up_at_the_connect_timeout() -> None:
    # Given a listener whose accept queue is full: the kernel drops further SYNs, so a new
    # connection neither succeeds nor is refused
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(0)
    address = listener.getsockname()
    fillers: list[socket.socket] = []
    try:
        for _ in range(8):
            filler = socket.socket()
            filler.setblocking(False)
            filler.connect_ex(address)
            fillers.append(filler)
        action = action_for(f"http://127.0.0.1:{address[1]}", connect_timeout_seconds=1.0)
        # When the action is warmed with less time than its connect timeout
        started = time.monotonic()
        action.warm(job_for(), timeout_seconds=0.2)
        elapsed = time.monotonic() - started
    finally:
        for filler in fillers:
            filler.close()
        listener.close()
    # Then it gave up quietly after the time it was given
    assert 0.15 <= elapsed < 0.8


def test_urllib3_pools_as_the_warm_assumes() -> None:
    """HttpAction.warm uses the pool's private `_get_conn`/`_put_conn` and `pool` (no public
    pre-connect): this fails first if urllib3 changes them."""
    pool = HTTPConnectionPool("127.0.0.1", 9, maxsize=2)
    # idle connections are a LIFO queue, topped up with placeholders to maxsize
    assert isinstance(pool.pool, queue.LifoQueue)
    assert pool.pool.qsize() == 2
    assert list(inspect.signature(pool._get_conn).parameters) == ["timeout"]
    assert list(inspect.signature(pool._put_conn).parameters) == ["conn"]
    # a placeholder becomes a new, unconnected connection; the one put back is the next taken
    conn = pool._get_conn()
    assert conn.is_closed
    pool._put_conn(conn)
    assert pool._get_conn() is conn
    pool._put_conn(conn)
    pool.close()

"""The `http` kind's transport beside urllib3: connections that note when a request left, a
connection opened ahead of its request, and a response body dropped against a deadline."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from http.client import HTTPException
from types import MappingProxyType
from typing import Any, Final

import urllib3
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool
from urllib3.exceptions import HTTPError

#: At most this much of a response body is read (and dropped) at a time.
BODY_CHUNK_BYTES: Final = 16 * 1024


def drop_body(response: urllib3.BaseHTTPResponse, deadline: float, read_timeout: float) -> bool:
    """Read and drop `response`'s body until `deadline` (monotonic); True if read to its end.

    One socket read at a time, each given at most the time left: a vendor trickling its body
    cannot keep the call past the deadline.
    """
    return read_chunks(response, deadline, read_timeout, lambda chunk: True)


def read_chunks(
    response: urllib3.BaseHTTPResponse,
    deadline: float,
    read_timeout: float,
    take: Callable[[bytes], bool],
) -> bool:
    """Hand `response`'s body to `take` a chunk at a time (undecoded) until its end, `deadline`
    (monotonic) or `take` answering False; True only when the body was read to its end."""
    try:
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            sock = getattr(response.connection, "sock", None)
            if sock is not None:
                sock.settimeout(min(left, read_timeout))
            chunk = response.read1(BODY_CHUNK_BYTES, decode_content=False)
            if not chunk:
                return True
            if not take(chunk):
                return False
    except (HTTPError, HTTPException, OSError):
        return False


class _NotesSend(HTTPConnection):
    """urllib3's connection, noting when each request had left: after its last byte went to
    the socket (`request_sent_at`, on `time.monotonic()`). The consumer compares that with the
    call's rate slot (consumer/delivery.py: a request that left later than the slot allows has
    the next slot of its scope spent without a call). Hand-written because urllib3 has no hook
    for that moment: `urlopen` returns once the answer's headers are in, a latency later."""

    request_sent_at: float | None = None

    def request(  # type: ignore[override]  # as urllib3's own: not http.client's signature
        self,
        method: str,
        url: str,
        body: Any = None,
        headers: Mapping[str, str] | None = None,
        **kwargs: Any,
    ) -> None:
        self.request_sent_at = None
        super().request(method, url, body=body, headers=headers, **kwargs)
        self.request_sent_at = time.monotonic()


class _NotesSendHTTPS(_NotesSend, HTTPSConnection):
    """`_NotesSend` over TLS."""


class _NotesSendPool(HTTPConnectionPool):
    ConnectionCls = _NotesSend


class _NotesSendHTTPSPool(HTTPSConnectionPool):
    ConnectionCls = _NotesSendHTTPS


def request_sent_at(response: urllib3.BaseHTTPResponse) -> float | None:
    """When the request of `response` had left (`_NotesSend`), or None when its connection
    does not note it (a pool not made by `HttpAction.pool_manager`)."""
    conn = response.connection
    return conn.request_sent_at if isinstance(conn, _NotesSend) else None


def preconnect(pool: HTTPConnectionPool, connect_timeout_seconds: float) -> bool:
    """Leave an idle, connected connection on top of `pool`; True when one had to be opened.

    urllib3 has no public way to open a connection ahead of a request, so this uses the pool's
    own two steps that `urlopen` takes (tests/integration/test_http_warm.py fails if urllib3
    changes them): `pool.pool` is a LIFO queue of idle connections, topped up to the pool's
    maxsize with None placeholders; `_get_conn` pops the top one, closing it if the peer dropped
    it (`is_connection_dropped`) and making a new, unconnected one for a placeholder;
    `_put_conn` pushes it back, where the next `urlopen` takes it first. A connection so opened
    is the one urllib3 itself would have opened (`connect()`, as the HTTPS pool's
    `_validate_conn` does it), only earlier; `urlopen` reuses it because its socket is open and
    unread. Nothing is written to it.
    """
    idle = pool.pool
    if idle is None or idle.empty():
        # Closed, or every connection is out on a call: one more could not be kept (maxsize).
        return False
    try:
        conn = pool._get_conn()  # see above: no public pre-connect
    except HTTPError:  # the pool was closed meanwhile
        return False
    opened = False
    try:
        if conn.is_closed:  # a placeholder's new connection, or an idle one the peer dropped
            conn.timeout = connect_timeout_seconds
            conn.connect()
            opened = True
    except (HTTPError, HTTPException, OSError, ValueError):
        # Refused, timed out, no such name, a bad certificate: the call will meet it itself.
        conn.close()
    finally:
        pool._put_conn(conn)  # back on top, connected or closed as it came
    return opened


#: The pool classes, by scheme, of a PoolManager whose connections note when a request left.
NOTES_SEND_POOLS: Final = MappingProxyType({"http": _NotesSendPool, "https": _NotesSendHTTPSPool})

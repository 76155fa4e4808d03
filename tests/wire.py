"""Raw HTTP on a socket, for the tests of the local servers (the AWS stand-in, the vendor
simulator) that look at what crosses the wire: requests botocore or urllib3 would not send,
and how many writes an answer takes."""

from __future__ import annotations

import socket
from typing import Any

import pytest


def exchange(port: int, raw: bytes) -> bytes:
    """Send `raw` on one connection and read until the server closes it."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as conn:
        conn.sendall(raw)
        answer = b""
        while chunk := conn.recv(65536):
            answer += chunk
    return answer


def count_writes(handler: Any, monkeypatch: pytest.MonkeyPatch) -> list[bytes]:
    """Every write a connection of `handler` (a socketserver request handler class) makes
    from now on, in order, as the list returned (filled as the server answers)."""
    writes: list[bytes] = []
    real_setup = handler.setup

    def setup(self: Any) -> None:
        real_setup(self)
        write = self.wfile.write

        def counting(data: Any) -> int:
            writes.append(bytes(data))
            result: int = write(data)
            return result

        monkeypatch.setattr(self.wfile, "write", counting)

    monkeypatch.setattr(handler, "setup", setup)
    return writes

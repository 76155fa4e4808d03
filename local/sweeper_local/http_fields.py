"""Request header fields read without the `email` package, for the local stack's HTTP servers.

http.server hands every request's header block to `email.parser` (through
http.client.parse_headers), and each field set in or read from the `HTTPMessage` it builds
walks every field with `email`'s policy: together a large share of a stand-in's CPU per
request (docs/decisions.md, 2026-12-03). What botocore and urllib3 send is plain HTTP/1.1: one
`Name: value` per line, no folded lines, no body other than by Content-Length. `FieldsHandler`
keeps those lines in a plain dict by lower-cased name (`fields`), the first value of a repeated
name, as `HTTPMessage.get` reads it. A request line that is not `METHOD PATH HTTP/1.x` goes to
the standard parser, whole, and its fields are copied from there; a folded or nameless header
line is refused with 400, never guessed at; the line and count limits are http.client's.
`write_answer` sends an answer (status line, header fields, body) in one write.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler

#: http.client's own limits on a request's header lines and their length.
MAX_HEADER_LINES = 100
MAX_HEADER_LINE_BYTES = 65_536
_FAST_VERSIONS = (b"HTTP/1.1", b"HTTP/1.0")


@functools.cache
def _phrase(status: int) -> str:
    try:
        return HTTPStatus(status).phrase
    except ValueError:  # a status http knows no phrase for: the line carries none
        return ""


class FieldsHandler(BaseHTTPRequestHandler):
    """A request handler whose header fields are `fields`, not `headers` (see the module)."""

    raw_requestline: bytes  # set by BaseHTTPRequestHandler.handle_one_request
    #: The request's header fields by lower-cased name (a repeated name: its first value).
    fields: dict[str, str]

    def parse_request(self) -> bool:
        """The request line and header fields (the module's docstring says how)."""
        words = self.raw_requestline.split()
        if len(words) != 3 or words[2] not in _FAST_VERSIONS:
            if not super().parse_request():
                return False
            self.fields = {}
            for name, value in self.headers.items():
                self.fields.setdefault(name.lower(), value)
            return True
        self.requestline = self.raw_requestline.rstrip(b"\r\n").decode("iso-8859-1")
        self.command = words[0].decode("iso-8859-1")
        self.path = words[1].decode("iso-8859-1")
        self.request_version = words[2].decode("ascii")
        self.close_connection = self.request_version != "HTTP/1.1"
        fields: dict[str, str] = {}
        readline = self.rfile.readline
        for _ in range(MAX_HEADER_LINES + 1):
            line = readline(MAX_HEADER_LINE_BYTES + 1)
            if len(line) > MAX_HEADER_LINE_BYTES:
                self.send_error(HTTPStatus.REQUEST_HEADER_FIELDS_TOO_LARGE, "Line too long")
                return False
            if line in (b"\r\n", b"\n", b""):
                break
            name, colon, value = line.decode("iso-8859-1").partition(":")
            if not colon or not name or name != name.strip():
                self.send_error(HTTPStatus.BAD_REQUEST, "Bad header line")
                return False
            fields.setdefault(name.lower(), value.strip())
        else:
            self.send_error(HTTPStatus.REQUEST_HEADER_FIELDS_TOO_LARGE, "Too many headers")
            return False
        self.fields = fields
        connection = fields.get("connection", "").lower()
        if connection == "close":
            self.close_connection = True
        elif connection == "keep-alive":
            self.close_connection = False
        expect = fields.get("expect", "").lower()
        if expect == "100-continue" and self.request_version == "HTTP/1.1":
            return self.handle_expect_100()
        return True

    def write_answer(self, status: int, fields: Iterable[tuple[str, str]], body: bytes) -> None:
        """The whole answer in one write: status line, Server and Date, `fields`, the body
        (http.server's `send_response`/`send_header` encode and buffer each line on its own,
        and the body would leave in a second write)."""
        lines = [
            f"{self.protocol_version} {status} {_phrase(status)}",
            f"Server: {self.version_string()}",
            f"Date: {self.date_time_string()}",
            *(f"{name}: {value}" for name, value in fields),
        ]
        head = ("\r\n".join(lines) + "\r\n\r\n").encode("iso-8859-1")
        self.wfile.write(head + body)

"""Who may talk to the console's local server, as Jupyter guards its own.

- A random token in the URL it prints; the first visit trades it for a cookie (HttpOnly,
  SameSite=Strict), compared in constant time (`hmac.compare_digest`).
- The Host header names this server (127.0.0.1:port or localhost:port) and nothing else, so a
  name rebound to 127.0.0.1 by another site's DNS reaches nothing.
- A change is a POST carrying the token in a header and an Origin that is this server's own;
  the server sends no CORS headers, so no other page can read an answer or send that header.
"""

from __future__ import annotations

import hmac
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from http import HTTPStatus
from http.cookies import CookieError, SimpleCookie

#: The header a state-changing request carries the token in.
TOKEN_HEADER = "X-Sweeper-Token"  # noqa: S105 - a header name, not a secret
#: The hosts the server answers to (with its port).
LOOPBACK_NAMES = ("127.0.0.1", "localhost")


def new_token() -> str:
    """A fresh random token (256 bits)."""
    return secrets.token_urlsafe(32)


Headers = Mapping[str, str]


def _lower(headers: Headers) -> dict[str, str]:
    """Header names compare without case (HTTP); a repeated header keeps its last value."""
    return {name.lower(): value for name, value in headers.items()}


@dataclass(frozen=True, slots=True)
class Refusal:
    status: HTTPStatus
    reason: str


@dataclass(frozen=True, slots=True)
class Guard:
    token: str
    port: int

    @property
    def cookie_name(self) -> str:
        # Cookies ignore ports: one name per server, so two consoles do not clash.
        return f"sweeper_console_{self.port}"

    def allowed_hosts(self) -> tuple[str, ...]:
        return tuple(f"{name}:{self.port}" for name in LOOPBACK_NAMES)

    def matches(self, offered: str | None) -> bool:
        return offered is not None and hmac.compare_digest(
            offered.encode("utf-8"), self.token.encode("utf-8")
        )

    def host_refusal(self, headers: Headers) -> Refusal | None:
        host = (_lower(headers).get("host") or "").strip().lower()
        if host not in self.allowed_hosts():
            return Refusal(HTTPStatus.FORBIDDEN, "unexpected Host header")
        return None

    def cookie_token(self, headers: Headers) -> str | None:
        raw = _lower(headers).get("cookie")
        if not raw:
            return None
        try:
            jar = SimpleCookie(raw)
        except CookieError:
            return None
        morsel = jar.get(self.cookie_name)
        return None if morsel is None else morsel.value

    def read_refusal(self, headers: Headers, url_token: str | None) -> Refusal | None:
        """A page or file: the Host, then the token (from the URL or the cookie)."""
        refused = self.host_refusal(headers)
        if refused is not None:
            return refused
        if self.matches(url_token) or self.matches(self.cookie_token(headers)):
            return None
        return Refusal(
            HTTPStatus.FORBIDDEN, "no valid token: open the URL `sweeper console` printed"
        )

    def change_refusal(self, headers: Headers) -> Refusal | None:
        """A POST: the Host, the token in its header, an Origin that is this server's, JSON."""
        refused = self.host_refusal(headers)
        if refused is not None:
            return refused
        headers = _lower(headers)
        if not self.matches(headers.get(TOKEN_HEADER.lower())):
            return Refusal(HTTPStatus.FORBIDDEN, f"no valid token in {TOKEN_HEADER}")
        origin = (headers.get("origin") or "").strip().lower()
        host = (headers.get("host") or "").strip().lower()
        if origin != f"http://{host}":
            return Refusal(HTTPStatus.FORBIDDEN, "cross-origin request refused")
        if (headers.get("sec-fetch-site") or "same-origin") != "same-origin":
            return Refusal(HTTPStatus.FORBIDDEN, "cross-site request refused")
        content_type = (headers.get("content-type") or "").split(";")[0].strip().lower()
        if content_type != "application/json":
            return Refusal(HTTPStatus.UNSUPPORTED_MEDIA_TYPE, "send application/json")
        return None

    def set_cookie(self) -> str:
        return f"{self.cookie_name}={self.token}; HttpOnly; SameSite=Strict; Path=/"

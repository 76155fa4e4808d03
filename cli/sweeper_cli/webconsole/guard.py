"""Who may talk to the console's local server, as Jupyter guards its own, with its three
secrets apart (each `secrets.token_urlsafe`, 256 bits, compared in constant time):

- the session: the cookie's value (HttpOnly, SameSite=Strict), which every request carries;
- the header token (CSRF): what the page's own script sends with a change, read from the page,
  which only a holder of the session is served;
- the login code: the one secret that leaves the server, in the URL `sweeper console` prints
  (and, with `--open`, in a file only the operator can read, never on a command line). It is
  traded once, within LOGIN_CODE_SECONDS, for the cookie; the URL is worthless after.

The Host header must name this server (127.0.0.1:port or localhost:port) and nothing else, so a
name rebound to 127.0.0.1 by another site's DNS reaches nothing. A change is a POST carrying the
session cookie, the header token and an Origin that is this server's own; the server sends no
CORS headers, so no other page can read an answer or send that header.
"""

from __future__ import annotations

import hmac
import secrets
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from http import HTTPStatus
from http.cookies import CookieError, SimpleCookie

#: The header a state-changing request carries the token in.
TOKEN_HEADER = "X-Sweeper-Token"  # noqa: S105 - a header name, not a secret
#: The hosts the server answers to (with its port).
LOOPBACK_NAMES = ("127.0.0.1", "localhost")
#: How long the printed URL's login code may be traded for the cookie, once.
LOGIN_CODE_SECONDS = 600.0


def new_token() -> str:
    """A fresh random token (256 bits)."""
    return secrets.token_urlsafe(32)


Headers = Mapping[str, str]


def _same(offered: str | None, secret: str) -> bool:
    return offered is not None and hmac.compare_digest(
        offered.encode("utf-8"), secret.encode("utf-8")
    )


class LoginCode:
    """The printed URL's code: traded for the session cookie once, before it expires."""

    def __init__(
        self, code: str, *, expires_at: float, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.code = code
        self._expires_at = expires_at
        self._clock = clock
        self._used = False
        self._lock = threading.Lock()

    @classmethod
    def fresh(cls, clock: Callable[[], float] = time.monotonic) -> LoginCode:
        return cls(new_token(), expires_at=clock() + LOGIN_CODE_SECONDS, clock=clock)

    def redeem(self, offered: str | None) -> bool:
        """True once: for the right code, before it expires; never again after."""
        with self._lock:
            if self._used or self._clock() >= self._expires_at or not _same(offered, self.code):
                return False
            self._used = True
            return True


def _lower(headers: Headers) -> dict[str, str]:
    """Header names compare without case (HTTP); a repeated header keeps its last value."""
    return {name.lower(): value for name, value in headers.items()}


@dataclass(frozen=True, slots=True)
class Refusal:
    status: HTTPStatus
    reason: str


@dataclass(frozen=True, slots=True)
class Guard:
    #: The cookie's value: who may read and act.
    session: str
    #: The header a change carries (the page's meta tag): that the page itself sent it.
    csrf: str
    port: int
    login: LoginCode

    @classmethod
    def fresh(cls, port: int) -> Guard:
        """Three new random secrets for a server on `port`."""
        return cls(new_token(), new_token(), port, LoginCode.fresh())

    @property
    def cookie_name(self) -> str:
        # Cookies ignore ports: one name per server, so two consoles do not clash.
        return f"sweeper_console_{self.port}"

    def allowed_hosts(self) -> tuple[str, ...]:
        return tuple(f"{name}:{self.port}" for name in LOOPBACK_NAMES)

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

    def signed_in(self, headers: Headers) -> bool:
        return _same(self.cookie_token(headers), self.session)

    def read_refusal(self, headers: Headers) -> Refusal | None:
        """A page or file: the Host, then the session cookie."""
        refused = self.host_refusal(headers)
        if refused is not None:
            return refused
        if self.signed_in(headers):
            return None
        return Refusal(
            HTTPStatus.FORBIDDEN, "no valid session: open the URL `sweeper console` printed"
        )

    def change_refusal(self, headers: Headers) -> Refusal | None:
        """A POST: the Host, the header token, the session cookie, an Origin that is this
        server's, JSON."""
        refused = self.host_refusal(headers)
        if refused is not None:
            return refused
        if not self.signed_in(headers):
            return Refusal(HTTPStatus.FORBIDDEN, "no session cookie")
        headers = _lower(headers)
        if not _same(headers.get(TOKEN_HEADER.lower()), self.csrf):
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
        return f"{self.cookie_name}={self.session}; HttpOnly; SameSite=Strict; Path=/"

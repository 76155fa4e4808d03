"""A rehearsal's transport: every call of the `http` kind sent to one URL, whatever its host.

The local stack (`sweeper demo`, `local up`, the drills) rehearses a policy as it is written:
its `api_url` and templates untouched, so a per-tenant host (`https://{tenant_id}.suffix`) is
filled and checked as in production. Only where the request goes changes: after the URL is
filled and its authority checked, the connection pool replaces its scheme, host and port with
the rehearsal's (the simulator, or `--api-url`), and names the host the policy would have
called in `X-Sweeper-Original-Host`. Every request of the action's pool goes this way: the
vendor call, a warmed connection, an OAuth2 token request to an endpoint of its own. Nothing
resolves or connects to the policy's own hosts.

Only the local stack sets a rehearsal (`SWEEPER_REHEARSAL_URL`, which `sweeper.config.settings`
refuses outside it); a policy file cannot name one (its action models forbid unknown keys).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final, Self

import urllib3
from urllib3.exceptions import LocationValueError
from urllib3.util import parse_url

from sweeper.actions.url_template import DEFAULT_PORTS, parse_api_url

#: The header that carries the host (and port, when not the scheme's default) the call was for.
ORIGINAL_HOST_HEADER: Final = "X-Sweeper-Original-Host"


@dataclass(frozen=True, slots=True)
class Rehearsal:
    """Where a rehearsal sends every call: an origin, `http(s)://host[:port]`."""

    scheme: str
    host: str
    port: int

    @classmethod
    def parse(cls, url: str) -> Self:
        """`url` as a rehearsal's origin, read as an api_url is (`parse_api_url`); ValueError
        when it has a path, query or user info, a field, a bad port, or is not http(s) (each
        call keeps its own path: only scheme, host and port change)."""
        problem = (
            f"{url!r} is not an origin http(s)://host[:port] (port 1 to 65535): a rehearsal "
            "keeps each call's path and changes only where it goes"
        )
        try:
            api = parse_api_url(url)
        except ValueError as exc:
            raise ValueError(problem) from exc
        if api.path or api.per_tenant:
            raise ValueError(problem)
        where = api.authority_for("")
        return cls(where.scheme, where.host, where.port)

    def redirect(self, url: str) -> tuple[str, str]:
        """(the URL to send, the host it was for): `url` with the rehearsal's scheme, host and
        port. LocationValueError when `url` cannot be parsed (the action classifies it)."""
        parsed = parse_url(url)
        if not parsed.host:
            raise LocationValueError("no host in the request URL")  # never the URL: it holds ids
        original = parsed.host.lower()
        if parsed.port is not None and parsed.port != DEFAULT_PORTS.get(parsed.scheme or "", 0):
            original = f"{original}:{parsed.port}"
        sent = parsed._replace(scheme=self.scheme, auth=None, host=self.host, port=self.port)
        return sent.url, original


class RehearsalPoolManager(urllib3.PoolManager):
    """A PoolManager that sends every request to its rehearsal (`Rehearsal.redirect`), with
    the original host in `ORIGINAL_HOST_HEADER`."""

    def __init__(self, rehearsal: Rehearsal, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.rehearsal = rehearsal

    def urlopen(  # type: ignore[override]  # as PoolManager's own override of RequestMethods
        self, method: str, url: str, redirect: bool = True, **kw: Any
    ) -> urllib3.BaseHTTPResponse:
        sent, original = self.rehearsal.redirect(url)
        given = kw.get("headers")
        headers = urllib3.HTTPHeaderDict(given if given is not None else self.headers)
        headers[ORIGINAL_HOST_HEADER] = original
        kw["headers"] = headers
        return super().urlopen(method, sent, redirect=redirect, **kw)

    def connection_from_url(
        self, url: str, pool_kwargs: dict[str, Any] | None = None
    ) -> urllib3.HTTPConnectionPool:
        return super().connection_from_url(self.rehearsal.redirect(url)[0], pool_kwargs)


def pool_manager(rehearsal: Rehearsal | None, **kwargs: Any) -> urllib3.PoolManager:
    """urllib3's PoolManager, or in a rehearsal one that sends every request to it."""
    if rehearsal is None:
        return urllib3.PoolManager(**kwargs)
    return RehearsalPoolManager(rehearsal, **kwargs)

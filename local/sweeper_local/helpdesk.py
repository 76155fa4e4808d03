"""The help desk of docs/examples/helpdesk.toml, served by the vendor simulator beside its
other contracts: an account per customer, each at its own host, each with its own login.

* `DELETE /api/v2/tickets/{ticket}.json` at host `{account}.helpdesk.example` (the Host
  header names the account, as a real host per tenant does; a rehearsal that sent the call to
  loopback names it in `X-Sweeper-Original-Host`) with HTTP Basic: 204 and one effect the first
  time, 404 once the ticket is gone; another method 405;
* the login must be the host's account's (`add_account`): a missing or unknown login is 401,
  and a login of another account is 401 too and recorded as `misdirected` (a credential that
  reached a host not its own: the one thing a secret per tenant must never do). A login the
  local stack made up for every tenant at once (`add_shared_login`) is taken at every host;
* `rate` per account, a sliding window counting every authenticated call (700 a minute as
  published): a call over it is 429 with `Retry-After` (whole seconds until the window admits
  one); `throttle_next(account, retry_after_seconds=None)` answers that account's next calls
  429, with a Retry-After or without one (the client's own backoff then);
* `audit()`: calls and effects per ticket, each account's host's logins by owner, 429s per
  account (injected and the window's), answers by status.
"""

from __future__ import annotations

import base64
import binascii
import threading
import time
from collections import Counter, defaultdict, deque
from dataclasses import dataclass
from typing import Final
from urllib.parse import unquote

from sweeper_local.marketplace import MarketplaceAnswer as HelpDeskAnswer

#: The path prefix the vendor simulator routes here.
TICKETS_PREFIX: Final = "/api/v2/tickets/"
#: The host suffix every account's host has.
HELPDESK_SUFFIX: Final = ".helpdesk.example"
#: Where a rehearsal names the host a call was for (lower-cased, as handlers read fields).
ORIGINAL_HOST_FIELD: Final = "x-sweeper-original-host"
#: Whose a shared login is (`add_shared_login`).
SHARED: Final = "*"
#: The help desk's published limit: 700 requests a minute per account.
DEFAULT_ACCOUNT_RATE: Final = (700, 60.0)

__all__ = [
    "HELPDESK_SUFFIX",
    "TICKETS_PREFIX",
    "HelpDesk",
    "HelpDeskAnswer",
    "HelpDeskAudit",
    "is_account_host",
]


@dataclass(frozen=True, slots=True)
class HelpDeskAudit:
    """What the help desk saw. Tickets are "account/ticket"."""

    responses_by_status: dict[int, int]
    calls_by_ticket: dict[str, int]
    effects_by_ticket: dict[str, int]
    #: For each account's host, whose logins arrived there (an unknown login: "?").
    logins_by_host: dict[str, dict[str, int]]
    #: Calls whose login belonged to another account than their host's.
    misdirected: int
    #: 429s per account, injected (`throttle_next`) or the window's.
    throttled_by_account: dict[str, int]


def _ticket(path: str) -> str | None:
    """`/api/v2/tickets/{id}.json` -> the decoded id, else None."""
    rest = path.removeprefix(TICKETS_PREFIX)
    if rest == path or not rest.endswith(".json") or "/" in rest:
        return None
    ticket = unquote(rest.removesuffix(".json"))
    return ticket or None


def _account_of_host(host: str | None) -> str | None:
    name = (host or "").rsplit(":", 1)[0].lower()
    account = name.removesuffix(HELPDESK_SUFFIX)
    return account if account != name and account and "." not in account else None


def is_account_host(host: str | None) -> bool:
    """True when `host` (a Host header) is an account's host under the help desk's suffix: only
    those calls are the help desk's, the simulator's other contracts answer the rest."""
    return _account_of_host(host) is not None


def _login(authorization: str | None) -> tuple[str, str] | None:
    scheme, _, encoded = (authorization or "").partition(" ")
    if scheme.lower() != "basic":
        return None
    try:
        username, sep, password = base64.b64decode(encoded, validate=True).decode().partition(":")
    except (binascii.Error, UnicodeDecodeError):
        return None
    return (username, password) if sep else None


class HelpDesk:
    """The help desk's state, behind one lock (see the module docstring)."""

    def __init__(self, *, rate: tuple[int, float] = DEFAULT_ACCOUNT_RATE) -> None:
        if rate[0] < 1 or not rate[1] > 0:
            raise ValueError("rate must be (limit >= 1, period_seconds > 0)")
        self._rate = rate
        self._lock = threading.Lock()
        self._logins: dict[tuple[str, str], str] = {}
        self.reset()

    def reset(self) -> None:
        """Forget every call, effect and pending throttle (accounts stay)."""
        with self._lock:
            self._deleted: set[str] = set()
            self._statuses: Counter[int] = Counter()
            self._calls: Counter[str] = Counter()
            self._effects: Counter[str] = Counter()
            self._hosts: defaultdict[str, Counter[str]] = defaultdict(Counter)
            self._misdirected = 0
            self._throttled: Counter[str] = Counter()
            self._forced: dict[str, deque[int | None]] = defaultdict(deque)
            self._windows: defaultdict[str, deque[float]] = defaultdict(deque)

    def add_account(self, account: str, username: str, password: str) -> None:
        """An account and its one login."""
        with self._lock:
            self._logins[(username, password)] = account

    def add_shared_login(self, username: str, password: str) -> None:
        """A login taken at every account's host (one made-up secret for every tenant)."""
        with self._lock:
            self._logins[(username, password)] = SHARED

    def throttle_next(
        self, account: str, *, times: int = 1, retry_after_seconds: int | None = None
    ) -> None:
        """Answer the account's next `times` calls 429, with this Retry-After (None: none)."""
        with self._lock:
            self._forced[account].extend([retry_after_seconds] * times)

    def delete(
        self, method: str, path: str, host: str | None, authorization: str | None
    ) -> HelpDeskAnswer:
        """The answer to one call (see the module docstring)."""
        ticket = _ticket(path)
        account = _account_of_host(host)
        with self._lock:
            answer = self._answer(method, ticket, account, _login(authorization))
            self._statuses[answer.status] += 1
            return answer

    def _answer(
        self,
        method: str,
        ticket: str | None,
        account: str | None,
        login: tuple[str, str] | None,
    ) -> HelpDeskAnswer:
        if ticket is None or account is None:
            return HelpDeskAnswer(404, "no_such_route")
        owner = self._logins.get(login) if login is not None else None
        self._hosts[account][owner or "?"] += 1
        if owner not in (account, SHARED):
            self._misdirected += owner is not None
            return HelpDeskAnswer(401, "unauthorized")
        if method != "DELETE":
            return HelpDeskAnswer(405, "method_not_allowed")
        forced = self._forced.get(account)
        if forced:
            self._throttled[account] += 1
            wait = forced.popleft()
            headers = () if wait is None else (("Retry-After", str(wait)),)
            return HelpDeskAnswer(429, "rate_limited", headers)
        wait_seconds = self._over_window(account, time.monotonic())
        if wait_seconds is not None:
            self._throttled[account] += 1
            return HelpDeskAnswer(429, "rate_limited", (("Retry-After", str(wait_seconds)),))
        key = f"{account}/{ticket}"
        self._calls[key] += 1
        if key in self._deleted:
            return HelpDeskAnswer(404, "not_found")
        self._deleted.add(key)
        self._effects[key] += 1
        return HelpDeskAnswer(204)

    def _over_window(self, account: str, now: float) -> int | None:
        """Count this call in the account's window; the whole seconds to wait when over."""
        limit, period = self._rate
        window = self._windows[account]
        while window and window[0] <= now - period:
            window.popleft()
        window.append(now)
        if len(window) <= limit:
            return None
        return max(1, int(window[-limit - 1] + period - now + 0.999))

    def audit(self) -> HelpDeskAudit:
        with self._lock:
            return HelpDeskAudit(
                responses_by_status=dict(sorted(self._statuses.items())),
                calls_by_ticket=dict(self._calls),
                effects_by_ticket=dict(self._effects),
                logins_by_host={host: dict(c) for host, c in self._hosts.items()},
                misdirected=self._misdirected,
                throttled_by_account=dict(self._throttled),
            )

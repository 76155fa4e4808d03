"""How the `http` kind classes what happened to a call: a status, or a transport error.

`OutcomeTable` is the one place a status or a urllib3 error becomes an outcome class;
`DEFAULT_OUTCOMES` is the vendor contract's, and `outcomes_for` lays a policy's per-status
overrides (`outcomes = {409 = "absent"}`) over it. Rules that read a header or the body first
are `sweeper.actions.outcome_rules`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from types import MappingProxyType
from typing import Final

from urllib3.exceptions import (
    ConnectTimeoutError,
    HTTPError,
    LocationValueError,
    NameResolutionError,
    NewConnectionError,
    ProtocolError,
    ReadTimeoutError,
    SSLError,
)

from sweeper.actions.http_spec import HttpActionSpec
from sweeper.models import OutcomeClass


@dataclass(frozen=True, slots=True)
class OutcomeTable:
    """How what happened to a call maps to an outcome class: the one place it is decided.

    A status is looked up in `when_retry_after` (only if the response named a wait), then in
    `statuses`, then by its hundred, else `otherwise`. A transport error takes the first row of
    `errors` it is an instance of: TRANSIENT when the request was never sent, UNKNOWN when it may
    have reached the vendor.
    """

    statuses: Mapping[int, OutcomeClass]
    when_retry_after: Mapping[int, OutcomeClass]
    by_hundred: Mapping[int, OutcomeClass]
    otherwise: OutcomeClass
    errors: tuple[tuple[type[HTTPError], OutcomeClass, str], ...]

    def classify_status(self, status: int, *, has_retry_after: bool) -> OutcomeClass:
        if has_retry_after and status in self.when_retry_after:
            return self.when_retry_after[status]
        if status in self.statuses:
            return self.statuses[status]
        return self.by_hundred.get(status // 100, self.otherwise)

    def classify_error(self, exc: HTTPError) -> tuple[OutcomeClass, str]:
        """Outcome class and short code of a transport error."""
        for kind, outcome, code in self.errors:
            if isinstance(exc, kind):
                return outcome, code
        return OutcomeClass.UNKNOWN, "http_error"


#: The vendor contract's classification (a later issue lets a policy override it).
DEFAULT_OUTCOMES: Final = OutcomeTable(
    statuses=MappingProxyType(
        {
            400: OutcomeClass.PERMANENT,
            401: OutcomeClass.AUTH,
            403: OutcomeClass.AUTH,
            404: OutcomeClass.ABSENT,
            410: OutcomeClass.ABSENT,
            422: OutcomeClass.PERMANENT,
            429: OutcomeClass.THROTTLED,
        }
    ),
    # A 503 that names a wait is the vendor shedding load, not failing.
    when_retry_after=MappingProxyType({503: OutcomeClass.THROTTLED}),
    by_hundred=MappingProxyType(
        {2: OutcomeClass.ACCEPTED, 4: OutcomeClass.PERMANENT, 5: OutcomeClass.TRANSIENT}
    ),
    # 1xx/3xx: redirects are not followed, so the configured URL is wrong.
    otherwise=OutcomeClass.PERMANENT,
    # Most specific first: NameResolutionError < NewConnectionError < ConnectTimeoutError.
    errors=(
        (NameResolutionError, OutcomeClass.TRANSIENT, "dns_error"),
        (NewConnectionError, OutcomeClass.TRANSIENT, "connect_error"),
        (ConnectTimeoutError, OutcomeClass.TRANSIENT, "connect_timeout"),
        (ReadTimeoutError, OutcomeClass.UNKNOWN, "read_timeout"),
        (ProtocolError, OutcomeClass.UNKNOWN, "connection_reset"),
        # Usually the handshake, but urllib3 also reports TLS failures mid-response this way.
        (SSLError, OutcomeClass.UNKNOWN, "tls_error"),
        (LocationValueError, OutcomeClass.PERMANENT, "bad_url"),
    ),
)


def outcomes_for(config: HttpActionSpec, base: OutcomeTable = DEFAULT_OUTCOMES) -> OutcomeTable:
    """The default table with the policy's per-status overrides on top."""
    if not config.outcomes:
        return base
    statuses = {**base.statuses, **{s: OutcomeClass(o) for s, o in config.outcomes.items()}}
    # An explicit override also wins over the Retry-After special case for that status.
    when = {s: o for s, o in base.when_retry_after.items() if s not in config.outcomes}
    return replace(
        base, statuses=MappingProxyType(statuses), when_retry_after=MappingProxyType(when)
    )

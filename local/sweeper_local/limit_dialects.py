"""How the vendor simulator states its quota in every answer, in one of the dialects real
vendors speak (`sweeper.vendor_limits` reads each):

* `ratelimit`: the IETF fields, `RateLimit-Policy: "quota";q=LIMIT;w=PERIOD` and
  `RateLimit: "quota";r=REMAINING;t=RESET`;
* `x-ratelimit`: GitHub's `x-ratelimit-limit / -remaining / -used / -reset` (the reset an
  epoch time, in whole seconds) and `x-ratelimit-resource: core`;
* `sforce`: Salesforce's `Sforce-Limit-Info: api-usage=USED/LIMIT`;
* `plain` (the default): none of them, as before.

The numbers are those of the caller's sliding window as the call left it counted: REMAINING is
the limit less the calls in the window (never below 0), RESET the seconds until one more call
would be admitted (the oldest call that must leave the window has left it), rounded up.
"""

from __future__ import annotations

import math
from typing import Final, Literal, get_args

Dialect = Literal["plain", "ratelimit", "x-ratelimit", "sforce"]
#: What `--dialect` takes: a dialect, or a vendor's name for one. GitHub states its quota in
#: `x-ratelimit-*` (its artifacts API always does); Shopify's GraphQL API states points in
#: every body whatever the dialect of the quota, which it then states in no header.
DIALECT_ALIASES: Final[dict[str, Dialect]] = {
    "ietf": "ratelimit",
    "github": "x-ratelimit",
    "shopify-graphql": "plain",
}
DIALECT_NAMES: Final = (*get_args(Dialect), *DIALECT_ALIASES)
#: The name of the simulator's one quota policy (IETF) and its resource (GitHub).
POLICY_NAME: Final = "quota"
RESOURCE_NAME: Final = "core"


def dialect_named(name: str) -> Dialect:
    """The dialect `--dialect NAME` means (ValueError for a name it does not know)."""
    if name in DIALECT_ALIASES:
        return DIALECT_ALIASES[name]
    if name in get_args(Dialect):
        return name  # type: ignore[return-value]
    raise ValueError(f"unknown dialect {name!r}: one of {', '.join(DIALECT_NAMES)}")


def check_dialect(dialect: Dialect, period_seconds: float | None) -> None:
    """ValueError when a dialect cannot state the quota: the IETF window is whole seconds."""
    whole = period_seconds is None or period_seconds == int(period_seconds)
    if dialect == "ratelimit" and not whole:
        raise ValueError("the IETF fields state whole seconds: give a period of whole seconds")


def limit_headers(
    dialect: Dialect,
    *,
    limit: int,
    period_seconds: float,
    in_window: int,
    reset_seconds: float,
    now_epoch: float,
) -> tuple[tuple[str, str], ...]:
    """The headers stating a quota of `limit` per `period_seconds` with `in_window` calls
    counted and the next admission `reset_seconds` away."""
    remaining = max(0, limit - in_window)
    used = limit - remaining
    reset = max(0, math.ceil(reset_seconds))
    if dialect == "ratelimit":
        return (
            ("RateLimit-Policy", f'"{POLICY_NAME}";q={limit};w={int(period_seconds)}'),
            ("RateLimit", f'"{POLICY_NAME}";r={remaining};t={reset}'),
        )
    if dialect == "x-ratelimit":
        return (
            ("x-ratelimit-limit", str(limit)),
            ("x-ratelimit-remaining", str(remaining)),
            ("x-ratelimit-used", str(used)),
            ("x-ratelimit-reset", str(math.ceil(now_epoch + reset_seconds))),
            ("x-ratelimit-resource", RESOURCE_NAME),
        )
    if dialect == "sforce":
        return (("Sforce-Limit-Info", f"api-usage={used}/{limit}"),)
    return ()

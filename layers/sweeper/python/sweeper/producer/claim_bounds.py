"""The producer's claims under every limit of a policy: how many rows, and which rows wait.

Rows a claim leases go to the consumers, who call at the pace of the limits; a row they cannot
call within the horizon (half a lease, `LEASE_DRAIN_FRACTION`) outlives its lease. So each limit
bounds the rows on the consumers by what it can use within the horizon: its rate times the
horizon, and for a concurrency cap of N, N / the action's planned latency (p50) times the
horizon: the limit's regimes say (`sweeper.admission.regimes`, `LimitRegime.claim_share`), and
nothing here asks which kind a limit is. Which rows a limit bounds follows from its key template:

- **the whole policy**: a key over `{policy}` and `{host}` alone (an app-wide limit such as
  `"app"`, or the one scope of a `global` policy) is one key for every job. It bounds the
  policy's rows on the consumers (`policy_cap`, the in-flight cap of
  `sweeper.producer.backpressure`), and while it is closed no row is claimed.
- **each scope**: the first limit is the job's scope, kept in the ledger; it bounds each scope's
  rows (`scope_cap`), and a closed scope's rows wait. A further limit keyed by the tenant alone
  (a key over `{tenant_id}`, `{policy}` and `{host}` only) does the same for each tenant: a
  closed key holds its tenant's rows, and when the scope is the tenant's too, its bound joins
  the scope cap.
- **left to the consumers**: a key using `{object_id}` or `{params.NAME}` (the claim does not
  read params), the bound (not the closure) of a tenant key over a coarser scope, and a
  concurrency cap when no latency is planned (`action.latency_p50_seconds`, else the kind's
  default). The consumer holds every call in these limits as before; the claim does not see
  them (a closed one's rows are claimed and sent back to wait by the consumer, as before).

The tightest limit binds: with 50 stores at 2/s under an app limit of 40/s, the policy's rows on
the consumers are at most 40/s x the horizon and each store's at most 2/s x the horizon. A first
limit keyed per tenant sets no policy-wide bound of its own: its scopes' bounds add up, and the
claim holds each scope to its own.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from dataclasses import dataclass

from sweeper.admission.regimes import ClaimShare, regime_of
from sweeper.config import LEASE_DRAIN_FRACTION, LimitConfig, Policy, reach

#: Rendered in place of the tenant's id to read a tenant key's fixed parts (no id holds it).
_TENANT_MARK = "\x00"


@dataclass(frozen=True, slots=True)
class ClaimBounds:
    """What the limits allow on the consumers at once: the policy's rows and each scope's."""

    #: None: no limit covers the whole policy (the scopes' caps add up to the bound).
    policy_cap: int | None
    #: The limit that sets `policy_cap` (None with it).
    policy_binding: str | None
    scope_cap: int
    #: The limit that sets `scope_cap`.
    scope_binding: str
    #: Limits the claim cannot hold rows to (see the module docstring): the consumers do.
    to_consumers: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class HeldRows:
    """The rows a claim passes over because a limit of theirs is closed; they keep their time."""

    #: A closed limit every row holds (an app-wide limit): nothing is claimed.
    everything: str | None
    #: Scopes whose gate is closed (the first limit's keys, as the ledger keeps them).
    scopes: tuple[str, ...]
    #: Tenants whose key of a tenant-keyed further limit is closed.
    tenants: tuple[str, ...]


def horizon_seconds(policy: Policy) -> float:
    """How long the consumers have for the rows a claim leases: half a lease."""
    return policy.lease_seconds * LEASE_DRAIN_FRACTION


def _share(policy: Policy, limit: LimitConfig) -> ClaimShare:
    """The rows one key of `limit` takes within the horizon, as its regimes count them."""
    latency = policy.action.latency
    p50 = None if latency is None else latency[0]
    return regime_of(limit).claim_share(horizon_seconds(policy), p50)


def claim_bounds(policy: Policy) -> ClaimBounds:
    """The policy's and each scope's cap on rows on the consumers; see the module docstring."""
    first = policy.limits[0]
    first_reach = reach(first.key)
    # Every scope has the quota's rate: one scope's cap is what it drains within part of a
    # lease, as the policy's is (more would wait in the queue while its leases run out).
    scope_cap, scope_binding = policy.max_in_flight, first.name
    wide: list[tuple[int, str]] = []
    if first_reach == "policy":
        wide.append((policy.max_in_flight, first.name))
    to_consumers: list[str] = []
    for limit in policy.further_limits:
        share = _share(policy, limit)
        if share.to_consumers:
            to_consumers.append(limit.name)
        if share.rows is None:
            continue
        rows = share.rows
        limit_reach = reach(limit.key)
        if limit_reach == "policy":
            wide.append((rows, limit.name))
        elif limit_reach == "tenant" and first_reach == "tenant":
            if rows < scope_cap:
                scope_cap, scope_binding = rows, limit.name
        elif limit.name not in to_consumers:
            to_consumers.append(limit.name)
    policy_cap, policy_binding = min(wide) if wide else (None, None)
    return ClaimBounds(policy_cap, policy_binding, scope_cap, scope_binding, tuple(to_consumers))


def _further_key(policy: Policy, limit: LimitConfig, tenant_id: str) -> str:
    """A further limit's limiter key for a job of this tenant (as the consumer renders it)."""
    return limit.limiter_key(
        policy=policy.name,
        tenant_id=tenant_id,
        object_id="",
        host=policy.action.scope_host,
        params={},
    )


def _tenant_pattern(policy: Policy, limit: LimitConfig) -> re.Pattern[str]:
    """Matches a tenant-keyed limit's keys, the tenant's id captured."""
    key = _further_key(policy, limit, _TENANT_MARK)
    fixed = [re.escape(part) for part in key.split(_TENANT_MARK)]
    body = fixed[0]
    for index, part in enumerate(fixed[1:]):
        body += ("(?P<tenant>.+)" if index == 0 else "(?P=tenant)") + part
    return re.compile(body)


def held_rows(policy: Policy, closed: Collection[str]) -> HeldRows:
    """Which rows wait, given the limiter keys closed now (`closed`: every closed key the
    limiter table holds, as `sweeper.limiter.closed_scopes` reads them)."""
    closed_keys = set(closed)
    first = policy.limits[0]
    if reach(first.key) == "policy":
        scope = first.key.format(
            policy=policy.name, host=policy.action.scope_host, tenant_id="", object_id=""
        )
        if scope in closed_keys:
            return HeldRows(first.name, (), ())
    tenants: set[str] = set()
    for limit in policy.further_limits:
        limit_reach = reach(limit.key)
        if limit_reach == "policy":
            if _further_key(policy, limit, "") in closed_keys:
                return HeldRows(limit.name, (), ())
        elif limit_reach == "tenant":
            pattern = _tenant_pattern(policy, limit)
            for key in closed_keys:
                match = pattern.fullmatch(key)
                if match:
                    tenants.add(match.group("tenant"))
    return HeldRows(None, tuple(sorted(closed_keys)), tuple(sorted(tenants)))

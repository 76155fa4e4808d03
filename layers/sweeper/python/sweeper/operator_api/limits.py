"""`sweeper limits show` and `sweeper limits set`: the policy's limits as told, as changed live,
and closed; and an operator's live change to one of them (sweeper.limiter.live).

A change is written to the limit's own item in the limiter table and recorded in the ledger as
an operator action (`limits_set`, with its actor and reason); every consumer is under it within
LIVE_READ_SECONDS (and the slots its batch banked). A rate above the told quota is refused
unless the operator says `above_told`; `reset` leaves the item changing nothing (the told
rate is back; the item, with who reset it and why, expires a day later).
"""

from __future__ import annotations

import time
from typing import Any

from sweeper.admission.live import checked_rate, told_of
from sweeper.config import LimitConfig, Policy
from sweeper.errors import OperatorError
from sweeper.limiter import ScopeState
from sweeper.limiter.live import LIVE_READ_SECONDS, LiveLimit, LiveLimitStore
from sweeper.operator_api.backend import Backend
from sweeper.operator_api.requests import LimitsSetRequest, LimitsShowRequest


def live_store(backend: Backend) -> LiveLimitStore:
    """The live limits on the target's limiter table; OperatorError without one."""
    table = backend.endpoints.limiter_table()
    if table is None:
        raise OperatorError("the target names no limiter table (check --stack or --local-file)")
    return LiveLimitStore(backend.endpoints.dynamodb(), table)


def _closed_of(policy: Policy, limit: LimitConfig, gates: list[ScopeState]) -> list[str]:
    """The closed keys of one limit: a further limit's are `NAME:...`, the first limit's are
    the job's scopes (every other key of the table that starts with the policy's template)."""
    further = tuple(f"{other.name}:" for other in policy.further_limits)
    if limit is policy.limits[0]:
        return sorted(g.scope for g in gates if not g.scope.startswith(further))
    return sorted(g.scope for g in gates if g.scope.startswith(f"{limit.name}:"))


def limits_show(backend: Backend, request: LimitsShowRequest) -> dict[str, Any]:
    """Each limit of the policy: its key template, told rate and cap, live change, closed keys."""
    policy = backend.policy(request.policy)
    store = live_store(backend)
    closures = backend.closures()
    gates = closures(time.time()) if closures is not None else []
    limits = []
    for limit in policy.limits:
        live = store.get(policy.name, limit.name)
        limits.append(
            {
                "limit": limit.name,
                "key": limit.key,
                **told_of(limit),
                "live": None if live is None else live.as_dict(),
                "closed_keys": _closed_of(policy, limit, gates),
            }
        )
    return {"policy": policy.name, "read_every_seconds": LIVE_READ_SECONDS, "limits": limits}


def _change(
    request: LimitsSetRequest, policy: Policy, limit: LimitConfig, was: LiveLimit | None, by: str
) -> LiveLimit:
    """The limit's live change after this request (changing nothing: back to the told one)."""
    chosen = [request.live_rate is not None, request.pause, request.resume, request.reset]
    if sum(chosen) != 1:
        raise OperatorError("give exactly one of --rate N/T, --pause, --resume or --reset")
    paused, above = False, False
    rate: tuple[int | None, float | None] = (None, None)
    if was is not None and not request.reset:
        paused, above = was.paused, was.above_told
        rate = (was.rate_limit, was.rate_period_seconds)
    if request.pause or request.resume:
        paused = request.pause
    if request.live_rate is not None:
        rate, above = checked_rate(limit, request.live_rate, request.above_told), request.above_told
    return LiveLimit(
        policy=policy.name,
        limit=limit.name,
        actor=by,
        reason=request.reason,
        set_at=time.time(),
        paused=paused,
        rate_limit=rate[0],
        rate_period_seconds=rate[1],
        above_told=above,
    )


def limits_set(backend: Backend, request: LimitsSetRequest, *, actor: str) -> dict[str, Any]:
    """Change one limit live (see the module docstring); recorded with `actor` and reason."""
    policy = backend.policy(request.policy)
    by_name = {limit.name: limit for limit in policy.limits}
    limit = by_name.get(request.limit)
    if limit is None:
        raise OperatorError(
            f"policy {policy.name} has no limit {request.limit!r} (its limits: {sorted(by_name)})"
        )
    store = live_store(backend)
    was = store.get(policy.name, limit.name)
    change = _change(request, policy, limit, was, actor)
    detail = {
        "limit": limit.name,
        "told_rate": told_of(limit)["told_rate"],
        "was": None if was is None else was.as_dict(),
        "now": change.as_dict() if change.in_force else None,
    }
    backend.ledger.record_action(
        policy.name, "limits_set", actor, backend.clock(), reason=request.reason, detail=detail
    )
    store.put(change)
    return {"policy": policy.name, "in_force_within_seconds": LIVE_READ_SECONDS, **detail}

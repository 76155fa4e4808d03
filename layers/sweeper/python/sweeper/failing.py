"""Failures you can see: the jobs that are retrying, by outcome class and code, and the scopes
closed now, with why and until when. `status`, `inspect` and the console page show both, on
every path (the ledger directly, the local stack, the operator API).

Codes and counts only, never customer data: no operation key or object id; a scope by the name
the limiter gives it (a tenant's holds its id, as `status`'s gates always showed).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from sweeper.config import LimitConfig, Policy
from sweeper.config.key_template import KEY_FIELD_RE
from sweeper.limiter import ScopeState
from sweeper.models import OutcomeClass

if TYPE_CHECKING:
    from sweeper.ledger.store import Ledger

#: Groups (class, code) listed per policy, the largest first.
RETRYING_GROUPS = 20
#: Closed scopes listed per policy, the last to reopen first.
CLOSED_SCOPES = 20
#: What a closure's reason means, as `status` says it (codes only).
CLOSURE_WHY = {
    "throttled": "429 with Retry-After",
    "backoff": "429 without Retry-After: doubling backoff",
    "auth": "auth failure",
}
#: The classes whose job is tried again: every class that does not settle it. The ledger's
#: RETRYING_BY_CODE names the same list (a test keeps the two alike).
RETRYING_CLASSES = tuple(outcome for outcome in OutcomeClass if not outcome.settled)


@dataclass(frozen=True, slots=True)
class RetryingView:
    """Unsettled jobs whose last attempt came to `outcome` with `code`."""

    outcome: str
    code: str | None
    jobs: int
    #: limiter scopes they are spread over
    scopes: int
    #: seconds since the earliest due time among them: how late the oldest is
    oldest_seconds: float
    most_attempts: int
    #: when the last of them was written (an attempt, or a wait)
    last_at: str


@dataclass(frozen=True, slots=True)
class ClosedScopeView:
    """A scope of the policy closed now: no call is made under it until `reopens_at`."""

    scope: str
    reopens_at: str
    reason: str | None
    why: str | None


@dataclass(frozen=True, slots=True)
class Failures:
    retrying: list[RetryingView]
    #: None: the limiter was not read (no table known on this target)
    closed_scopes: list[ClosedScopeView] | None
    closed_scopes_unlisted: int = 0

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)  # the views too, each a dict


def template_pattern(template: str, constant: Mapping[str, str]) -> re.Pattern[str]:
    """Matches the keys a `{field}` template renders: the fields in `constant` filled in, any
    other field matching any value."""
    body = ""
    at = 0
    for found in KEY_FIELD_RE.finditer(template):
        body += re.escape(template[at : found.start()])
        name = found.group(1)
        body += re.escape(constant[name]) if name in constant else ".*"
        at = found.end()
    return re.compile(body + re.escape(template[at:]))


def _fixed_fields(policy: Policy) -> dict[str, str]:
    """The key fields one policy always fills the same way."""
    return {"policy": policy.name, "host": policy.action.scope_host}


def limit_key_pattern(policy: Policy, limit: LimitConfig) -> re.Pattern[str]:
    """Matches the limiter keys a further limit of the policy renders (`NAME:KEY`, as the
    consumer writes them): its template with the policy and host filled in, any other field
    (tenant, object, a param) matching any value."""
    return template_pattern(f"{limit.name}:{limit.key}", _fixed_fields(policy))


def retrying(ledger: Ledger, policy: str, now: datetime) -> list[RetryingView]:
    """The policy's retrying jobs by class and code, the largest group first."""
    return [
        RetryingView(
            outcome=group.outcome.value,
            code=group.code,
            jobs=group.jobs,
            scopes=group.scopes,
            oldest_seconds=max(0.0, (now - group.oldest_due_at).total_seconds()),
            most_attempts=group.most_attempts,
            last_at=group.last_at.isoformat(),
        )
        for group in ledger.retrying(policy, RETRYING_GROUPS)
    ]


def closed_scopes(
    policy: Policy, seen: Iterable[ScopeState], now: datetime
) -> list[ClosedScopeView]:
    """The policy's scopes among `seen` (gates read and the limiter's closed keys) closed at
    `now`, each once, the last to reopen first. A further limit's key is not a scope (`status`
    lists those as `closed_limits`)."""
    scope = template_pattern(policy.scope.key_template, _fixed_fields(policy))
    limits = [limit_key_pattern(policy, limit) for limit in policy.further_limits]
    found: dict[str, ClosedScopeView] = {}
    for state in seen:
        until = state.closed_until
        if until is None or not state.closed(now.timestamp()) or state.scope in found:
            continue
        if not scope.fullmatch(state.scope) or any(p.fullmatch(state.scope) for p in limits):
            continue
        reopens = datetime.fromtimestamp(until, now.tzinfo).isoformat()
        why = CLOSURE_WHY.get(state.reason or "")
        found[state.scope] = ClosedScopeView(state.scope, reopens, state.reason, why)
    return sorted(found.values(), key=lambda view: (view.reopens_at, view.scope), reverse=True)


def failures(
    policy: Policy,
    ledger: Ledger,
    *,
    now: datetime,
    gates: Sequence[ScopeState] | None = None,
    closed_keys: Sequence[ScopeState] | None = None,
) -> Failures:
    """What is failing in the policy now: its retrying jobs and its closed scopes (from the
    gates read and every closed key; None when neither was read)."""
    closed = None
    unlisted = 0
    if gates is not None or closed_keys is not None:
        every = closed_scopes(policy, [*(gates or ()), *(closed_keys or ())], now)
        closed, unlisted = every[:CLOSED_SCOPES], max(0, len(every) - CLOSED_SCOPES)
    return Failures(retrying(ledger, policy.name, now), closed, unlisted)

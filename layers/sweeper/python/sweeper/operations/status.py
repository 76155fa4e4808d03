"""Where one policy stands (`sweeper status`): ledger counts and ages, queues, gates (with a
shared quota's split: sweeper's share and the others'), the further limits' closed keys, the
failing jobs and scopes, the last runs."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any

from sweeper.config import Policy
from sweeper.failing import (
    CLOSURE_WHY,
    ClosedScopeView,
    RetryingView,
    failures,
    limit_key_pattern,
)
from sweeper.ledger.store import Ledger
from sweeper.limiter import ScopeState
from sweeper.limiter.base import ShareSeen
from sweeper.models import NewJob
from sweeper.operations.text import iso
from sweeper.producer.run import on_consumers
from sweeper.scheduling import scope_for

GateState = Callable[[str], ScopeState]
#: (messages in the queue, of which in flight) for a queue URL.
QueueDepth = Callable[[str], tuple[int, int]]

#: Gates read by `status`: the busiest scopes holding unsettled work.
STATUS_SCOPES = 20
#: Closed keys of further limits `status` lists per policy (the soonest to reopen last).
STATUS_LIMIT_KEYS = 20
STATUS_RUNS = 5


def closed_limits(
    policy: Policy, closed: Sequence[ScopeState], now: datetime
) -> list[LimitClosureView]:
    """The closed keys of the policy's further limits, the longest closed first."""
    found: list[LimitClosureView] = []
    for limit in policy.further_limits:
        pattern = limit_key_pattern(policy, limit)
        for gate in closed:
            if gate.closed_until is None or not pattern.fullmatch(gate.scope):
                continue
            reopens = datetime.fromtimestamp(gate.closed_until, now.tzinfo).isoformat()
            why = CLOSURE_WHY.get(gate.reason or "")
            found.append(LimitClosureView(limit.name, gate.scope, reopens, gate.reason, why))
    return sorted(found, key=lambda view: (view.reopens_at, view.key), reverse=True)


@dataclass(frozen=True, slots=True)
class ShareView:
    """A shared quota's split in the vendor's window, as a consumer last worked it out."""

    quota: int
    own: int
    others: int
    own_percent: float
    others_percent: float
    seen_at: str

    @classmethod
    def of(cls, seen: ShareSeen, tz: Any) -> ShareView:
        at = datetime.fromtimestamp(seen.seen_at, tz).isoformat()
        own, others = round(seen.own_percent, 1), round(seen.others_percent, 1)
        return cls(seen.quota, seen.own, seen.others, own, others, at)


@dataclass(frozen=True, slots=True)
class GateView:
    scope: str
    closed: bool
    reopens_at: str | None
    reason: str | None
    unsettled_jobs: int
    share: ShareView | None = None


@dataclass(frozen=True, slots=True)
class LimitClosureView:
    """A further limit's key closed now (`NAME:KEY`, as the limiter holds it)."""

    limit: str
    key: str
    reopens_at: str
    reason: str | None
    why: str | None


@dataclass(frozen=True, slots=True)
class QueueView:
    messages: int
    in_flight: int


@dataclass
class PolicyStatus:
    policy: str
    paused: bool
    paused_at: str | None
    paused_by: str | None
    pause_reason: str | None
    counts: dict[str, int]
    oldest_eligible_age_seconds: float | None
    leased_in_flight: int
    queue: QueueView | None
    dlq: QueueView | None
    gates: list[GateView]
    runs: list[dict[str, Any]]
    #: Closed keys of the policy's further limits (an app-wide limit holds every scope); None:
    #: the limiter's closures were not read.
    closed_limits: list[LimitClosureView] | None = None
    #: Closed keys beyond the STATUS_LIMIT_KEYS listed.
    closed_limits_unlisted: int = 0
    #: Jobs retrying, by class and code; the policy's scopes closed now (None: not read).
    retrying: list[RetryingView] = field(default_factory=list)
    closed_scopes: list[ClosedScopeView] | None = None
    closed_scopes_unlisted: int = 0

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def policy_status(
    policy: Policy,
    ledger: Ledger,
    *,
    now: datetime,
    depth: QueueDepth | None = None,
    queue_url: str | None = None,
    dlq_url: str | None = None,
    gate: GateState | None = None,
    closed_keys: Sequence[ScopeState] | None = None,
) -> PolicyStatus:
    """Where one policy stands: ledger counts, ages, queues, gates, the last runs.

    `closed_keys` is every limiter key closed now (`sweeper.limiter.closed_gates`): those of the
    policy's further limits are listed as `closed_limits`."""
    state = ledger.policy_state(policy.name)
    scopes = ledger.active_scopes(policy.name, STATUS_SCOPES)
    if not re.search(r"{(tenant_id|object_id)}", policy.scope.key_template):
        # One scope for the whole policy: show its gate even when nothing is waiting.
        scopes.setdefault(scope_for(policy, NewJob("", "", now)), 0)
    gates: list[GateView] = []
    read: list[ScopeState] = []
    if gate is not None:
        for scope, unsettled in scopes.items():
            seen = gate(scope)
            read.append(seen)
            closed = seen.closed(now.timestamp())
            reopens = None
            if closed and seen.closed_until is not None:
                reopens = datetime.fromtimestamp(seen.closed_until, now.tzinfo).isoformat()
            share = None if seen.share is None else ShareView.of(seen.share, now.tzinfo)
            reason = seen.reason if closed else None
            gates.append(GateView(scope, closed, reopens, reason, unsettled, share))

    limits = closed_limits(policy, closed_keys or (), now)
    failing = failures(
        policy, ledger, now=now, gates=None if gate is None else read, closed_keys=closed_keys
    )

    def queue(url: str | None) -> QueueView | None:
        if depth is None or url is None:
            return None
        messages, in_flight = depth(url)
        return QueueView(messages, in_flight)

    return PolicyStatus(
        policy=policy.name,
        paused=state.paused,
        paused_at=iso(state.paused_at) if state.paused else None,
        paused_by=state.paused_by if state.paused else None,
        pause_reason=state.reason if state.paused else None,
        counts={status.value: n for status, n in ledger.counts(policy.name).items()},
        oldest_eligible_age_seconds=ledger.oldest_eligible_age(policy.name, now),
        leased_in_flight=on_consumers(ledger, policy, now),
        queue=queue(queue_url),
        dlq=queue(dlq_url),
        gates=gates,
        closed_limits=None if closed_keys is None else limits[:STATUS_LIMIT_KEYS],
        closed_limits_unlisted=max(0, len(limits) - STATUS_LIMIT_KEYS),
        retrying=failing.retrying,
        closed_scopes=failing.closed_scopes,
        closed_scopes_unlisted=failing.closed_scopes_unlisted,
        runs=[
            {
                "scheduled_at": iso(run.scheduled_at),
                "batch_id": run.batch_id,
                "invocations": run.invocations,
                "discovered": run.discovered,
                "published": run.published,
                "publish_failures": run.publish_failures,
                "reclaimed": run.reclaimed,
                "stop_reason": run.stop_reason,
            }
            for run in ledger.runs(policy.name, STATUS_RUNS)
        ],
    )

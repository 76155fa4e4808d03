"""The console's reading commands: status, runs, inspect, and the console page's overview,
activity, search and one job's history. Each takes a `Backend` and its request and returns the
data `sweeper <command> --json` prints; none changes anything.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from sweeper.config import Policy
from sweeper.operator_api.backend import Backend, Closures
from sweeper.operator_api.requests import (
    ActivityRequest,
    InspectRequest,
    JobRequest,
    OverviewRequest,
    RunsRequest,
    SearchRequest,
    StatusRequest,
)

if TYPE_CHECKING:
    from sweeper.ledger.store import Ledger
    from sweeper.limiter import ScopeState

#: Discovery runs `status` shows per policy with discovery.
STATUS_DISCOVERY_RUNS = 3
#: Runs (with their reconciliation) and operator actions the console page shows per policy,
#: and how far back it looks for runs.
PAGE_RUNS = 5
PAGE_ACTIONS = 5
PAGE_RUNS_DAYS = 7


def status(backend: Backend, request: StatusRequest) -> dict[str, Any]:
    """Per policy: jobs by status, oldest eligible age, queues, gates, the last runs."""
    from sweeper.operations.status import policy_status
    from sweeper.redrive.letters import queue_depth

    policies = (
        [backend.policy(request.policy)]
        if request.policy is not None
        else list(backend.config.policies)
    )
    sqs = backend.endpoints.sqs()
    gate = backend.gate()
    read_closures = backend.closures()
    # one read of the closed keys serves every policy (their further limits' closures)
    closed = None if read_closures is None else read_closures(backend.clock().timestamp())
    found = []
    for policy in policies:
        where = backend.endpoints.policy(policy.name)
        item = policy_status(
            policy,
            backend.ledger,
            now=backend.clock(),
            depth=lambda url: queue_depth(sqs, url),
            queue_url=where.queue_url,
            dlq_url=where.dlq_url,
            gate=gate,
            closed_keys=closed,
        ).as_dict()
        for name, url in (("intake", where.intake_queue_url), ("intake_dlq", where.intake_dlq_url)):
            if url is None:
                item[name] = None
            else:
                messages, in_flight = queue_depth(sqs, url)
                item[name] = {"messages": messages, "in_flight": in_flight}
        at = next_run_at(backend, policy)
        item["schedule"] = policy.schedule
        item["next_run"] = None if at is None else at.isoformat()
        item["discovery_runs"] = _discovery_runs(backend, policy)
        found.append(item)
    return {"target": backend.endpoints.mode, "policies": found}


def next_run_at(backend: Backend, policy: Policy) -> datetime | None:
    """When the policy's producer runs next (the local stack's tick when it has one)."""
    from sweeper.producer.release import next_run

    now = backend.clock()
    local = backend.endpoints.local
    tick = local.tick_seconds if local is not None else None
    return next_run(
        policy,
        now,
        last_scheduled=backend.ledger.last_run_at_or_before(policy.name, now),
        every=timedelta(seconds=tick) if tick is not None else None,
        anchor=local.started_at if local is not None else None,
    )


def _discovery_runs(backend: Backend, policy: Policy) -> list[dict[str, Any]]:
    """The last discovery runs: counts, stop reason, time; no cursor (it holds source ids)."""
    from sweeper.discovery.store import DiscoveryStore

    if policy.discovery is None:
        return []
    return [
        {
            "run_id": run.run_id,
            "source": run.source,
            "started_at": run.started_at,
            "pass_number": run.pass_number,
            "scanned": run.scanned,
            "inserted": run.inserted,
            "moved_earlier": run.moved_earlier,
            "unchanged": run.unchanged,
            "rejected": run.rejected,
            "elapsed_seconds": run.elapsed_seconds,
            "stop_reason": run.stop_reason,
        }
        for run in DiscoveryStore(backend.ledger).runs(policy.name, STATUS_DISCOVERY_RUNS)
    ]


def runs(backend: Backend, request: RunsRequest) -> dict[str, Any]:
    """The per-batch audit since a time: each batch's counts and whether it reconciles."""
    from sweeper.audit import batch_audit

    policy = backend.policy(request.policy)
    since = request.since.astimezone(UTC)
    batches = batch_audit(policy.name, backend.ledger, since=since, limit=request.limit)
    return {
        "policy": policy.name,
        "since": since.isoformat(),
        "batches": [b.as_dict() for b in batches],
        "reconciled": all(b.reconciles for b in batches),
    }


def inspect(backend: Backend, request: InspectRequest) -> dict[str, Any]:
    """Terminal, stuck and held jobs: ids, classes, codes, attempts and times; beside them the
    jobs retrying by class and code, and the policy's closed scopes (`sweeper.failing`)."""
    from sweeper.failing import failures
    from sweeper.operations.jobs import inspect_jobs

    policy = backend.policy(request.policy)
    now = backend.clock()
    rows = inspect_jobs(
        policy.name,
        backend.ledger,
        now=now,
        stuck_after=timedelta(seconds=request.stuck_after_seconds),
        limit=request.limit,
    )
    read = backend.closures()
    closed = None if read is None else read(now.timestamp())
    failing = failures(policy, backend.ledger, now=now, closed_keys=closed)
    return {"policy": policy.name, "jobs": rows, **failing.as_dict()}


# -- the console page's reads: overview, activity, search, job ----------------------------------


def limits_of(policy: Policy) -> dict[str, Any]:
    """The policy's configured limits, as the page lists them beside the gates: each limit
    (the shorthand's `[quota]` and `[scope]` are its one) by what one key allows, and its key."""
    from sweeper.admission.regimes import regime_of

    listed = {
        f"limit {limit.name}": f"{regime_of(limit).allows()} a key of {limit.key}"
        for limit in policy.limits
    }
    return {
        **listed,
        "consumer_concurrency": min(
            policy.consumer.reserved_concurrency, policy.consumer.max_concurrency
        ),
        "max_in_flight_per_scope": policy.max_in_flight,
        "max_attempts": policy.max_attempts,
        "lease_seconds": policy.lease_seconds,
    }


def policy_overview(
    policy: Policy,
    ledger: Ledger,
    *,
    now: datetime,
    queues: Callable[[str], tuple[Any, str | None, str | None]] | None,
    gate: Callable[[str], ScopeState] | None,
    closures: Closures | None = None,
) -> dict[str, Any]:
    """Jobs by state, oldest eligible age, limits and gates, queue and DLQ depth (where
    `queues` reads them), the last runs with their reconciliation, the last operator actions.
    The web console's direct backend and the operator API both answer with this."""
    from sweeper.audit import batch_report
    from sweeper.operations.status import policy_status

    depth = dlq_url = queue_url = None
    if queues is not None:
        depth, queue_url, dlq_url = queues(policy.name)
    item = policy_status(
        policy,
        ledger,
        now=now,
        depth=depth,
        queue_url=queue_url,
        dlq_url=dlq_url,
        gate=gate,
        closed_keys=None if closures is None else closures(now.timestamp()),
    ).as_dict()
    audits = ledger.batch_audit(policy.name, now - timedelta(days=PAGE_RUNS_DAYS), PAGE_RUNS)
    item["runs"] = [batch_report(row).as_dict() for row in audits]
    item["limits"] = limits_of(policy)
    item["queues_read"] = queues is not None
    item["gates_read"] = gate is not None
    item["actions"] = [
        {
            "at": a.at.isoformat(),
            "action": a.action,
            "actor": a.actor,
            "reason": a.reason,
            "progress": None
            if not a.steps
            else {"steps": a.steps, "totals": a.totals or {}, "done": bool(a.done)},
        }
        for a in ledger.recent_actions(policy.name, PAGE_ACTIONS)
    ]
    return item


def overview(backend: Backend, request: OverviewRequest) -> dict[str, Any]:
    """The console page's summary of one policy, with the target's queues and gates."""
    from sweeper.redrive.letters import queue_depth

    policy = backend.policy(request.policy)
    sqs = backend.endpoints.sqs()

    def queues(name: str) -> tuple[Any, str | None, str | None]:
        where = backend.endpoints.policy(name)
        return (lambda url: queue_depth(sqs, url)), where.queue_url, where.dlq_url

    return policy_overview(
        policy,
        backend.ledger,
        now=backend.clock(),
        queues=queues,
        gate=backend.gate(),
        closures=backend.closures(),
    )


def activity(backend: Backend, request: ActivityRequest) -> dict[str, Any]:
    """Claims and completions per time bucket over the last hours."""
    from sweeper.operations.page import activity as buckets

    policy = backend.policy(request.policy)
    return {"buckets": buckets(policy.name, backend.ledger, now=backend.clock())}


def search(backend: Backend, request: SearchRequest) -> dict[str, Any]:
    """The job with this operation key, or this tenant's jobs."""
    from sweeper.operations.page import search_jobs

    policy = backend.policy(request.policy)
    return {"jobs": search_jobs(policy.name, backend.ledger, request.query, limit=request.limit)}


def job(backend: Backend, request: JobRequest) -> dict[str, Any]:
    """One job's history (None when no job has the key)."""
    from sweeper.operations.page import job_history

    return {"job": job_history(request.key, backend.ledger)}

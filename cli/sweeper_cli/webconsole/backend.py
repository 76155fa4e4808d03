"""What the console page reads and does, behind one small interface.

`ConsoleBackend` has two implementations by design: `LedgerBackend` reads the ledger directly
(the local stack, or `--database-url`), and the operator API's client (`--stack`, reached with
IAM) serves the same calls on AWS. The page knows only this interface.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, Protocol

from sweeper.config import Policy, SweeperConfig
from sweeper.errors import OperatorError
from sweeper.ledger.store import Ledger

if TYPE_CHECKING:
    from sweeper.endpoints import Endpoints

#: The actions the page offers, each with a confirmation.
ACTIONS = ("retry", "cancel", "hold", "unhold", "postpone")
#: Runs (with their reconciliation) and operator actions shown per policy.
PAGE_RUNS = 5
PAGE_ACTIONS = 5
#: Jobs one action from the page moves at most.
PAGE_ACTION_MAX = 1000


class ConsoleBackend(Protocol):
    """The reads and actions of the console page."""

    #: Who acts, as recorded with every action (the local OS user, or the AWS principal).
    operator: str
    #: What it reads: "local stack", "ledger" (a database URL) or "operator API".
    target: str

    def policies(self) -> list[str]: ...

    def overview(self, policy: str) -> dict[str, Any]:
        """Jobs by state, oldest eligible age, limits and gates, queue and DLQ depth, the last
        runs with their reconciliation, the last operator actions."""
        ...

    def activity(self, policy: str) -> list[dict[str, Any]]:
        """Claims and completions per time bucket over the last hours."""
        ...

    def search(self, policy: str, query: str) -> list[dict[str, Any]]:
        """The job with this operation key, or this tenant's jobs."""
        ...

    def job(self, key: str) -> dict[str, Any] | None:
        """One job's history: its row and its operator events."""
        ...

    def act(
        self,
        policy: str,
        action: str,
        *,
        key: str | None,
        tenant_id: str | None,
        reason: str | None,
        until: datetime | None,
        dry_run: bool,
    ) -> dict[str, Any]:
        """Retry, cancel, hold, unhold or postpone one job (by key) or a tenant's jobs; a dry
        run says what it would move. Recorded with `operator` and the reason."""
        ...


def _now() -> datetime:
    return datetime.now(UTC)


def limits_of(policy: Policy) -> dict[str, Any]:
    """The policy's configured limits, as the page lists them beside the gates."""
    quota = policy.quota
    return {
        "quota": f"{quota.limit} calls per {quota.period_seconds:g} s"
        + (" (adaptive)" if quota.adaptive else ""),
        "scope": policy.scope.kind,
        "consumer_concurrency": min(
            policy.consumer.reserved_concurrency, policy.consumer.max_concurrency
        ),
        "max_in_flight_per_scope": policy.max_in_flight_per_scope,
        "max_attempts": policy.max_attempts,
        "lease_seconds": policy.lease_seconds,
    }


@dataclass
class LedgerBackend:
    """The console page over the ledger itself, plus the queues and gates the target exposes
    (the local stack's; on AWS those the stack's outputs name, when the operator's credentials
    reach them)."""

    config: SweeperConfig
    ledger: Ledger
    operator: str
    target: str = "ledger"
    #: (policy -> (queue depth reader, dlq url)) and the gate reader, or None where not reached.
    queues: Any = None
    gate: Any = None
    clock: Any = field(default=_now)

    def policies(self) -> list[str]:
        return [p.name for p in self.config.policies]

    def _policy(self, name: str) -> Policy:
        for policy in self.config.policies:
            if policy.name == name:
                return policy
        raise OperatorError(f"no policy {name!r} in the policy file")

    def overview(self, policy: str) -> dict[str, Any]:
        from sweeper.audit import batch_report
        from sweeper.operator import policy_status

        chosen = self._policy(policy)
        now = self.clock()
        depth = dlq_url = queue_url = None
        if self.queues is not None:
            depth, queue_url, dlq_url = self.queues(policy)
        item = policy_status(
            chosen,
            self.ledger,
            now=now,
            depth=depth,
            queue_url=queue_url,
            dlq_url=dlq_url,
            gate=self.gate,
        ).as_dict()
        audits = self.ledger.batch_audit(policy, now - timedelta(days=7), PAGE_RUNS)
        item["runs"] = [batch_report(row).as_dict() for row in audits]
        item["limits"] = limits_of(chosen)
        item["queues_read"] = self.queues is not None
        item["gates_read"] = self.gate is not None
        item["actions"] = [
            {"at": a.at.isoformat(), "action": a.action, "actor": a.actor, "reason": a.reason}
            for a in self.ledger.recent_actions(policy, PAGE_ACTIONS)
        ]
        return item

    def activity(self, policy: str) -> list[dict[str, Any]]:
        from sweeper.operator import activity

        return activity(self._policy(policy).name, self.ledger, now=self.clock())

    def search(self, policy: str, query: str) -> list[dict[str, Any]]:
        from sweeper.operator import search_jobs

        return search_jobs(self._policy(policy).name, self.ledger, query)

    def job(self, key: str) -> dict[str, Any] | None:
        from sweeper.operator import job_history

        return job_history(key, self.ledger)

    def act(
        self,
        policy: str,
        action: str,
        *,
        key: str | None,
        tenant_id: str | None,
        reason: str | None,
        until: datetime | None,
        dry_run: bool,
    ) -> dict[str, Any]:
        from sweeper.models import ControlAction, JobSelection, JobStatus
        from sweeper.operator import control_jobs, retry_jobs

        name = self._policy(policy).name
        if action not in ACTIONS:
            raise OperatorError(f"unknown action {action!r}: one of {', '.join(ACTIONS)}")
        if (key is None) == (tenant_id is None):
            raise OperatorError("choose one job (its key) or one tenant")
        now = self.clock()
        if action == "retry":
            if dry_run:
                # What RETRY_FAILED would move: the chosen jobs that are failed.
                if key is not None:
                    job = self.ledger.get(key)
                    found = [] if job is None or job.policy != name else [job.status]
                else:
                    found = [
                        JobStatus(hit["status"]) for hit in self._tenant_jobs(name, tenant_id or "")
                    ]
                moved = [s for s in found if s is JobStatus.FAILED]
                return _report(
                    name, action, True, len(moved), {"failed": len(moved)} if moved else {}
                )
            keys = retry_jobs(
                name,
                self.ledger,
                actor=self.operator,
                now=now,
                keys=None if key is None else [key],
                tenant_id=tenant_id,
                limit=PAGE_ACTION_MAX,
                reason=reason,
            )
            return _report(name, action, False, len(keys), {"failed": len(keys)} if keys else {})
        selection = JobSelection(keys=None if key is None else (key,), tenant_id=tenant_id)
        report = control_jobs(
            ControlAction(action),
            name,
            self.ledger,
            selection,
            actor=self.operator,
            now=now,
            reason=reason,
            until=until,
            limit=PAGE_ACTION_MAX,
            dry_run=dry_run,
        )
        return _report(name, action, dry_run, report.moved, report.from_states)

    def _tenant_jobs(self, policy: str, tenant_id: str) -> list[dict[str, Any]]:
        from sweeper.operator import search_jobs

        return [
            hit
            for hit in search_jobs(policy, self.ledger, tenant_id, limit=PAGE_ACTION_MAX)
            if hit["tenant_id"] == tenant_id
        ]


def _report(
    policy: str, action: str, dry_run: bool, moved: int, from_states: dict[str, int]
) -> dict[str, Any]:
    return {
        "policy": policy,
        "action": action,
        "dry_run": dry_run,
        "moved": moved,
        "from_states": from_states,
    }


def ledger_backend(
    endpoints: Endpoints, config: SweeperConfig, ledger: Ledger, operator: str
) -> LedgerBackend:
    """The page's backend for a resolved target: beside the local stack, its ledger, queues and
    gates; with a database URL only, the ledger (queues and gates are then not read)."""
    if endpoints.mode != "local":
        return LedgerBackend(config, ledger, operator=operator, target="ledger")
    from sweeper.dead_letters import queue_depth
    from sweeper.limiter import DynamoLimiter

    sqs = endpoints.sqs()

    def queues(policy: str) -> tuple[Any, str | None, str | None]:
        where = endpoints.policy(policy)
        return (lambda url: queue_depth(sqs, url)), where.queue_url, where.dlq_url

    table = endpoints.limiter_table()
    gate = None if table is None else DynamoLimiter(endpoints.dynamodb(), table).state
    return LedgerBackend(
        config, ledger, operator=operator, target="local stack", queues=queues, gate=gate
    )

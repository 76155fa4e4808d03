"""What the console page reads and does, behind one small interface.

`ConsoleBackend` has two implementations by design: `LedgerBackend` reads the ledger directly
(the local stack, or `--database-url`), and `ApiBackend` asks the stack's operator API
(`--stack`, reached with the operator's own AWS credentials), whose function answers with the
same product reads. The page knows only this interface.
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
    #: The read of the limiter keys closed at a time (further limits' closures), or None.
    closures: Any = None
    clock: Any = field(default=_now)

    def policies(self) -> list[str]:
        return [p.name for p in self.config.policies]

    def _policy(self, name: str) -> Policy:
        for policy in self.config.policies:
            if policy.name == name:
                return policy
        raise OperatorError(f"no policy {name!r} in the policy file")

    def overview(self, policy: str) -> dict[str, Any]:
        from sweeper.operator_api.reads import policy_overview

        return policy_overview(
            self._policy(policy),
            self.ledger,
            now=self.clock(),
            queues=self.queues,
            gate=self.gate,
            closures=self.closures,
        )

    def activity(self, policy: str) -> list[dict[str, Any]]:
        from sweeper.operations import activity

        return activity(self._policy(policy).name, self.ledger, now=self.clock())

    def search(self, policy: str, query: str) -> list[dict[str, Any]]:
        from sweeper.operations import search_jobs

        return search_jobs(self._policy(policy).name, self.ledger, query)

    def job(self, key: str) -> dict[str, Any] | None:
        from sweeper.operations import job_history

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
        from sweeper.operations import control_jobs, retry_jobs

        chosen = self._policy(policy)
        name = chosen.name
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
            max_postpone=timedelta(days=chosen.max_postpone_days),
        )
        return _report(name, action, dry_run, report.moved, report.from_states)

    def _tenant_jobs(self, policy: str, tenant_id: str) -> list[dict[str, Any]]:
        from sweeper.operations import search_jobs

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


class ApiCaller(Protocol):
    """What `ApiBackend` asks: the operator API's client, or anything that runs a request."""

    def call(self, request: Any) -> dict[str, Any]: ...


@dataclass
class ApiBackend:
    """The console page through the stack's operator API: every read a READ command (served by
    the read-only function too), every action a `retry` or job control request. The API records
    the caller's IAM principal with each action, which is `operator` here."""

    api: ApiCaller
    policy_names: list[str]
    operator: str
    target: str = "operator API"

    def policies(self) -> list[str]:
        return list(self.policy_names)

    def overview(self, policy: str) -> dict[str, Any]:
        from sweeper.operator_api.requests import OverviewRequest

        return self.api.call(OverviewRequest(policy=policy))

    def activity(self, policy: str) -> list[dict[str, Any]]:
        from sweeper.operator_api.requests import ActivityRequest

        buckets: list[dict[str, Any]] = self.api.call(ActivityRequest(policy=policy))["buckets"]
        return buckets

    def search(self, policy: str, query: str) -> list[dict[str, Any]]:
        return self._search(policy, query, limit=None)

    def _search(self, policy: str, query: str, *, limit: int | None) -> list[dict[str, Any]]:
        from sweeper.operator_api.requests import SearchRequest

        request = (
            SearchRequest(policy=policy, query=query)
            if limit is None
            else SearchRequest(policy=policy, query=query, limit=limit)
        )
        jobs: list[dict[str, Any]] = self.api.call(request)["jobs"]
        return jobs

    def job(self, key: str) -> dict[str, Any] | None:
        from sweeper.operator_api.requests import JobRequest

        found: dict[str, Any] | None = self.api.call(JobRequest(key=key))["job"]
        return found

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
        from pydantic import ValidationError

        from sweeper.operator_api.requests import ControlRequest, RetryRequest

        if action not in ACTIONS:
            raise OperatorError(f"unknown action {action!r}: one of {', '.join(ACTIONS)}")
        if (key is None) == (tenant_id is None):
            raise OperatorError("choose one job (its key) or one tenant")
        keys = None if key is None else (key,)
        try:
            if action == "retry":
                if dry_run:
                    return self._retry_preview(policy, key, tenant_id)
                retried = self.api.call(
                    RetryRequest(
                        policy=policy,
                        keys=keys,
                        tenant_id=tenant_id,
                        limit=PAGE_ACTION_MAX,
                        reason=reason,
                    )
                )
                moved = int(retried["retried"])
                return _report(policy, action, False, moved, {"failed": moved} if moved else {})
            # The page previews every action (a dry run) and the operator confirms what it
            # would move before it is sent: that is the confirmation the API asks for.
            report = self.api.call(
                ControlRequest(
                    command=action,  # one of ACTIONS, checked above
                    policy=policy,
                    keys=keys,
                    tenant_id=tenant_id,
                    until=until,
                    limit=PAGE_ACTION_MAX,
                    dry_run=dry_run,
                    reason=reason,
                    confirmed=not dry_run,
                )
            )
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}"
                for e in exc.errors(include_input=False, include_url=False)[:3]
            )
            raise OperatorError(f"invalid action: {problems}") from exc
        return _report(
            policy, action, dry_run, int(report["moved"]), dict(report.get("from_states") or {})
        )

    def _retry_preview(self, policy: str, key: str | None, tenant_id: str | None) -> dict[str, Any]:
        """What a retry would move: the chosen jobs that are failed (as `LedgerBackend`)."""
        if key is not None:
            job = self.job(key)
            found = [] if job is None or job["policy"] != policy else [job["status"]]
        else:
            found = [
                hit["status"]
                for hit in self._search(policy, tenant_id or "", limit=PAGE_ACTION_MAX)
                if hit["tenant_id"] == tenant_id
            ]
        moved = sum(1 for status in found if status == "failed")
        return _report(policy, "retry", True, moved, {"failed": moved} if moved else {})


def api_backend(endpoints: Endpoints, config: SweeperConfig) -> ApiBackend:
    """The page's backend for `--stack` without a database URL: the stack's operator API, as
    the principal of the operator's own AWS session."""
    from sweeper_tools.endpoints import operator_api_outputs
    from sweeper_tools.operator_client import OperatorApiClient, caller_arn

    client = OperatorApiClient.from_outputs(endpoints.session, operator_api_outputs(endpoints))
    return ApiBackend(
        client,
        [p.name for p in config.policies],
        operator=caller_arn(endpoints.session, endpoint_url=endpoints.endpoint_url),
    )


def ledger_backend(
    endpoints: Endpoints, config: SweeperConfig, ledger: Ledger, operator: str
) -> LedgerBackend:
    """The page's backend for a resolved target: beside the local stack, its ledger, queues and
    gates; with a database URL only, the ledger (queues and gates are then not read)."""
    if endpoints.mode != "local":
        return LedgerBackend(config, ledger, operator=operator, target="ledger")
    from sweeper.limiter import DynamoLimiter
    from sweeper.operator_api.backend import closures_reader
    from sweeper.redrive.letters import queue_depth

    sqs = endpoints.sqs()

    def queues(policy: str) -> tuple[Any, str | None, str | None]:
        where = endpoints.policy(policy)
        return (lambda url: queue_depth(sqs, url)), where.queue_url, where.dlq_url

    table = endpoints.limiter_table()
    gate = None if table is None else DynamoLimiter(endpoints.dynamodb(), table).state
    return LedgerBackend(
        config,
        ledger,
        operator=operator,
        target="local stack",
        queues=queues,
        gate=gate,
        closures=closures_reader(endpoints),
    )

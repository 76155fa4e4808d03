"""The console's commands that change something: retry, redrive, pause and resume, release,
catch-up, prune and job control. Each takes a `Backend`, its request and the `actor` the
ledger records with the reason, and returns the data `sweeper <command> --json` prints.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, timedelta
from typing import Any

from sweeper.config import Policy
from sweeper.errors import OperatorError
from sweeper.operator_api.backend import Backend
from sweeper.operator_api.requests import (
    CatchUpRequest,
    ControlRequest,
    PauseRequest,
    PruneRequest,
    RedriveCommand,
    ReleaseRequest,
    ResumeRequest,
    RetryRequest,
)


class ConfirmationNeededError(OperatorError):
    """A job control would move more jobs than the threshold and was not confirmed."""

    def __init__(self, command: str, policy: str, moved: int, threshold: int) -> None:
        super().__init__(
            f"{moved} jobs match, more than {threshold}: confirm to {command} them, or narrow "
            "the filters or --max"
        )
        self.command = command
        self.policy = policy
        self.moved = moved
        self.threshold = threshold


def retry(backend: Backend, request: RetryRequest, *, actor: str) -> dict[str, Any]:
    """Chosen terminal jobs back to pending with a fresh attempt budget."""
    from sweeper.operations.jobs import retry_jobs

    policy = backend.policy(request.policy)
    moved = retry_jobs(
        policy.name,
        backend.ledger,
        actor=actor,
        now=backend.clock(),
        keys=list(request.keys) if request.keys else None,
        outcomes=list(request.outcomes) if request.outcomes else None,
        tenant_id=request.tenant_id,
        limit=request.limit,
        reason=request.reason,
    )
    return {"policy": policy.name, "retried": len(moved), "keys": moved}


def redrive(backend: Backend, request: RedriveCommand, *, actor: str) -> dict[str, Any]:
    """Dead letters back to the work queue, as the redrive function does."""
    import time

    from sweeper.operator_api.limits import live_store
    from sweeper.redrive.letters import SqsDeadLetterQueue
    from sweeper.redrive.limits import LimitLook
    from sweeper.redrive.run import RedriveReport, RedriveRequest, run_redrive

    policy = backend.policy(request.policy)
    where = backend.endpoints.policy(policy.name)
    gate = backend.gate()
    if where.queue_url is None or where.dlq_url is None or gate is None:
        raise OperatorError(f"the target has no queue, DLQ or limiter table for {policy.name}")
    dlq = SqsDeadLetterQueue(backend.endpoints.sqs(), where.dlq_url, where.queue_url)
    deadline = time.monotonic() + request.budget_seconds
    outer = backend.remaining_seconds

    def remaining() -> float:
        left = deadline - time.monotonic()
        return left if outer is None else min(left, outer())

    def progress(report: RedriveReport) -> None:
        backend.tell(report.examined + report.errors)

    report = run_redrive(
        RedriveRequest(
            policy=policy.name,
            tenant_id=request.tenant_id,
            scope=request.scope,
            outcome=list(request.outcomes) if request.outcomes else None,
            max_messages=request.max_messages,
            rate_per_second=request.rate_per_second,
            dry_run=request.dry_run,
            include_terminal=request.include_terminal,
        ),
        backend.ledger,
        dlq,
        gate,
        policy=policy.name,
        clock=backend.clock,
        remaining_seconds=remaining,
        default_rate_per_second=policy.quota.rate_per_second,
        progress=progress,
        actor=actor,
        limits=LimitLook(policy, live_store(backend)),
    )
    return report.as_dict()


def _switch(backend: Backend, policy: Policy) -> Any:
    """The consumer's event source mappings on AWS; None locally (the stack polls the flag)."""
    from sweeper.pause_switch import EventSourceSwitch

    if backend.endpoints.mode == "local":
        return None
    name = backend.consumer_function or backend.endpoints.policy(policy.name).consumer_function
    if not name:
        raise OperatorError("no consumer function in the stack outputs: pass --consumer-function")
    return EventSourceSwitch(backend.endpoints.lambda_client(), name)


def pause(backend: Backend, request: PauseRequest, *, actor: str) -> dict[str, Any]:
    """Pause a policy: the producer skips, consumers stop, queued messages stay."""
    from sweeper.operations.pause import pause_policy

    return _pause_switch(pause_policy, backend, request, actor)


def resume(backend: Backend, request: ResumeRequest, *, actor: str) -> dict[str, Any]:
    """Resume a paused policy: consumers first, then the producer."""
    from sweeper.operations.pause import resume_policy

    return _pause_switch(resume_policy, backend, request, actor)


def _pause_switch(
    turn: Callable[..., Any], backend: Backend, request: PauseRequest | ResumeRequest, actor: str
) -> dict[str, Any]:
    policy = backend.policy(request.policy)
    result = turn(
        policy.name,
        backend.ledger,
        _switch(backend, policy),
        actor=actor,
        reason=request.reason,
        now=backend.clock(),
    )
    return dict(result.as_dict())


def release(backend: Backend, request: ReleaseRequest, *, actor: str) -> dict[str, Any]:
    """Run the policy's producer now: in this process locally, else the deployed producer
    function (Lambda Invoke, so the run has its own role, logs and metrics). Refused while
    paused. The run is recorded as the producer's, under a `release-` batch id, and, where
    this process holds the ledger, as an operator action of `actor` (migration 0012)."""
    policy = backend.policy(request.policy)
    report = release_report(backend, policy)
    if backend.has_ledger:
        backend.ledger.record_action(
            policy.name,
            "release",
            actor,
            backend.clock(),
            detail={"batch_id": report.get("batch_id")},
        )
    return report


def release_report(backend: Backend, policy: Policy) -> dict[str, Any]:
    """The producer's report of a release now (also `smoke`'s canary release)."""
    from botocore.config import Config as BotoConfig

    from sweeper.producer.release import invoke_producer, release_now
    from sweeper.sqs_queue import SqsPublisher

    where = backend.endpoints.policy(policy.name)
    if backend.endpoints.local is not None:
        if where.queue_url is None:
            raise OperatorError(f"the local stack has no work queue for {policy.name}")
        publisher = SqsPublisher(backend.endpoints.sqs(), where.queue_url)
        return release_now(policy, backend.ledger, publisher, clock=backend.clock).as_dict()
    if where.producer_function is None:
        raise OperatorError(
            f"stack {backend.endpoints.stack!r} names no producer function for "
            f"{policy.name} (output {policy.name}ProducerFunctionName); check --stack"
        )
    # Without a ledger the function itself skips a paused policy (and says so).
    if backend.has_ledger and backend.ledger.is_paused(policy.name):
        raise OperatorError(f"policy {policy.name} is paused: `sweeper resume` it first")
    # Wait as long as the producer may run; never retried (a retry is a second run).
    client = backend.endpoints.lambda_client(
        BotoConfig(
            read_timeout=int(policy.producer_budget_seconds) + 60,
            retries={"total_max_attempts": 1},
        )
    )
    return invoke_producer(
        client,
        where.producer_function,
        policy.name,
        backend.clock(),
        region=backend.endpoints.region,
    )


def catch_up(backend: Backend, request: CatchUpRequest, *, actor: str) -> dict[str, Any]:
    """Release the scheduled runs missed in a range, in order, each with its own batch id."""
    from sweeper.operations.missed import CatchUpRun
    from sweeper.operations.missed import catch_up as release_missed
    from sweeper.sqs_queue import SqsPublisher

    policy = backend.policy(request.policy)
    where = backend.endpoints.policy(policy.name)
    if where.queue_url is None:
        raise OperatorError(f"the target has no work queue for {policy.name}")
    publisher = SqsPublisher(backend.endpoints.sqs(), where.queue_url)
    done = [0]

    def progress(run: CatchUpRun) -> None:
        done[0] += 1
        backend.tell(done[0])

    report = release_missed(
        policy,
        backend.ledger,
        publisher,
        request.since.astimezone(UTC),
        (request.until or backend.clock()).astimezone(UTC),
        actor=actor,
        clock=backend.clock,
        dry_run=request.dry_run,
        progress=progress,
    )
    return report.as_dict()


def prune(backend: Backend, request: PruneRequest, *, actor: str) -> dict[str, Any]:
    """Delete old settled rows in small batches, each its own short transaction, recorded
    first; failed jobs only past their policy's retention (all policies: the longest)."""
    from sweeper.prune.run import PruneReport, failed_retention
    from sweeper.prune.run import prune as run_prune

    chosen = [backend.policy(request.policy)] if request.policy else backend.config.policies

    def progress(report: PruneReport) -> None:
        backend.tell(report.batches)

    report = run_prune(
        backend.ledger,
        older_than=timedelta(days=request.older_than_days),
        failed_older_than=failed_retention(chosen),
        now=backend.clock(),
        actor=actor,
        reason=request.reason,
        policy=chosen[0].name if request.policy else None,
        batch_rows=request.batch_rows,
        progress=progress,
    )
    return report.as_dict()


def control(backend: Backend, request: ControlRequest, *, actor: str) -> dict[str, Any]:
    """cancel, hold, unhold or postpone the selected jobs; above the threshold only when
    confirmed (ConfirmationNeededError says how many match)."""
    from sweeper.models import JobSelection, JobStatus
    from sweeper.operations.jobs import CONFIRM_ABOVE, control_jobs

    policy = backend.policy(request.policy)
    selection = JobSelection(
        keys=request.keys,
        tenant_id=request.tenant_id,
        statuses=None
        if request.statuses is None
        else tuple(JobStatus(s) for s in request.statuses),
        outcomes=request.outcomes,
        due_from=request.due_from,
        due_before=request.due_before,
    )
    now = backend.clock()

    def run(dry: bool) -> Any:
        return control_jobs(
            request.action,
            policy.name,
            backend.ledger,
            selection,
            actor=actor,
            now=now,
            reason=request.reason,
            until=request.until,
            limit=request.limit,
            dry_run=dry,
            max_postpone=timedelta(days=policy.max_postpone_days),
        )

    if not request.dry_run and not request.confirmed:
        preview = run(True)
        if preview.moved > CONFIRM_ABOVE:
            raise ConfirmationNeededError(
                request.command, policy.name, preview.moved, CONFIRM_ABOVE
            )
    report: dict[str, Any] = run(request.dry_run).as_dict()
    return report

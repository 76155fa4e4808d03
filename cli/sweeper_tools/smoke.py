"""`sweeper smoke`: one canary obligation through every hop of a deployed (or local) stack.

The canary is a job for the policy's sandbox tenant (`[policies.smoke]`, refused without it) and
an object id no one has used: the prefix plus a fresh random id. Its hops, in order:

| hop      | passes when                                         | a failure means              |
|----------|-----------------------------------------------------|------------------------------|
| ledger   | the canary's row is written, pending and due now    | the ledger is unreachable    |
| queue    | the producer, released now, leased and published it | producer or SQS; paused      |
| consumer | a consumer took it (the vendor saw it, or it moved) | consumer stopped or failing  |
| vendor   | the answer is a success class (accepted, absent)    | the target refused, is down  |
| ledger   | the row is settled `succeeded`                      | the consumer cannot commit   |

The vendor hop is whatever the policy's action kind calls (its `target`: the vendor, bucket
acme-exports, function acme-x, callable m:f), named so in its failures; an s3_delete canary names
an object no one wrote, so its answer is absent, a success.

The consumer writes nothing between receiving a message and calling, so without a vendor audit
(`--api-url` naming a vendor with the simulator's `GET /_audit`) the consumer and vendor hops are
observed together, when the answer reaches the ledger; the report says so. Whatever happens, the
canary's row and its job events are deleted at the end. A message still queued then names no job:
the consumer drops it unanswered (`OrphanMessages`).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Final

from sweeper.config import Policy
from sweeper.errors import OperatorError, SweeperError
from sweeper.ledger.store import Ledger
from sweeper.models import ActionCall, Job, JobStatus, NewJob, identity_values, operation_key
from sweeper.params import ParamsError, ParamsRules
from sweeper.scheduling import schedule_jobs
from sweeper_tools.deploy import deploy_for

#: How often the ledger (and the vendor's audit) is read while the canary travels.
POLL_SECONDS = 0.1
HOPS = ("ledger", "queue", "consumer", "vendor", "ledger")

Release = Callable[[], dict[str, Any]]
#: The vendor's view of one key: (calls that arrived, calls that had an effect), or None when
#: the vendor has no audit.
VendorView = Callable[[str], tuple[int, int] | None]


class SmokeFailedError(SweeperError):
    """A hop failed; its name and what was seen."""

    def __init__(self, hop: str, detail: str) -> None:
        super().__init__(f"{hop}: {detail}")
        self.hop = hop
        self.detail = detail


@dataclass
class Hop:
    name: str
    passed: bool = False
    #: Seconds from the smoke's start to when this hop was seen done, and this hop's own part.
    at_seconds: float | None = None
    seconds: float | None = None
    detail: str = ""

    def as_dict(self) -> dict[str, Any]:
        return {
            "hop": self.name,
            "passed": self.passed,
            "at_seconds": self.at_seconds,
            "seconds": self.seconds,
            "detail": self.detail,
        }


@dataclass
class SmokeReport:
    policy: str
    operation_key: str
    hops: list[Hop] = field(default_factory=lambda: [Hop(name) for name in HOPS])
    failed_hop: str | None = None
    #: Which of the five hops failed (the ledger is both the first and the last).
    failed_index: int | None = None
    failure: str | None = None
    cleaned_up: bool = False
    batch_id: str | None = None
    #: What the canary's call is: its action kind's one-line description (never a secret).
    action: str = ""

    @property
    def passed(self) -> bool:
        return self.failed_hop is None and all(h.passed for h in self.hops)

    def as_dict(self) -> dict[str, Any]:
        return {
            "policy": self.policy,
            "action": self.action,
            "operation_key": self.operation_key,
            "passed": self.passed,
            "failed_hop": self.failed_hop,
            "failed_hop_number": None if self.failed_index is None else self.failed_index + 1,
            "failure": self.failure,
            "batch_id": self.batch_id,
            "cleaned_up": self.cleaned_up,
            "hops": [h.as_dict() for h in self.hops],
        }


class _Timeline:
    def __init__(self, report: SmokeReport, monotonic: Callable[[], float]) -> None:
        self.report = report
        self.monotonic = monotonic
        self.start = monotonic()
        self.last = 0.0

    def done(self, index: int, detail: str) -> None:
        hop = self.report.hops[index]
        if hop.passed:
            return
        at = round(self.monotonic() - self.start, 3)
        hop.passed, hop.at_seconds, hop.detail = True, at, detail
        hop.seconds = round(max(0.0, at - self.last), 3)
        self.last = at

    def fail(self, index: int, detail: str) -> SmokeFailedError:
        hop = self.report.hops[index]
        hop.detail = detail
        self.report.failed_hop, self.report.failure = hop.name, detail
        self.report.failed_index = index
        return SmokeFailedError(hop.name, detail)


def canary_key(policy: Policy, canary: NewJob) -> str:
    """The canary's operation key, its identity params included as any obligation's are."""
    identity = identity_values(canary.params, policy.identity_params)
    return operation_key(policy.name, canary.tenant_id, canary.object_id, policy.version, identity)


def canary_for(policy: Policy, due_at: datetime) -> NewJob:
    """A fresh canary under the policy's sandbox tenant; refused when it names none."""
    smoke = policy.smoke
    if smoke is None:
        raise OperatorError(
            f"policy {policy.name} names no sandbox target: add [policies.smoke] with the "
            "tenant_id the vendor keeps for tests (a smoke never targets a customer's tenant)"
        )
    object_id = smoke.object_prefix + uuid.uuid4().hex
    try:
        params = ParamsRules.of(policy).check(smoke.params)
    except ParamsError as exc:
        raise OperatorError(f"policy {policy.name}: [policies.smoke] params: {exc.reason}") from exc
    return NewJob(tenant_id=smoke.tenant_id, object_id=object_id, due_at=due_at, params=params)


def run_smoke(
    policy: Policy,
    ledger: Ledger,
    release: Release,
    *,
    clock: Callable[[], datetime],
    vendor: VendorView | None = None,
    timeout_seconds: float | None = None,
    monotonic: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> SmokeReport:
    """Send one canary through every hop, time each, and delete it; the report names the hop
    that failed (never raises for a failed hop)."""
    canary = canary_for(policy, clock())
    assert policy.smoke is not None
    key = canary_key(policy, canary)
    _check_canary_call(policy, canary, key)
    report = SmokeReport(policy.name, key, action=deploy_for(policy.action).describe())
    timeline = _Timeline(report, monotonic)
    limit = policy.smoke.timeout_seconds if timeout_seconds is None else timeout_seconds
    try:
        _travel(policy, ledger, release, canary, key, timeline, clock, vendor, limit, sleep)
    except SmokeFailedError:
        pass
    finally:
        try:
            report.cleaned_up = delete_canary(
                ledger,
                key,
                policy=policy.name,
                tenant_id=canary.tenant_id,
                prefix=policy.smoke.object_prefix,
            )
        except SweeperError:
            report.cleaned_up = False
    return report


def _check_canary_call(policy: Policy, canary: NewJob, key: str) -> None:
    """Refuse, before anything is written, a canary the policy's action could not send: its
    kind's implementation builds the call (nothing is sent) and names what it lacks."""
    call = ActionCall(
        key=key,
        idempotency_key=key,
        policy=policy.name,
        policy_version=policy.version,
        tenant_id=canary.tenant_id,
        object_id=canary.object_id,
        scope=policy.name,
        attempt=0,
        batch_id="smoke",
        # A canary's params, where obligations carry them (per-obligation params, issue 24).
        params=dict(canary.params),
    )
    problem = deploy_for(policy.action).call_problem(call)
    if problem is not None:
        raise OperatorError(
            f"policy {policy.name}: its action could not send a smoke canary ({problem}): the "
            "action's templates name a param the canary does not carry"
        )


def _travel(
    policy: Policy,
    ledger: Ledger,
    release: Release,
    canary: NewJob,
    key: str,
    timeline: _Timeline,
    clock: Callable[[], datetime],
    vendor: VendorView | None,
    limit: float,
    sleep: Callable[[float], None],
) -> None:
    # hop 1: the ledger takes the canary, due now
    try:
        result = schedule_jobs(ledger, policy, [canary], canary.due_at)
        job = ledger.get(key)
    except SweeperError as exc:
        raise timeline.fail(0, f"the canary could not be written ({type(exc).__name__})") from exc
    if result.inserted != 1 or job is None or job.status is not JobStatus.PENDING:
        raise timeline.fail(0, "the canary's row is not pending after the write")
    timeline.done(0, "canary scheduled, pending, due now")

    # hop 2: the producer, released now, leases and publishes it
    try:
        run = release()
    except SweeperError as exc:
        raise timeline.fail(1, f"the release failed: {exc}") from exc
    timeline.report.batch_id = run.get("batch_id")
    job = _read(ledger, key, timeline, 1)
    if job.status is JobStatus.PENDING and job.attempt_count == 0:
        raise timeline.fail(
            1,
            f"the producer did not publish the canary (run {run.get('batch_id')}: published "
            f"{run.get('published', 0)}, stop reason {run.get('stop_reason')})",
        )
    timeline.done(1, f"published by run {run.get('batch_id')}")
    leased_at = job.updated_at

    # hops 3-5: consumer, vendor, ledger, as they are seen. The "vendor" is whatever the
    # action's kind calls (the vendor, a bucket, a function, a callable): named by its kind.
    target = deploy_for(policy.action).target
    deadline = timeline.monotonic() + limit
    while True:
        job = _read(ledger, key, timeline, 4)
        view = vendor(key) if vendor is not None else None
        calls, effects = view if view is not None else (0, 0)
        moved = job.updated_at != leased_at or job.status is not JobStatus.LEASED
        answered = job.last_outcome is not None
        if calls > 0:
            timeline.done(2, f"the vendor received {calls} call(s) with the canary's key")
        elif answered or moved:
            note = "" if vendor is not None else " (seen with the vendor's answer: no audit)"
            timeline.done(2, "a consumer handled the canary" + note)
        if job.last_outcome is not None and not job.last_outcome.succeeded:
            code = f", {job.last_error_code}" if job.last_error_code else ""
            raise timeline.fail(
                3,
                f"{target} answered {job.last_outcome.value}{code} "
                f"(attempt {job.attempt_count}, status {job.status.value})",
            )
        if effects > 0 or answered:
            detail = f"answered {job.last_outcome.value}" if job.last_outcome else "effect made"
            timeline.done(3, detail)
        if job.status is JobStatus.SUCCEEDED:
            timeline.done(4, "settled succeeded")
            return
        if timeline.monotonic() >= deadline:
            break
        sleep(POLL_SECONDS)
    hops = timeline.report.hops
    if not hops[2].passed:
        raise timeline.fail(
            2,
            f"published but no consumer took the canary within {limit:g} s (consumer stopped, "
            "paused or failing? see ConsumerErrors and the consumer's log)",
        )
    if not hops[3].passed:
        raise timeline.fail(3, f"{target} did not answer within {limit:g} s")
    raise timeline.fail(
        4, f"{target} answered but the ledger still holds {job.status.value} after {limit:g} s"
    )


def _read(ledger: Ledger, key: str, timeline: _Timeline, hop: int) -> Job:
    try:
        job = ledger.get(key)
    except SweeperError as exc:
        raise timeline.fail(hop, f"the ledger could not be read ({type(exc).__name__})") from exc
    if job is None:
        raise timeline.fail(hop, "the canary's row is gone (pruned or deleted meanwhile?)")
    return job


# `sweeper smoke`'s cleanup: its canary row, in any status, and its job events, in one statement.
# Only a row under the policy's sandbox tenant whose object id carries the canary prefix matches,
# so a mistyped key can never delete a customer's obligation.
DELETE_CANARY: Final = """
WITH gone AS (
    DELETE FROM sweeper_jobs
    WHERE operation_key = %(key)s AND policy = %(policy)s AND tenant_id = %(tenant_id)s
      AND starts_with(object_id, %(prefix)s)
    RETURNING id
), events AS (
    DELETE FROM sweeper_job_events e USING gone WHERE e.job_id = gone.id
)
SELECT id FROM gone
"""


def delete_canary(ledger: Ledger, key: str, *, policy: str, tenant_id: str, prefix: str) -> bool:
    """Delete a smoke canary (and its job events) in any status; whether it was there."""
    with ledger.transaction() as conn:
        rows = conn.execute(
            DELETE_CANARY,
            {"key": key, "policy": policy, "tenant_id": tenant_id, "prefix": prefix},
        ).fetchall()
    return bool(rows)

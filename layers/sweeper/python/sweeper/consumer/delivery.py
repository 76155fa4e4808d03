"""Delivery: one record's way through admission, the guarded call and the outcome paths.

Delivery is at least once: warm → admission → perform → release → settle. A record is admitted
under every limit its call is under (sweeper.admission); a closed gate or a slot too far away
returns the message to the queue, visible again when the wait is over. Waiting never counts as
an attempt. The call runs inside idempotency (idempotency.py), which takes the admission after
its record is put (a duplicate spends no slot) and tells it when the request ended. Each
outcome class has its own path:

| class                | ledger                              | message                          |
|----------------------|-------------------------------------|----------------------------------|
| accepted, absent     | succeeded                           | deleted                          |
| permanent            | failed (terminal), one attempt      | deleted                          |
| throttled            | next attempt at the reopening       | back when the gate reopens       |
| auth                 | next attempt when the circuit ends  | back when the circuit ends       |
| snooze               | no attempt; next at Retry-After or  | back after that delay; the scope |
|                      | the policy's snooze_delay_seconds   | stays open for other jobs        |
| ... past max snooze  | failed ("snooze_exhausted")         | deleted                          |
| transient, unknown   | one attempt, retry after a backoff  | back after the backoff           |
| ... past max attempts| failed ("exhausted")                | deleted                          |
"""

from __future__ import annotations

import logging
import math
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import NoReturn

from aws_lambda_powertools.utilities.idempotency.exceptions import (
    IdempotencyAlreadyInProgressError,
)

from sweeper.admission import MIN_CALL_SECONDS as MIN_CALL_SECONDS
from sweeper.admission import BatchAdmission, Deferral
from sweeper.config import Policy
from sweeper.consumer.batch_log import BatchLog, Outcome
from sweeper.consumer.idempotency import Attempt, GuardedCall
from sweeper.errors import LedgerUnavailableError, RetryableActionError, SweeperError
from sweeper.ledger.store import Ledger
from sweeper.limiter import Limiter, retry_delay
from sweeper.models import (
    SETTLED_STATUSES,
    ActionCall,
    ActionResult,
    LedgerTarget,
    OutcomeClass,
)
from sweeper.observability import Metric, MetricSink
from sweeper.sqs_queue import Visibility

logger = logging.getLogger(__name__)

Clock = Callable[[], datetime]

#: Spreads the return of records that waited for a token, so they do not all come back at once.
RATE_DEFERRAL_JITTER_SECONDS = 0.5


def _nothing_to_warm(job: ActionCall, timeout_seconds: float | None) -> None:
    """A delivery's `warm` for an action with nothing to prepare."""


class Deferred(SweeperError):
    """The record goes back to the queue on purpose (a wait, not a failure)."""


@dataclass(frozen=True, slots=True)
class ConsumerDeps:
    policy: Policy
    ledger: Ledger
    guarded_call: GuardedCall
    clock: Clock
    metrics: MetricSink
    limiter: Limiter
    visibility: Visibility
    #: The action's `warm` (sweeper.actions.Action): run once per record before its admission.
    warm: Callable[[ActionCall, float | None], None] = _nothing_to_warm
    sleep: Callable[[float], None] = time.sleep
    now: Callable[[], float] = time.time  # epoch seconds, the limiter's clock
    rng: random.Random = field(default_factory=random.Random)
    #: The clock `ActionResult.request_sent_at` is read on.
    monotonic: Callable[[], float] = time.monotonic


class _Delivery:
    """One record's way through admission, the call and the outcome paths."""

    def __init__(
        self,
        job: ActionCall,
        receipt_handle: str,
        deps: ConsumerDeps,
        call_timeout: Callable[[], float | None],
        admissions: BatchAdmission,
        *,
        trace_id: str | None = None,
        outcomes: BatchLog,
    ) -> None:
        self.job = job
        # Its batch's log line counts how this record ended (batch_log.py), once.
        self.outcomes = outcomes
        self._ended: Outcome | None = None
        self.receipt = receipt_handle
        self.deps = deps
        self.call_timeout = call_timeout
        self.trace_id = trace_id
        self.ids = {
            "operation_key": job.key,
            "batch_id": job.batch_id,
            "scope": job.scope,
            "trace_id": trace_id,  # the producer's X-Ray trace, from the record's AWSTraceHeader
        }
        self.admission = admissions.call(job, self.ids)

    def handle(self, target: LedgerTarget, now: datetime) -> None:
        """Call for `target` (its row as the batch read it at `now`) if the ledger allows."""
        try:
            self._handle(target, now)
        except Deferred:
            self._end(Outcome.DEFERRED)  # unless it ended otherwise first (closed, snoozed)
            raise
        except LedgerUnavailableError:
            self._end(Outcome.LEDGER_UNREACHED)
            raise
        except Exception:
            self._end(Outcome.ERROR)
            raise
        finally:
            self.admission.done()

    def _handle(self, target: LedgerTarget, now: datetime) -> None:
        deps = self.deps
        status = target.status
        if status in SETTLED_STATUSES:
            deps.metrics.add_metric(Metric.DUPLICATES, "Count", 1)
            self._end(Outcome.DUPLICATE)
            logger.debug("already settled; acknowledged", extra={**self.ids, "status": status})
            return
        if not target.callable_at(now):
            # Held or cancelled by an operator as of the batch's ledger read: never called.
            # (A job whose time has not come never gets here: batch.py acknowledges it first.)
            self._end(Outcome.HELD)
            logger.debug(
                "held or cancelled; acknowledged uncalled", extra={**self.ids, "status": status}
            )
            return
        try:
            # The one call back up from inside the idempotency wrapper (docs/architecture.md)
            result = deps.guarded_call(self.job, Attempt(self._admit, self.admission.ended))
        except IdempotencyAlreadyInProgressError:
            # Another delivery of the same job is calling right now: come back after it.
            deps.metrics.add_metric(Metric.IN_PROGRESS_ELSEWHERE, "Count", 1)
            self._end(Outcome.IN_PROGRESS)
            self._return_in(math.ceil(self.call_timeout() or 5.0), outcome=None, code=None)
            raise
        except RetryableActionError as exc:
            self._unsettled(exc)
            return
        self._settled(result)

    # -- before the call ------------------------------------------------------------------------

    def _admit(self) -> float | None:
        """Warm the action, then wait for the call's admission: its timeout, or Deferred."""
        self._warm()
        admitted = self.admission.admit(self.call_timeout)
        if isinstance(admitted, Deferral):
            self._defer(admitted)
        return admitted.timeout

    def _warm(self) -> None:
        """Have the action prepare its call (the http kind: a connection to the vendor) before
        this record's slot is reserved, not when it comes: a connect made at the slot reaches
        the vendor one to three round trips late, past the arrival budget (config/quota.py
        `safe_headroom`); made here, it delays only the reservation, never the call after its
        slot. A thread whose pool already holds an idle connection pays a queue look and a
        zero-timeout poll. Never raises: a warm that fails only leaves the call as it was."""
        timeout = self.call_timeout()
        if timeout is not None and timeout < MIN_CALL_SECONDS:
            return  # no call will follow: the record goes back at once (admission)
        try:
            # at most the time a call would not need: the connect must not eat the call's time
            self.deps.warm(self.job, None if timeout is None else timeout - MIN_CALL_SECONDS)
        except Exception as exc:
            # A bug in a kind's warm (or a change in urllib3's pool) must not stop deliveries:
            # the call goes ahead as without the warm; the warning shows it by the error's type
            # alone (its message may hold the vendor's URL: no target values in diagnostics).
            logger.warning(
                "warming the action failed", extra={**self.ids, "error": type(exc).__name__}
            )

    def _defer(self, deferral: Deferral) -> NoReturn:
        """Return the message until the wait is over; the ledger learns when it may run."""
        if deferral.reason is None:
            self._return_in(0.0, outcome=None, code=None)
            raise Deferred("no Lambda time left for a call")
        wait = deferral.wait
        if deferral.reason == "rate":
            self.deps.metrics.add_metric(Metric.LIMITER_DEFERRALS, "Count", 1)
            wait += self.deps.rng.uniform(0.0, RATE_DEFERRAL_JITTER_SECONDS)
        # Visible a little early (whole seconds, rounded down): the consumer that receives it
        # waits out the rest in place, so the first call lands right at the reopening.
        self._return_in(math.floor(max(0.0, wait)), outcome=None, code=f"wait_{deferral.reason}")
        raise Deferred(f"scope {self.job.scope} {deferral.reason} for {wait:.1f}s")

    # -- after the call -------------------------------------------------------------------------

    def _settled(self, result: ActionResult) -> None:
        deps = self.deps
        deps.metrics.add_metric(Metric.ATTEMPTS_PREFIX + result.outcome.value, "Count", 1)
        now = deps.clock()
        log = {**self.ids, "outcome": result.outcome.value, "status_code": result.status_code}
        if result.outcome.succeeded:
            if deps.ledger.mark_succeeded(
                self.job.key, result.outcome, now, trace_id=self.trace_id
            ):
                deps.metrics.add_metric(Metric.SUCCEEDED, "Count", 1)
            else:
                deps.metrics.add_metric(Metric.DUPLICATES, "Count", 1)
            self._end(Outcome.SETTLED)
            logger.debug("settled", extra=log)  # a line per job at DEBUG only (batch_log.py)
            return
        # The only other settled class is permanent: terminal at once, never retried.
        deps.ledger.mark_failed(
            self.job.key,
            result.outcome,
            result.code,
            now,
            count_attempt=True,
            trace_id=self.trace_id,
        )
        deps.metrics.add_metric(Metric.TERMINAL_FAILURES, "Count", 1)
        self._end(Outcome.TERMINAL)
        logger.warning("terminal", extra={**log, "code": result.code})

    def _unsettled(self, exc: RetryableActionError) -> None:
        """Throttled, auth, snooze, transient or unknown: each returns the record its own way."""
        deps = self.deps
        outcome = OutcomeClass(exc.outcome)
        deps.metrics.add_metric(Metric.ATTEMPTS_PREFIX + outcome.value, "Count", 1)
        log: dict[str, object] = {**self.ids, "outcome": outcome.value, "code": exc.code}
        if outcome is OutcomeClass.SNOOZE:
            self._snooze(exc, log)
            return
        if outcome in (OutcomeClass.THROTTLED, OutcomeClass.AUTH):
            # A 429 closes the limit it names (else the narrowest, and the wider ones it
            # implicates), an auth failure the scope: until a reopening admission computes.
            closure = self.admission.close(outcome, exc.retry_after_seconds, exc.limit_value)
            if closure.rate_per_second is not None:  # an adaptive quota: this 429 said "slower"
                log["rate_per_second"] = round(closure.rate_per_second, 3)
            self._end(Outcome.SCOPE_CLOSED)
            logger.warning(
                "scope closed",
                extra={
                    **log,
                    "closed_at": round(closure.at, 4),
                    "closed_for_seconds": round(closure.delay, 3),
                    "limits_closed": closure.closed,
                },
            )
            wait = closure.until - closure.at
            self._return_in(math.floor(max(0.0, wait)), outcome=outcome, code=exc.code)
            raise Deferred(f"scope {self.job.scope} closed ({outcome.value})") from exc
        # transient or unknown: a real attempt, counted and backed off
        now_dt = deps.clock()
        attempts = deps.ledger.record_unsettled(
            self.job.key,
            now_dt,
            next_attempt_at=now_dt,
            lease_until=now_dt,
            outcome=outcome,
            code=exc.code,
            count_attempt=True,
            max_attempts=deps.policy.max_attempts,
            trace_id=self.trace_id,
        )
        if attempts is None:
            self._end(Outcome.DUPLICATE)
            return  # settled meanwhile by another delivery
        if attempts >= deps.policy.max_attempts:
            self._mark_terminal(outcome, "exhausted", now_dt)
            log["attempts"] = attempts
            self._count_terminal(Outcome.EXHAUSTED, Metric.EXHAUSTED, "attempts exhausted", log)
            return
        retry = deps.policy.retry
        delay = retry_delay(attempts, base=retry.base_seconds, cap=retry.cap_seconds, rng=deps.rng)
        deps.metrics.add_metric(Metric.RETRIES, "Count", 1)
        self._end(Outcome.RETRY)
        logger.info("will retry", extra={**log, "attempts": attempts, "delay": round(delay, 3)})
        self._return_in(delay, outcome=None, code=None)
        raise exc

    def _snooze(self, exc: RetryableActionError, log: dict[str, object]) -> None:
        """The vendor said "not now" for this job alone: it waits (the answer's Retry-After, or
        the policy's snooze delay) without spending an attempt and without closing its scope,
        until its snoozes would pass the policy's max_snooze_seconds: then it is terminal."""
        deps = self.deps
        policy = deps.policy
        delay = exc.retry_after_seconds
        if delay is None or delay <= 0:
            delay = policy.snooze_delay_seconds
        delay = float(math.ceil(delay))  # whole seconds: the message's visibility is in seconds
        now = deps.clock()
        snoozed = deps.ledger.record_snooze(
            self.job.key,
            now,
            seconds=delay,
            lease_until=now + timedelta(seconds=delay + policy.lease_seconds),
            code=exc.code,
            max_snooze_seconds=policy.max_snooze_seconds,
            trace_id=self.trace_id,
        )
        if snoozed is None:
            if self._mark_terminal(OutcomeClass.SNOOZE, "snooze_exhausted", now):
                why = "snoozed past max_snooze_seconds"
                self._count_terminal(Outcome.SNOOZE_EXHAUSTED, Metric.SNOOZE_EXHAUSTED, why, log)
            self._end(Outcome.DUPLICATE)  # unless it ended terminal just above
            return  # terminal now, or settled meanwhile by another delivery: acknowledged
        deps.metrics.add_metric(Metric.SNOOZES, "Count", 1)
        self._end(Outcome.SNOOZED)
        logger.debug("snoozed", extra={**log, "delay": delay, "snoozed_seconds": round(snoozed, 3)})
        self.deps.visibility.hide_for(self.receipt, delay)
        raise Deferred(f"job {self.job.key} snoozed for {delay:g}s") from exc

    def _mark_terminal(self, outcome: OutcomeClass, code: str, now: datetime) -> bool:
        """Fail the job for good, its last attempt counted already; False if it was settled."""
        return self.deps.ledger.mark_failed(
            self.job.key, outcome, code, now, count_attempt=False, trace_id=self.trace_id
        )

    def _count_terminal(self, end: Outcome, metric: str, why: str, log: dict[str, object]) -> None:
        """Count and log a job made terminal by running out (of attempts, of snoozes)."""
        self.deps.metrics.add_metric(Metric.TERMINAL_FAILURES, "Count", 1)
        self.deps.metrics.add_metric(metric, "Count", 1)
        self._end(end)
        logger.warning(f"{why}; terminal", extra=log)

    def _end(self, outcome: Outcome) -> None:
        """Count how this record ended in its batch's line, the first time only."""
        if self._ended is None:
            self._ended = outcome
            self.outcomes.count(outcome, self.job.key)

    def _return_in(self, seconds: float, *, outcome: OutcomeClass | None, code: str | None) -> None:
        """Record when the job may run again, and hide the message until then.

        Both in whole seconds, rounded up: SQS hides a message for whole seconds, and a
        message shown before its ledger time would be acknowledged uncalled as not yet due
        (batch.py), leaving the job to wait for its lease to expire.
        """
        seconds = math.ceil(max(0.0, seconds))
        now = self.deps.clock()
        at = now + timedelta(seconds=seconds)
        self.deps.ledger.record_unsettled(
            self.job.key,
            now,
            next_attempt_at=at,
            lease_until=at + timedelta(seconds=self.deps.policy.lease_seconds),
            outcome=outcome,
            code=code,
            # a wait (no outcome) keeps the trace of the delivery that last had one
            trace_id=None if outcome is None else self.trace_id,
        )
        self.deps.visibility.hide_for(self.receipt, seconds)

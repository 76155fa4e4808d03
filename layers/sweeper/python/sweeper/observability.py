"""Metric names, the small interface logic uses to count things (Powertools Metrics fits it),
and the functions' X-Ray tracer."""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from functools import lru_cache
from types import TracebackType
from typing import TYPE_CHECKING, Any, Protocol, Self

from aws_lambda_powertools.metrics import MetricUnit

if TYPE_CHECKING:
    from aws_lambda_powertools import Tracer

METRICS_NAMESPACE = "Sweeper"
#: The units Powertools' Metrics (the production sink) accepts: a member's name or its value.
CLOUDWATCH_UNITS = frozenset(MetricUnit.__members__) | frozenset(u.value for u in MetricUnit)


#: What the X-Ray SDK instruments: every AWS call (botocore: SQS, DynamoDB, Secrets Manager,
#: Lambda), and nothing else. No HTTP client is patched: X-Ray's patches record each request's
#: URL, and a vendor URL holds ids and params. The vendor call is traced by `XRaySpans`
#: instead, by its template. The ledger's SQL is timed by the function's own segment.
TRACED_MODULES = ("botocore",)


@lru_cache(maxsize=1)
def tracer() -> Tracer:
    """The functions' Powertools Tracer, one per execution environment.

    Off outside Lambda (no `_X_AMZN_TRACE_ID`) or with `POWERTOOLS_TRACE_DISABLED`, so tests,
    the CLI and the local stack need no X-Ray daemon. Imported here, not at module level: only
    the handlers pay for the X-Ray SDK.
    """
    from aws_lambda_powertools import Tracer

    return Tracer(patch_modules=TRACED_MODULES)


class _XRaySpan:
    """A vendor call's subsegment: its outcome's code and status, never an exception (whose
    text may name the host, a tenant's in the per-tenant form)."""

    def __init__(self, subsegment: Any) -> None:
        self._subsegment = subsegment

    def ended(self, code: str, status_code: int | None) -> None:
        if self._subsegment is None:  # no segment to hang it on (the recorder said so)
            return
        if status_code is not None:
            self._subsegment.put_http_meta("status", status_code)  # sets error/fault/throttle
        else:
            self._subsegment.put_annotation("failure", code)
            self._subsegment.add_fault_flag()


class XRaySpans:
    """Each vendor call as an X-Ray subsegment of the invocation (namespace `remote`, so the
    service map shows the vendor), named by the policy's action, its `http.request.url` the
    URL's template with only `{api_url}` filled (`sweeper.actions.spans.CallSpans`)."""

    def __init__(self, recorder: Any) -> None:
        self._recorder = recorder

    @contextmanager
    def __call__(self, name: str, *, method: str, url_template: str) -> Iterator[_XRaySpan]:
        escaped: Exception | None = None
        with self._recorder.in_subsegment(name=name, namespace="remote") as subsegment:
            if subsegment is not None:
                subsegment.put_http_meta("method", method)
                subsegment.put_http_meta("url", url_template)
            try:
                yield _XRaySpan(subsegment)
            except Exception as exc:
                # Recorded by its type only, and raised past the subsegment: the SDK would
                # record its message and stack, which may hold the filled URL.
                escaped = exc
                if subsegment is not None:
                    subsegment.add_fault_flag()
                    subsegment.put_annotation("failure", type(exc).__name__)
        if escaped is not None:
            raise escaped


def vendor_spans() -> XRaySpans | None:
    """The vendor call's spans on the functions' tracer; None when tracing is off."""
    current = tracer()
    return None if current.disabled else XRaySpans(current.provider)


class MetricSink(Protocol):
    def add_metric(self, name: str, unit: str, value: float) -> None: ...


def add_counts(sink: MetricSink, counts: Iterable[tuple[str, float]]) -> None:
    """Add each count of a run that is not zero. CloudWatch bills a custom metric for every
    hour it is sent in, a zero as much as any other value; the alarms and the stall checks
    read a missing count as zero (`FILL(..., 0)`, missing data not breaching), so an idle
    run costs nothing. What an operator loses: a graph shows a gap, not a zero line, for a
    run that found nothing (a run that did not happen shows on its errors and dead letters)."""
    for name, value in counts:
        if value:
            sink.add_metric(name, "Count", value)


class Metric:
    """Every metric sweeper emits. Alarms (infra/) and the demo report read these names."""

    # producer
    RECLAIMED = "LeasesReclaimed"
    DISCOVERED = "Discovered"
    PUBLISHED = "Published"
    PUBLISH_FAILURES = "PublishFailures"
    RELEASED = "Released"
    OLDEST_ELIGIBLE_AGE = "OldestEligibleAgeSeconds"
    DUPLICATE_INVOCATIONS = "DuplicateInvocations"
    # discovery
    DISCOVERY_SCANNED = "DiscoveryScanned"
    DISCOVERY_INSERTED = "DiscoveryInserted"
    DISCOVERY_MOVED_EARLIER = "DiscoveryMovedEarlier"
    DISCOVERY_REJECTED = "DiscoveryRejected"
    #: 1 when a run completed its pass: the discovery lag alarm watches for its absence.
    DISCOVERY_PASSES_COMPLETED = "DiscoveryPassesCompleted"
    #: Seconds since the policy's last complete pass, reported by every run (0 when it completed).
    DISCOVERY_LAG = "DiscoveryLagSeconds"
    # redrive
    REDRIVE_MOVED = "Moved"
    REDRIVE_DROPPED_SETTLED = "DroppedSettled"
    REDRIVE_KEPT_TERMINAL = "KeptTerminal"
    REDRIVE_KEPT_CLOSED = "KeptClosed"
    REDRIVE_KEPT_FOR_OPERATOR = "KeptForOperator"
    REDRIVE_ERRORS = "RedriveErrors"
    # retention (the scheduled prune)
    PRUNED_JOBS = "PrunedJobs"
    PRUNED_JOB_EVENTS = "PrunedJobEvents"
    PRUNED_RUNS = "PrunedRuns"
    PRUNED_OPERATOR_ACTIONS = "PrunedOperatorActions"
    PRUNE_INCOMPLETE = "PruneIncomplete"  # 1 when the budget stopped a run with rows left (alarm)
    # consumer
    ATTEMPTS_PREFIX = "Attempts_"  # + outcome class, e.g. Attempts_accepted
    SUCCEEDED = "Succeeded"
    TERMINAL_FAILURES = "TerminalFailures"
    RETRIES = "Retries"
    DUPLICATES = "Duplicates"
    MALFORMED = "MalformedMessages"
    ORPHANS = "OrphanMessages"
    #: a body whose target (policy, version, tenant, object, scope) is not its key's ledger row
    MISMATCHED = "MismatchedMessages"
    #: a delivery of a pending or leased job whose time (due, next attempt, postponement) has
    #: not come: acknowledged uncalled, the ledger row left as it was
    NOT_YET_DUE = "NotYetDue"
    IN_PROGRESS_ELSEWHERE = "InProgressElsewhere"
    THROTTLE_EVENTS = "ThrottleEvents"  # the vendor said "slow down": the gate closed
    LEARNED_CLOSURES = "LearnedClosures"  # the vendor said none remain until its reset
    #: an answer with a limit or cost value that could not be read (sweeper.vendor_limits):
    #: left aside, the last good state stands; logged with the call's ids
    VENDOR_VALUES_IGNORED = "VendorValuesIgnored"
    #: a learned scope's slot given up at its last look: granted at a rate another consumer has
    #: lowered since (sweeper.admission.learned); the call was admitted again
    STALE_SLOTS = "StaleSlots"
    #: A shared quota's split (sweeper.admission.shared): sweeper's and the others' share of
    #: the quota in the vendor's window, in percent, as a consumer last saw it when it wrote
    SHARED_QUOTA_OWN = "SharedQuotaOwnPercent"
    SHARED_QUOTA_OTHERS = "SharedQuotaOthersPercent"
    GATE_DEFERRALS = "GateDeferrals"  # a record returned to the queue because its gate is closed
    BUDGET_DEFERRALS = "BudgetDeferrals"  # a record returned until its budget's next unit or window
    LIMITER_WAITS = "LimiterWaits"  # a record that waited (in place or in the queue) for a token
    LIMITER_DEFERRALS = "LimiterDeferrals"  # ... of those, returned to the queue
    LATE_SLOTS = "LateSlots"  # slots let go unused because granted after their time
    #: calls whose request left later than their slot allows: a slot of the scope spent empty
    LATE_SENDS = "LateSends"
    #: slots a batch took from its scopes and sent a call in, emitted once per batch: against
    #: the quota's slots per period it is the limiter's utilization (infra/observability.py)
    LIMITER_SLOTS_USED = "LimiterSlotsUsed"
    AUTH_CIRCUIT_OPEN = "AuthCircuitOpen"  # an auth failure opened the scope's circuit (alarm)
    EXHAUSTED = "Exhausted"
    #: The vendor snoozed a job ("not now": a status mapped to snooze): deferred, no attempt
    #: spent, the scope left open ...
    SNOOZES = "Snoozes"
    #: ... and a job that would pass the policy's max_snooze_seconds, ended terminal (alarm).
    SNOOZE_EXHAUSTED = "SnoozeExhausted"
    #: Seconds one delivery held its execution environment (limiter waits included); one value
    #: per record, so CloudWatch keeps percentiles (`sweeper ramp-check` reads p50 and p95).
    PROCESSING_SECONDS = "ProcessingSeconds"
    #: A record returned on its last allowed receive: the queue moves it to the DLQ next.
    #: (SQS's own NumberOfMessagesSent does not count messages moved to a DLQ.)
    DEAD_LETTER_BOUND = "DeadLetterBound"
    #: Records (consumer or intake) returned because the ledger could not be reached; their
    #: visibility is shortened to seconds (sweeper.returns).
    LEDGER_UNREACHED = "LedgerUnreached"

    # intake (hints from the webhook, files and EventBridge)
    HINTS_INSERTED = "HintsInserted"
    HINTS_MOVED_EARLIER = "HintsMovedEarlier"
    HINTS_UNCHANGED = "HintsUnchanged"
    INTAKE_REJECTED = "IntakeRejected"  # messages dropped unread: malformed, never retried
    INTAKE_FAILED = "IntakeFailed"  # messages returned to the queue: their upsert did not commit
    # webhook
    WEBHOOK_PREFIX = "Webhook_"  # + answer code, e.g. Webhook_accepted, Webhook_stale_timestamp
    WEBHOOK_HINTS_ACCEPTED = "WebhookHintsAccepted"


#: Metrics read with a statistic other than Sum (infra/observability): each value must reach
#: CloudWatch as it was added, never summed with others. AuthCircuitOpen's alarm reads the
#: consumer's count with Maximum; the other two are seconds (producer, discovery), listed so
#: the set is every such name (tests/infra checks it against the alarms).
NOT_SUMMED = frozenset({Metric.AUTH_CIRCUIT_OPEN, Metric.OLDEST_ELIGIBLE_AGE, Metric.DISCOVERY_LAG})


class SummedCounts:
    """A MetricSink that adds up each "Count" metric and hands `inner` one value per name at
    `flush` (or on leaving its `with` block, raising or not); every other metric (another unit,
    or a name in NOT_SUMMED) goes on at once. Safe to share between threads: one lock guards
    the sums and every call to `inner`.

    Why: Powertools' `add_metric` costs about 65 us even with debug logs off (it formats a
    debug line holding a repr of the metric's values, up to 100 of them), and when a metric
    reaches 100 values it serializes and prints the whole metric set mid-invocation. A
    consumer batch adds about five counts per job. The Sum CloudWatch reads is the same
    either way; only a statistic over single values (Maximum, SampleCount, a percentile)
    would see a difference, hence NOT_SUMMED and units other than Count passing through.
    """

    def __init__(self, inner: MetricSink) -> None:
        self._inner = inner
        self._sums: dict[str, float] = {}
        self._lock = threading.Lock()

    def add_metric(self, name: str, unit: str, value: float) -> None:
        with self._lock:
            if unit == "Count" and name not in NOT_SUMMED:
                self._sums[name] = self._sums.get(name, 0.0) + value
            else:
                self._inner.add_metric(name, unit, value)

    def flush(self) -> None:
        """Hand `inner` each summed name once (call it before the inner sink is flushed)."""
        with self._lock:
            sums, self._sums = self._sums, {}
            for name, total in sums.items():
                self._inner.add_metric(name, "Count", total)

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.flush()  # what was counted before an error is emitted too

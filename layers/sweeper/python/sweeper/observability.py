"""Metric names and the small interface logic uses to count things (Powertools Metrics fits it)."""

from __future__ import annotations

from typing import Protocol

METRICS_NAMESPACE = "Sweeper"


class MetricSink(Protocol):
    def add_metric(self, name: str, unit: str, value: float) -> None: ...


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
    # redrive
    REDRIVE_MOVED = "Moved"
    REDRIVE_DROPPED_SETTLED = "DroppedSettled"
    REDRIVE_KEPT_TERMINAL = "KeptTerminal"
    REDRIVE_KEPT_CLOSED = "KeptClosed"
    REDRIVE_ERRORS = "RedriveErrors"
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
    IN_PROGRESS_ELSEWHERE = "InProgressElsewhere"
    THROTTLE_EVENTS = "ThrottleEvents"  # the vendor said "slow down": the gate closed
    GATE_DEFERRALS = "GateDeferrals"  # a record returned to the queue because its gate is closed
    LIMITER_WAITS = "LimiterWaits"  # a record that waited (in place or in the queue) for a token
    LIMITER_DEFERRALS = "LimiterDeferrals"  # ... of those, returned to the queue
    LATE_SLOTS = "LateSlots"  # slots let go unused because granted after their time
    AUTH_CIRCUIT_OPEN = "AuthCircuitOpen"  # an auth failure opened the scope's circuit (alarm)
    EXHAUSTED = "Exhausted"
    #: Seconds one delivery held its execution environment (limiter waits included); one value
    #: per record, so CloudWatch keeps percentiles (`sweeper ramp-check` reads p50 and p95).
    PROCESSING_SECONDS = "ProcessingSeconds"
    #: A record returned on its last allowed receive: the queue moves it to the DLQ next.
    #: (SQS's own NumberOfMessagesSent does not count messages moved to a DLQ.)
    DEAD_LETTER_BOUND = "DeadLetterBound"


class CountingSink:
    """A MetricSink that keeps totals in memory (tests, the local stack)."""

    def __init__(self) -> None:
        self.totals: dict[str, float] = {}

    def add_metric(self, name: str, unit: str, value: float) -> None:
        self.totals[name] = self.totals.get(name, 0.0) + value

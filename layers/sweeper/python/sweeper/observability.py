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
    # consumer
    ATTEMPTS_PREFIX = "Attempts_"  # + outcome class, e.g. Attempts_accepted
    SUCCEEDED = "Succeeded"
    TERMINAL_FAILURES = "TerminalFailures"
    RETRIES = "Retries"
    DUPLICATES = "Duplicates"
    MALFORMED = "MalformedMessages"
    ORPHANS = "OrphanMessages"
    IN_PROGRESS_ELSEWHERE = "InProgressElsewhere"


class CountingSink:
    """A MetricSink that keeps totals in memory (tests, the local stack)."""

    def __init__(self) -> None:
        self.totals: dict[str, float] = {}

    def add_metric(self, name: str, unit: str, value: float) -> None:
        self.totals[name] = self.totals.get(name, 0.0) + value

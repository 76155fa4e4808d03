"""`sweeper ramp-check`: measure before raising a policy's consumer concurrency.

Four figures over a window decide whether more execution environments are safe: the share of
vendor calls answered 429, the share of deliveries that were duplicates, the share of jobs sent
towards the DLQ, and the p95 time one delivery holds its environment. They come from the metrics
the consumer emits (namespace `Sweeper`, dimensions `service` and `policy`): CloudWatch
GetMetricData on AWS, the EMF lines of the local stack's function log locally. `decide` is pure:
the thresholds below are the whole rule, and docs/runbook.md ("Raising concurrency") quotes them.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from sweeper.config import ConsumerConfig
from sweeper.limits import MAX_MAXIMUM_CONCURRENCY, MIN_MAXIMUM_CONCURRENCY
from sweeper.models import OutcomeClass
from sweeper.observability import METRICS_NAMESPACE, Metric

#: Fewer vendor calls than this in the window is not evidence either way: measure longer.
MIN_CALLS = 200
#: Share of calls the vendor answered 429: above the first, hold; above the second, lower.
HOLD_THROTTLED_RATE = 0.01
LOWER_THROTTLED_RATE = 0.05
#: Duplicate deliveries per delivery that reached the ledger: above this, hold (redeliveries
#: are rising: visibility timeouts or leases too short for the time a delivery takes).
HOLD_DUPLICATE_RATE = 0.01
#: Share of jobs sent towards the DLQ: above the first, hold; above the second, lower.
HOLD_DEAD_LETTER_SHARE = 0.001
LOWER_DEAD_LETTER_SHARE = 0.01
#: A batch handles its records one after another: p95 x batch size must stay within this
#: fraction of the consumer timeout (hold above it; lower when it reaches the whole timeout).
HOLD_P95_TIMEOUT_FRACTION = 0.5
#: A raise at most doubles the environments, and adds at most this many.
MAX_RAISE_FACTOR = 2
MAX_RAISE_STEP = 8

Verdict = Literal["raise", "hold", "lower", "insufficient"]
#: The outcome classes whose attempts are vendor calls (every class is one).
CALL_OUTCOMES = tuple(o.value for o in OutcomeClass)


@dataclass(frozen=True, slots=True)
class RampFigures:
    """What the consumer counted in the window (sums), and its delivery-time percentiles."""

    hours: float
    attempts: dict[str, float] = field(default_factory=dict)  # by outcome class
    succeeded: float = 0.0
    terminal: float = 0.0
    duplicates: float = 0.0
    dead_letter_bound: float = 0.0
    p50_seconds: float | None = None
    p95_seconds: float | None = None
    source: str = ""

    @property
    def calls(self) -> float:
        return sum(self.attempts.values())

    @property
    def throttled_rate(self) -> float:
        return _share(self.attempts.get(OutcomeClass.THROTTLED.value, 0.0), self.calls)

    @property
    def duplicate_rate(self) -> float:
        return _share(self.duplicates, self.succeeded + self.terminal + self.duplicates)

    @property
    def dead_letter_share(self) -> float:
        return _share(
            self.dead_letter_bound, self.succeeded + self.terminal + self.dead_letter_bound
        )

    def as_dict(self) -> dict[str, Any]:
        return {
            "hours": self.hours,
            "source": self.source,
            "calls": self.calls,
            "attempts": dict(sorted(self.attempts.items())),
            "succeeded": self.succeeded,
            "terminal": self.terminal,
            "duplicates": self.duplicates,
            "dead_letter_bound": self.dead_letter_bound,
            "throttled_rate": round(self.throttled_rate, 6),
            "duplicate_rate": round(self.duplicate_rate, 6),
            "dead_letter_share": round(self.dead_letter_share, 6),
            "p50_seconds": self.p50_seconds,
            "p95_seconds": self.p95_seconds,
        }


def _share(part: float, whole: float) -> float:
    return part / whole if whole > 0 else 0.0


@dataclass(frozen=True, slots=True)
class RampDecision:
    """The verdict, the environments now, and the caps to set (reserved and event source)."""

    verdict: Verdict
    current: int
    recommended: int
    reasons: tuple[str, ...]

    @property
    def reserved_concurrency(self) -> int:
        return self.recommended

    @property
    def max_concurrency(self) -> int:
        """The event source's maximum: the same, but never below Lambda's floor of 2."""
        return max(MIN_MAXIMUM_CONCURRENCY, self.recommended)

    def as_dict(self) -> dict[str, Any]:
        return {
            "verdict": self.verdict,
            "current_environments": self.current,
            "recommended_environments": self.recommended,
            "reserved_concurrency": self.reserved_concurrency,
            "max_concurrency": self.max_concurrency,
            "reasons": list(self.reasons),
        }


def decide(figures: RampFigures, consumer: ConsumerConfig, rate_per_second: float) -> RampDecision:
    """Whether raising the consumer's concurrency is safe, and to what (pure; thresholds above).

    Order: too little evidence; any figure past a lower threshold lowers (to half, at least 1);
    any past a hold threshold holds; environments that already keep the quota busy hold (Little's
    law: the quota needs `rate x p50` environments, each handling one record at a time); else
    raise towards that need, at most doubling and by at most MAX_RAISE_STEP.
    """
    current = consumer.environments
    if figures.calls < MIN_CALLS:
        return RampDecision(
            "insufficient",
            current,
            current,
            (
                f"{figures.calls:.0f} vendor call(s) in {figures.hours:g} h, fewer than "
                f"{MIN_CALLS}: measure over a longer window or after a busier run",
            ),
        )
    budget = consumer.timeout_seconds / consumer.batch_size
    lowers: list[str] = []
    holds: list[str] = []
    if figures.throttled_rate > LOWER_THROTTLED_RATE:
        lowers.append(_over("429 rate", figures.throttled_rate, LOWER_THROTTLED_RATE))
    elif figures.throttled_rate > HOLD_THROTTLED_RATE:
        holds.append(_over("429 rate", figures.throttled_rate, HOLD_THROTTLED_RATE))
    if figures.dead_letter_share > LOWER_DEAD_LETTER_SHARE:
        lowers.append(_over("DLQ share", figures.dead_letter_share, LOWER_DEAD_LETTER_SHARE))
    elif figures.dead_letter_share > HOLD_DEAD_LETTER_SHARE:
        holds.append(_over("DLQ share", figures.dead_letter_share, HOLD_DEAD_LETTER_SHARE))
    if figures.duplicate_rate > HOLD_DUPLICATE_RATE:
        holds.append(_over("duplicate rate", figures.duplicate_rate, HOLD_DUPLICATE_RATE))
    p95, p50 = figures.p95_seconds, figures.p50_seconds
    if p95 is None or p50 is None:
        holds.append("no delivery times in the window (ProcessingSeconds): cannot size a raise")
    elif p95 >= budget:
        lowers.append(
            f"p95 delivery time {p95:.3f} s x batch size {consumer.batch_size} reaches the "
            f"consumer timeout {consumer.timeout_seconds} s: records return uncalled"
        )
    elif p95 > HOLD_P95_TIMEOUT_FRACTION * budget:
        holds.append(
            f"p95 delivery time {p95:.3f} s x batch size {consumer.batch_size} is above "
            f"{HOLD_P95_TIMEOUT_FRACTION:.0%} of the consumer timeout {consumer.timeout_seconds} s"
        )
    if lowers:
        return RampDecision("lower", current, max(1, current // 2), tuple(lowers + holds))
    if holds:
        return RampDecision("hold", current, current, tuple(holds))
    assert p50 is not None  # no p50 holds above
    needed = max(1, math.ceil(rate_per_second * p50))
    if current >= needed:
        return RampDecision(
            "hold",
            current,
            current,
            (
                f"the quota bounds throughput: {rate_per_second:g} calls/s x p50 {p50:.3f} s "
                f"needs {needed} environment(s) and {current} run; more would wait for the "
                "limiter",
            ),
        )
    target = min(current * MAX_RAISE_FACTOR, current + MAX_RAISE_STEP, needed)
    target = min(max(target, current + 1), MAX_MAXIMUM_CONCURRENCY)
    return RampDecision(
        "raise",
        current,
        target,
        (
            f"every figure within its threshold; {rate_per_second:g} calls/s x p50 {p50:.3f} s "
            f"needs {needed} environment(s) and {current} run",
        ),
    )


def _over(name: str, value: float, threshold: float) -> str:
    return f"{name} {value:.2%} is above {threshold:.2%}"


# -- reading the figures --------------------------------------------------------------------------

#: The metrics summed over the window, and the RampFigures field each fills.
_SUMMED = {
    Metric.SUCCEEDED: "succeeded",
    Metric.TERMINAL_FAILURES: "terminal",
    Metric.DUPLICATES: "duplicates",
    Metric.DEAD_LETTER_BOUND: "dead_letter_bound",
}


def percentile(values: list[float], p: float) -> float | None:
    """The nearest-rank percentile (p in 0..100) of `values`, or None when there are none."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, math.ceil(p / 100 * len(ordered)))
    return ordered[rank - 1]


def figures_from_emf(
    lines: Iterable[str], policy: str, start: datetime, end: datetime, *, source: str = "emf"
) -> RampFigures:
    """Sum the policy's metrics from EMF documents stamped within [start, end) (the local stack
    writes its functions' output, EMF included, to one log file); other lines are skipped."""
    low, high = start.timestamp() * 1000, end.timestamp() * 1000
    sums: dict[str, float] = {}
    times: list[float] = []
    for line in lines:
        if '"_aws"' not in line:
            continue
        try:
            doc = json.loads(line)
            meta = doc["_aws"]
            stamp = float(meta["Timestamp"])
            directives = meta["CloudWatchMetrics"]
        except (ValueError, KeyError, TypeError):
            continue
        if doc.get("policy") != policy or not low <= stamp < high:
            continue
        for directive in directives:
            if directive.get("Namespace") != METRICS_NAMESPACE:
                continue
            for metric in directive.get("Metrics", []):
                name = metric.get("Name")
                values = doc.get(name)
                found = values if isinstance(values, list) else [values]
                numbers = [float(v) for v in found if isinstance(v, int | float)]
                if name == Metric.PROCESSING_SECONDS:
                    times.extend(numbers)
                else:
                    sums[name] = sums.get(name, 0.0) + sum(numbers)
    return _figures(sums, percentile(times, 50), percentile(times, 95), start, end, source)


def figures_from_cloudwatch(
    client: Any,
    policy: str,
    start: datetime,
    end: datetime,
    *,
    service: str = "sweeper",
) -> RampFigures:
    """The same figures from CloudWatch GetMetricData: sums over the window, and p50/p95 of
    ProcessingSeconds (over several periods, the largest: the cautious reading)."""
    period = max(60, math.ceil((end - start).total_seconds() / 60) * 60)
    dimensions = [{"Name": "service", "Value": service}, {"Name": "policy", "Value": policy}]
    names = [Metric.ATTEMPTS_PREFIX + o for o in CALL_OUTCOMES] + list(_SUMMED)
    queries: list[dict[str, Any]] = []
    ids: dict[str, tuple[str, str]] = {}
    for i, (name, stat) in enumerate(
        [(n, "Sum") for n in names]
        + [(Metric.PROCESSING_SECONDS, "p50"), (Metric.PROCESSING_SECONDS, "p95")]
    ):
        query_id = f"m{i}"
        ids[query_id] = (name, stat)
        queries.append(
            {
                "Id": query_id,
                "MetricStat": {
                    "Metric": {
                        "Namespace": METRICS_NAMESPACE,
                        "MetricName": name,
                        "Dimensions": dimensions,
                    },
                    "Period": period,
                    "Stat": stat,
                },
                "ReturnData": True,
            }
        )
    values: dict[tuple[str, str], list[float]] = {}
    paginator = client.get_paginator("get_metric_data")
    for page in paginator.paginate(
        MetricDataQueries=queries,
        StartTime=start,
        EndTime=end,
    ):
        for result in page.get("MetricDataResults", []):
            values.setdefault(ids[result["Id"]], []).extend(result.get("Values", []))
    sums = {name: sum(v) for (name, stat), v in values.items() if stat == "Sum"}
    p50 = values.get((Metric.PROCESSING_SECONDS, "p50"))
    p95 = values.get((Metric.PROCESSING_SECONDS, "p95"))
    return _figures(
        sums, max(p50) if p50 else None, max(p95) if p95 else None, start, end, "cloudwatch"
    )


def _figures(
    sums: dict[str, float],
    p50: float | None,
    p95: float | None,
    start: datetime,
    end: datetime,
    source: str,
) -> RampFigures:
    attempts = {
        outcome: sums[Metric.ATTEMPTS_PREFIX + outcome]
        for outcome in CALL_OUTCOMES
        if sums.get(Metric.ATTEMPTS_PREFIX + outcome)
    }
    counted = {attr: sums.get(name, 0.0) for name, attr in _SUMMED.items()}
    return RampFigures(
        hours=round((end - start).total_seconds() / 3600, 3),
        attempts=attempts,
        p50_seconds=p50,
        p95_seconds=p95,
        source=source,
        **counted,
    )

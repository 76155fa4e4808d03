"""Discovery Lambda: EventBridge Scheduler → one reconciliation pass (or its budget's share)
over the policy's system of record, upserting obligations into the ledger.

A run that could not read its source raises after recording its report, so the function's
error alarm fires; the next scheduled run resumes at the committed cursor.
"""

from typing import Any

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.parser import parse
from aws_lambda_powertools.utilities.typing import LambdaContext

from sweeper import observability, runtime
from sweeper.discovery import wiring
from sweeper.discovery.run import DUPLICATE, DiscoveryReport, run_discovery
from sweeper.discovery.store import DiscoveryStore
from sweeper.errors import ConfigError, DiscoveryFailedError
from sweeper.events import ScheduleEvent
from sweeper.observability import METRICS_NAMESPACE, Metric, add_counts

logger = Logger()
tracer = observability.tracer()
metrics = Metrics(namespace=METRICS_NAMESPACE)


@metrics.log_metrics
@logger.inject_lambda_context(log_event=False)
@tracer.capture_lambda_handler(capture_response=False)  # payloads may hold customer ids
@runtime.ends_ledger_run  # no session kept between runs when the cluster may pause
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    settings = runtime.settings()
    schedule = parse(event=event, model=ScheduleEvent)
    policy = settings.policy
    if schedule.detail.policy != policy.name or policy.discovery is None:
        raise ConfigError(
            f"discovery scheduled for policy {schedule.detail.policy!r} but this function "
            f"serves {policy.name!r}" + ("" if policy.discovery else " (without discovery)")
        )
    metrics.add_dimension("policy", policy.name)
    try:
        report = run_discovery(
            policy,
            wiring.source(),
            DiscoveryStore(runtime.ledger()),
            scheduled_at=schedule.time,
            clock=runtime.utcnow,
            remaining_seconds=runtime.remaining_budget(context, policy.discovery.budget_seconds),
        )
    except DiscoveryFailedError as exc:
        if isinstance(exc.report, DiscoveryReport):
            _record(exc.report)
        raise
    _record(report)
    return report.as_dict()


def _record(report: DiscoveryReport) -> None:
    add_counts(
        metrics,
        [
            (Metric.DISCOVERY_SCANNED, report.scanned),
            (Metric.DISCOVERY_INSERTED, report.inserted),
            (Metric.DISCOVERY_MOVED_EARLIER, report.moved_earlier),
            (Metric.DISCOVERY_REJECTED, report.rejected),
            (Metric.DISCOVERY_PASSES_COMPLETED, int(report.pass_complete)),
        ],
    )
    # The lag is sent on every run, zero or not: its alarm reads a missing value as breaching.
    if report.stop_reason != DUPLICATE:
        metrics.add_metric(
            name=Metric.DISCOVERY_LAG, unit=MetricUnit.Seconds, value=report.lag_seconds
        )
    # Counts, positions and reasons only: the report holds no row value and no cursor.
    logger.info("discovery run", extra=report.as_dict())

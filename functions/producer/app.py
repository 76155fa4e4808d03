"""Producer Lambda: EventBridge Scheduler → release the policy's due work into SQS, then exit."""

from typing import Any

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.parser import parse
from aws_lambda_powertools.utilities.typing import LambdaContext

from sweeper import observability, runtime
from sweeper.errors import ConfigError
from sweeper.events import ScheduleEvent
from sweeper.observability import METRICS_NAMESPACE, Metric, add_counts
from sweeper.producer.release import release_batch_id
from sweeper.producer.run import run_producer

logger = Logger()
tracer = observability.tracer()
metrics = Metrics(namespace=METRICS_NAMESPACE)


@metrics.log_metrics
@logger.inject_lambda_context(log_event=False)
@tracer.capture_lambda_handler(capture_response=False)  # payloads may hold customer ids
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    settings = runtime.settings()
    schedule = parse(event=event, model=ScheduleEvent)
    if schedule.detail.policy != settings.policy.name:
        raise ConfigError(
            f"scheduled for policy {schedule.detail.policy!r} but this producer serves "
            f"{settings.policy.name!r}"
        )
    metrics.add_dimension("policy", settings.policy.name)
    report = run_producer(
        settings.policy,
        schedule.time,
        runtime.ledger(),
        runtime.publisher(),
        clock=runtime.utcnow,
        remaining_seconds=runtime.remaining_budget(
            context, settings.policy.producer_budget_seconds
        ),
        batch_id=release_batch_id() if schedule.detail.release else None,
        closed_scopes=runtime.producer_closed_scopes(),
        # An operator's release (catch-up) always connects; a scheduled run may sleep.
        connect_always=schedule.detail.release,
    )
    add_counts(
        metrics,
        [
            (Metric.RECLAIMED, report.reclaimed),
            (Metric.DISCOVERED, report.discovered),
            (Metric.PUBLISHED, report.published),
            (Metric.PUBLISH_FAILURES, report.publish_failures),
            (Metric.RELEASED, report.released),
            (Metric.DUPLICATE_INVOCATIONS, int(report.duplicate_invocation)),
        ],
    )
    if report.oldest_eligible_age_seconds is not None:
        metrics.add_metric(
            name=Metric.OLDEST_ELIGIBLE_AGE,
            unit=MetricUnit.Seconds,
            value=report.oldest_eligible_age_seconds,
        )
    logger.info("producer run", extra=report.as_dict())
    return report.as_dict()

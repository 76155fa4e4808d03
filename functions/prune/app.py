"""Prune Lambda: EventBridge Scheduler → delete the policy's old ledger metadata, then exit.

Retention per the policy's `retention` settings (sweeper.prune.retention), in small batches within
its budget; a run the budget stopped says so in its PruneIncomplete metric, and the next run goes
on.
"""

from typing import Any

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.utilities.parser import parse
from aws_lambda_powertools.utilities.typing import LambdaContext

from sweeper import observability, runtime
from sweeper.errors import ConfigError
from sweeper.events import ScheduleEvent
from sweeper.observability import METRICS_NAMESPACE, add_counts
from sweeper.prune.retention import run_retention

logger = Logger()
tracer = observability.tracer()
metrics = Metrics(namespace=METRICS_NAMESPACE)


@metrics.log_metrics
@logger.inject_lambda_context(log_event=False)
@tracer.capture_lambda_handler(capture_response=False)  # payloads may hold customer ids
@runtime.ends_ledger_run  # no session kept between runs when the cluster may pause
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    policy = runtime.settings().policy
    schedule = parse(event=event, model=ScheduleEvent)
    if schedule.detail.policy != policy.name:
        raise ConfigError(
            f"prune scheduled for policy {schedule.detail.policy!r} but this function serves "
            f"{policy.name!r}"
        )
    metrics.add_dimension("policy", policy.name)
    report = run_retention(
        policy.name,
        policy.retention,
        runtime.ledger(),
        now=runtime.utcnow(),
        remaining_seconds=runtime.remaining_budget(context, policy.retention.budget_seconds),
    )
    add_counts(metrics, report.metrics())
    logger.info("prune run", extra=report.as_dict())
    return report.as_dict()

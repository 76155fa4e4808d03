"""Intake Lambda: SQS batch of hints → one idempotent upsert into the ledger → partial response."""

from typing import Any

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.utilities.typing import LambdaContext

from sweeper import observability, runtime
from sweeper.intake.process import IntakeDeps, process_intake_batch
from sweeper.observability import METRICS_NAMESPACE

logger = Logger()
tracer = observability.tracer()
metrics = Metrics(namespace=METRICS_NAMESPACE)


@metrics.log_metrics
@logger.inject_lambda_context(log_event=False)
@tracer.capture_lambda_handler(capture_response=False)  # payloads may hold customer ids
@runtime.ends_ledger_run  # no session kept between runs when the cluster may pause
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    settings = runtime.settings()
    metrics.add_dimension("policy", settings.policy.name)
    deps = IntakeDeps(
        policy=settings.policy,
        ledger=runtime.ledger(),
        clock=runtime.utcnow,
        metrics=metrics,
        visibility=runtime.intake_visibility(),
    )
    response, report = process_intake_batch(event, deps)
    logger.info("intake batch", extra=report.as_dict())
    return response

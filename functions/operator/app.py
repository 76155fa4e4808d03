"""Operator API Lambda (function URL, AWS_IAM): every console command, for an IAM caller.

Two functions run this code: the read-only one serves status, runs and inspect; the operator
one every command (`SWEEPER_OPERATOR_ACCESS`). The caller's IAM principal ARN, from the URL's
authorizer, is the actor every change records.
"""

from typing import Any

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.typing import LambdaContext

from sweeper import observability
from sweeper.observability import METRICS_NAMESPACE
from sweeper.operator_api import runtime
from sweeper.operator_api.service import function_url_response, serve_function_url

logger = Logger()
tracer = observability.tracer()
metrics = Metrics(namespace=METRICS_NAMESPACE)


@metrics.log_metrics
@logger.inject_lambda_context(log_event=False)
@tracer.capture_lambda_handler(capture_response=False)  # replies may hold operation keys
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    settings = runtime.operator_settings()
    backend = runtime.backend()
    backend.remaining_seconds = lambda: context.get_remaining_time_in_millis() / 1000 - 10
    try:
        reply = serve_function_url(event, access=settings.operator_access, backend=backend)
    finally:
        backend.end_run()  # no session kept between requests when the cluster may pause
    metrics.add_dimension("access", settings.operator_access)
    metrics.add_metric(name=f"OperatorApi_{reply.outcome}", unit=MetricUnit.Count, value=1)
    logger.info("operator request", extra={"command": reply.command, "outcome": reply.outcome})
    return function_url_response(reply)

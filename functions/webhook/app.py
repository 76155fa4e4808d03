"""Webhook Lambda (function URL): `POST /v1/hints/{policy}` → signed hints on the intake queue."""

from typing import Any

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.utilities.typing import LambdaContext

from sweeper import observability, runtime
from sweeper.intake.webhook import function_url_response, handle_webhook, request_from_function_url
from sweeper.observability import METRICS_NAMESPACE

logger = Logger()
tracer = observability.tracer()
metrics = Metrics(namespace=METRICS_NAMESPACE)


@metrics.log_metrics
@logger.inject_lambda_context(log_event=False)
@tracer.capture_lambda_handler(capture_response=False)  # payloads may hold customer ids
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    settings = runtime.settings()
    metrics.add_dimension("policy", settings.policy.name)
    response = handle_webhook(request_from_function_url(event), runtime.webhook_deps(metrics))
    return function_url_response(response)

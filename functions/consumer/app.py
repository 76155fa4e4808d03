"""Consumer Lambda: SQS batch → idempotent external call per job → outcome in the ledger."""

from typing import Any

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.utilities.batch.types import PartialItemFailureResponse
from aws_lambda_powertools.utilities.typing import LambdaContext

from sweeper import observability, runtime
from sweeper.consumer import ConsumerDeps, process_batch
from sweeper.observability import METRICS_NAMESPACE, SummedCounts

logger = Logger()
tracer = observability.tracer()
metrics = Metrics(namespace=METRICS_NAMESPACE)


@metrics.log_metrics
@logger.inject_lambda_context(log_event=False)
@tracer.capture_lambda_handler(capture_response=False)  # payloads may hold customer ids
@runtime.ends_ledger_run  # no session kept between runs when the cluster may pause
def handler(event: dict[str, Any], context: LambdaContext) -> PartialItemFailureResponse:
    settings = runtime.settings()
    metrics.add_dimension("policy", settings.policy.name)
    runtime.idempotency_config().register_lambda_context(context)
    # One value per count name, handed to Powertools on the way out, raising or not, before
    # `log_metrics` flushes (observability.SummedCounts: why).
    with SummedCounts(metrics) as counts:
        deps = ConsumerDeps(
            policy=settings.policy,
            ledger=runtime.ledger(),
            guarded_call=runtime.guarded_call(),
            warm=runtime.action().warm,
            clock=runtime.utcnow,
            metrics=counts,
            limiter=runtime.consumer_limiter(),
            visibility=runtime.visibility(),
        )
        return process_batch(
            event,
            context,
            deps,
            runtime.batch_processor(),
            call_timeout=runtime.call_timeout(context),
        )

"""Redrive Lambda: dead letters back to the work queue when the ledger and the gate say so.

Invoked by its schedule (the scheduler's EventBridge-shaped event: a plain run for this policy)
or on demand with a `RedriveRequest` (events/redrive_request.json). With `[policies.redrive]
automatic = "throttled"` a scheduled run is a `Watch` of the throttled letters for its minute
(sweeper.redrive.auto). A run that met dead letters it could not handle raises after logging its
report, so the function's error alarm fires.
"""

import time
from functools import partial
from typing import Any

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.utilities.typing import LambdaContext

from sweeper import observability, runtime
from sweeper.errors import ConfigError
from sweeper.limiter.gates import closed_gates_after
from sweeper.observability import METRICS_NAMESPACE, add_counts
from sweeper.redrive.auto import scheduled_watch
from sweeper.redrive.letters import SqsDeadLetterQueue
from sweeper.redrive.limits import LimitLook
from sweeper.redrive.log import function_actor
from sweeper.redrive.run import request_from_event, run_redrive

#: The run stops well before this (and before Lambda's own timeout, whichever is first).
REDRIVE_BUDGET_SECONDS = 240.0

logger = Logger()
tracer = observability.tracer()
metrics = Metrics(namespace=METRICS_NAMESPACE)


@metrics.log_metrics
@logger.inject_lambda_context(log_event=False)
@tracer.capture_lambda_handler(capture_response=False)  # payloads may hold customer ids
@runtime.ends_ledger_run  # no session kept between runs when the cluster may pause
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    settings = runtime.settings()
    policy = settings.policy
    request = request_from_event(event, policy.name)
    if request.policy != policy.name:
        raise ConfigError(
            f"redrive requested for policy {request.policy!r} but this function serves "
            f"{policy.name!r}"
        )
    metrics.add_dimension("policy", policy.name)
    dlq = SqsDeadLetterQueue(
        runtime.sqs_client(), settings.require("dlq_url"), settings.require("queue_url")
    )
    actor = function_actor(event)
    report = run_redrive(
        request,
        runtime.ledger(),
        dlq,
        runtime.limiter().state,
        policy=policy.name,
        clock=runtime.utcnow,
        remaining_seconds=runtime.remaining_budget(context, REDRIVE_BUDGET_SECONDS),
        default_rate_per_second=policy.quota.rate_per_second,
        actor=actor,
        limits=LimitLook(policy, runtime.limiter().live()),
        watch=scheduled_watch(
            policy.redrive,
            actor,
            time.monotonic(),
            partial(
                closed_gates_after, runtime.dynamodb_client(), settings.require("limiter_table")
            ),
        ),
    )
    add_counts(metrics, report.metrics())
    logger.info("redrive run", extra=report.as_dict())
    report.raise_for_errors()
    return report.as_dict()

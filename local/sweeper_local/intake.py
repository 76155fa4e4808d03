"""One policy's intake on the local stack: what infra/intake.py deploys, on the emulator.

The intake queue with its DLQ, the replay table and the webhook's signing secret (made as the
CDK app makes them), and the intake function fed from the queue by the local event source, in
execution environments of its own: hints sent by the webhook or by `sweeper schedule --stack`
reach the ledger by the same code as on AWS.
"""

from __future__ import annotations

from typing import Self

from sweeper.config import Policy
from sweeper.intake.webhook import WebhookDeps
from sweeper.observability import MetricSink
from sweeper_local.aws import IntakeResources, provision_intake
from sweeper_local.errors import LocalStackError
from sweeper_local.pipeline import WARM_TIMEOUT_SECONDS
from sweeper_local.poller import EventSourceConfig, LocalEventSource
from sweeper_local.service import Service
from sweeper_local.stack import LocalStack
from sweeper_local.webhook import local_webhook_deps


class LocalIntake(Service):
    """Start with `with LocalIntake(stack, policy, secret=...) as intake:`."""

    def __init__(
        self,
        stack: LocalStack,
        policy: Policy,
        *,
        secret: str,
        prefix: str = "sweeper-local",
        log_file: str | None = None,
        function_name: str | None = None,
    ) -> None:
        if stack.database_url is None:
            raise LocalStackError("the local stack is not started")
        self.stack = stack
        self.policy = policy
        self.resources: IntakeResources = provision_intake(
            stack.aws.sqs(),
            stack.aws.dynamodb(),
            stack.aws.secretsmanager(),
            policy,
            prefix=prefix,
            secret_value=secret,
        )
        env = {
            **stack.aws.env(),
            "SWEEPER_POLICY": policy.model_dump_json(),
            "SWEEPER_DATABASE_URL": stack.database_url,
            "SWEEPER_INTAKE_QUEUE_URL": self.resources.queue_url,
            "POWERTOOLS_SERVICE_NAME": "sweeper",
        }
        config = policy.intake
        self.source = LocalEventSource(
            stack.aws.sqs(),
            EventSourceConfig(
                queue_url=self.resources.queue_url,
                queue_arn=self.resources.queue_arn,
                function="intake",
                function_name=function_name or f"sweeper-{policy.name}-intake",
                batch_size=config.batch_size,
                # As infra/intake.py maps it: the function's reserved concurrency, at least 2.
                max_concurrency=max(2, config.reserved_concurrency),
                timeout_seconds=config.timeout_seconds,
            ),
            env,
            log_file=log_file,
        )

    def webhook_deps(self, metrics: MetricSink) -> WebhookDeps:
        """What the policy's webhook function gets on AWS, pointed at this intake."""
        return local_webhook_deps(self.stack.aws, self.resources, self.policy, metrics)

    def start(self) -> Self:
        try:
            self.source.start()
            self.source.wait_until_warm(WARM_TIMEOUT_SECONDS)
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        self.source.stop()

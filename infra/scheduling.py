"""A function invoked on a schedule by EventBridge Scheduler, with a dead-letter queue.

The target input is shaped like an EventBridge event, so the function parses it with
Powertools' `EventBridgeModel`; `detail` names the policy and the attempt. EventBridge Scheduler
invokes Lambda asynchronously: its retry policy covers delivery (throttling, a missing
permission), Lambda's own async retries cover a failing run. Both end in the same DLQ, so one
alarm on that queue catches every lost run.
"""

from __future__ import annotations

from aws_cdk import CfnElement, Duration, Stack, TimeZone
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_lambda_destinations as destinations
from aws_cdk import aws_scheduler as scheduler
from aws_cdk import aws_scheduler_targets as targets
from constructs import Construct

from infra.nag import acknowledge
from infra.queues import dead_letter_queue

#: Delivery retries by EventBridge Scheduler, within the event age below. Overlapping runs are
#: safe (the producer leases rows), a run older than an hour is better left to the next one.
SCHEDULE_RETRY_ATTEMPTS = 5
SCHEDULE_MAX_EVENT_AGE_SECONDS = 3600
#: Lambda's retries of a run that failed; the next scheduled run retries anyway.
ASYNC_RETRY_ATTEMPTS = 1
ASYNC_MAX_EVENT_AGE_SECONDS = 3600

SCHEDULE_DLQ_REASON = (
    "This queue is itself a dead-letter queue: EventBridge Scheduler and Lambda's on-failure "
    "destination write undeliverable or failed runs here, and an alarm fires on any message."
)

INVOKE_QUALIFIERS_REASON = (
    "lambda:InvokeFunction is granted on this one function and its qualifiers (<arn>:*, i.e. "
    "versions and aliases) by the CDK grant; no other function can be invoked."
)


def invoke_qualifiers_finding(function: lambda_.IFunction) -> str:
    """The cdk-nag finding for an invoke grant on `function`'s versions and aliases."""
    resource = function.node.default_child
    assert isinstance(resource, CfnElement)
    logical_id = Stack.of(function).get_logical_id(resource)
    return f"AwsSolutions-IAM5[Resource::<{logical_id}.Arn>:*]"


class ScheduledInvocation(Construct):
    """Schedule + dead-letter queue + the function's async failure destination."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        function: lambda_.IFunction,
        expression: str,
        timezone: str,
        policy_name: str,
        description: str,
    ) -> None:
        super().__init__(scope, construct_id)
        self.dead_letter_queue = dead_letter_queue(self, "DeadLetterQueue")
        acknowledge(self.dead_letter_queue, "AwsSolutions-SQS3", SCHEDULE_DLQ_REASON)

        stack = Stack.of(self)
        event = {
            "version": "0",
            "id": scheduler.ContextAttribute.execution_id,
            "detail-type": "Scheduled Event",
            "source": "aws.scheduler",
            "account": stack.account,
            "time": scheduler.ContextAttribute.scheduled_time,
            "region": stack.region,
            "resources": [scheduler.ContextAttribute.schedule_arn],
            "detail": {"policy": policy_name, "attempt": scheduler.ContextAttribute.attempt_number},
        }
        # Our own role (CDK would share one per function at stack level): trusted by this
        # account's schedules only, and acknowledged here with the grant CDK adds to it.
        self.role = iam.Role(
            self,
            "Role",
            assumed_by=iam.ServicePrincipal(
                "scheduler.amazonaws.com",
                conditions={"StringEquals": {"aws:SourceAccount": stack.account}},
            ),
            description=f"sweeper {description}",
        )
        target = targets.LambdaInvoke(
            function,
            role=self.role,
            input=scheduler.ScheduleTargetInput.from_object(event),
            dead_letter_queue=self.dead_letter_queue,
            retry_attempts=SCHEDULE_RETRY_ATTEMPTS,
            max_event_age=Duration.seconds(SCHEDULE_MAX_EVENT_AGE_SECONDS),
        )
        self.schedule = scheduler.Schedule(
            self,
            "Schedule",
            schedule=scheduler.ScheduleExpression.expression(expression, TimeZone.of(timezone)),
            target=target,
            time_window=scheduler.TimeWindow.off(),
            description=description,
        )
        acknowledge(self.role, invoke_qualifiers_finding(function), INVOKE_QUALIFIERS_REASON)
        function.configure_async_invoke(
            retry_attempts=ASYNC_RETRY_ATTEMPTS,
            max_event_age=Duration.seconds(ASYNC_MAX_EVENT_AGE_SECONDS),
            on_failure=destinations.SqsDestination(self.dead_letter_queue),
        )

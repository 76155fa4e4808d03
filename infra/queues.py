"""Queue defaults shared by every queue sweeper creates: encrypted, TLS only, bounded retention."""

from __future__ import annotations

from typing import Any

from aws_cdk import Duration, Stack
from aws_cdk import aws_sqs as sqs
from constructs import Construct

#: Longer than any work queue keeps a message, so that nothing expires on its way to a DLQ
#: (SQS keeps a dead-lettered message's original enqueue time).
DEAD_LETTER_RETENTION_DAYS = 14
WORK_QUEUE_RETENTION_DAYS = 4


def encrypted_queue(scope: Construct, construct_id: str, **props: Any) -> sqs.Queue:
    """An SQS queue with SSE-SQS at rest and a policy that refuses requests without TLS.

    SSE-SQS rather than a customer managed key: EventBridge Scheduler and Lambda destinations
    write to these queues, and an SQS-managed key needs no key policy for them.
    """
    return sqs.Queue(
        scope,
        construct_id,
        encryption=sqs.QueueEncryption.SQS_MANAGED,
        enforce_ssl=True,
        **props,
    )


def queue_with_dead_letters(
    scope: Construct,
    *,
    queue_id: str,
    queue_arn_id: str,
    queue_name: str,
    visibility_seconds: int,
    max_receive_count: int,
) -> tuple[sqs.Queue, sqs.Queue]:
    """A queue and its DLQ (`DeadLetterQueue`): the DLQ admits this queue only, and no other
    queue may use this one as its DLQ. Naming the queue lets the DLQ's redrive allow policy
    name its ARN without a reference cycle between the two."""
    stack = Stack.of(scope)
    queue_arn = stack.format_arn(service="sqs", resource=queue_name)
    dead_letters = dead_letter_queue(
        scope,
        "DeadLetterQueue",
        redrive_allow_policy=sqs.RedriveAllowPolicy(
            redrive_permission=sqs.RedrivePermission.BY_QUEUE,
            source_queues=[sqs.Queue.from_queue_arn(scope, queue_arn_id, queue_arn)],
        ),
    )
    queue = encrypted_queue(
        scope,
        queue_id,
        queue_name=queue_name,
        visibility_timeout=Duration.seconds(visibility_seconds),
        retention_period=Duration.days(WORK_QUEUE_RETENTION_DAYS),
        dead_letter_queue=sqs.DeadLetterQueue(
            max_receive_count=max_receive_count, queue=dead_letters
        ),
        redrive_allow_policy=sqs.RedriveAllowPolicy(
            redrive_permission=sqs.RedrivePermission.DENY_ALL
        ),
    )
    return queue, dead_letters


def dead_letter_queue(scope: Construct, construct_id: str, **props: Any) -> sqs.Queue:
    return encrypted_queue(
        scope,
        construct_id,
        retention_period=Duration.days(DEAD_LETTER_RETENTION_DAYS),
        **props,
    )

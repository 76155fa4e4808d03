"""Queue defaults shared by every queue sweeper creates: encrypted, TLS only, bounded retention."""

from __future__ import annotations

from typing import Any

from aws_cdk import Duration
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


def dead_letter_queue(scope: Construct, construct_id: str, **props: Any) -> sqs.Queue:
    return encrypted_queue(
        scope,
        construct_id,
        retention_period=Duration.days(DEAD_LETTER_RETENTION_DAYS),
        **props,
    )

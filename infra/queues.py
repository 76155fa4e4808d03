"""Queue defaults shared by every queue sweeper creates: encrypted, TLS only, bounded retention,
and who may send to it (`admit_only`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from aws_cdk import Duration, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from infra.resource_policy import denied_to_every_other, senders_allowed

#: Longer than any work queue keeps a message, so that nothing expires on its way to a DLQ
#: (SQS keeps a dead-lettered message's original enqueue time).
DEAD_LETTER_RETENTION_DAYS = 14
WORK_QUEUE_RETENTION_DAYS = 4
SEND_MESSAGE = "sqs:SendMessage"


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
    name its ARN without a reference cycle between the two. No principal may send to the DLQ:
    letters reach it by SQS's own redrive, which is no SendMessage request."""
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
    admit_only(dead_letters, [], deny_services=False)
    return queue, dead_letters


def dead_letter_queue(scope: Construct, construct_id: str, **props: Any) -> sqs.Queue:
    return encrypted_queue(
        scope,
        construct_id,
        retention_period=Duration.days(DEAD_LETTER_RETENTION_DAYS),
        **props,
    )


def admit_only(
    queue: sqs.IQueue,
    senders: Sequence[iam.IRole],
    *,
    deny_services: bool = True,
    service_sources: Sequence[str] = (),
) -> None:
    """Allow `sqs:SendMessage` to `senders` and deny it to every other principal of any account,
    however broad its identity policy; and deny every AWS service but one delivering for
    `service_sources` (their ARNs as `aws:SourceArn`; none: every service is denied).

    Two Deny statements, because a service principal has no role ARN to list: the first refuses
    any non-service principal whose ARN (a role's, also for its sessions) is not a sender; the
    second any service request whose source is not listed. `deny_services=False` leaves
    services to the implicit deny (no statement allows one) and so never stands between SQS
    and its own dead-lettering into a DLQ.
    """
    arns = [role.role_arn for role in senders]
    if senders:
        queue.add_to_resource_policy(senders_allowed(arns, SEND_MESSAGE, queue.queue_arn))
    others: dict[str, dict[str, object]] = {"Bool": {"aws:PrincipalIsAWSService": "false"}}
    if arns:
        others["ArnNotEquals"] = {"aws:PrincipalArn": arns}
    _deny_send(queue, "OnlyTheSendersMaySend", others)
    if not deny_services:
        return
    services: dict[str, dict[str, object]] = {"Bool": {"aws:PrincipalIsAWSService": "true"}}
    if service_sources:
        services["ArnNotEquals"] = {"aws:SourceArn": list(service_sources)}
    _deny_send(queue, "OnlyTheListedSourcesMayDeliver", services)


def _deny_send(queue: sqs.IQueue, sid: str, conditions: dict[str, dict[str, object]]) -> None:
    queue.add_to_resource_policy(
        denied_to_every_other(sid, SEND_MESSAGE, queue.queue_arn, conditions)
    )

"""The operators' way onto the intake queues: one role, `sweeper schedule --stack` assumes it.

`schedule --stack` sends hints with the caller's own credentials, and the intake queues admit
`sqs:SendMessage` from the listed senders only (infra/intake.py). This role is the listed sender
for people: principals of this account that their administrator allows `sts:AssumeRole` on it
(output `IntakeSenderRoleArn`) may read the stack's outputs, send to each policy's intake queue,
and move the intake DLQ's letters back to it (the runbook's IntakeDeadLetters). Nothing else.
"""

from __future__ import annotations

from aws_cdk import Duration, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_sqs as sqs
from constructs import Construct

#: A session to schedule a file or redrive a DLQ; an hour is plenty.
SENDER_SESSION_HOURS = 1
#: SQS's DLQ redrive: started on the DLQ, moving its messages back to the source queue (which
#: the caller must be allowed to send to).
DEAD_LETTER_MOVE_ACTIONS = (
    "sqs:StartMessageMoveTask",
    "sqs:ListMessageMoveTasks",
    "sqs:CancelMessageMoveTask",
    "sqs:ReceiveMessage",
    "sqs:DeleteMessage",
    "sqs:GetQueueAttributes",
)


class IntakeSender(Construct):
    """The intake sender role; each policy's intake grants it its queues."""

    def __init__(self, scope: Construct, construct_id: str) -> None:
        super().__init__(scope, construct_id)
        stack = Stack.of(self)
        self.role = iam.Role(
            self,
            "Role",
            # The account, not anyone in it: a principal also needs an identity policy that
            # allows sts:AssumeRole on this role.
            assumed_by=iam.AccountRootPrincipal(),
            description=f"sweeper {stack.stack_name}: operators sending hints to intake queues",
            max_session_duration=Duration.hours(SENDER_SESSION_HOURS),
        )
        # `--stack` finds the queue URLs in the stack's outputs.
        describe = iam.PolicyStatement(
            actions=["cloudformation:DescribeStacks"], resources=[stack.stack_id]
        )
        self.role.add_to_policy(describe)

    def grant_intake(self, queue: sqs.IQueue, dead_letter_queue: sqs.IQueue) -> None:
        """Send to one intake queue, and move its DLQ's letters back to it."""
        queue.grant_send_messages(self.role)
        dead_letter_queue.grant(self.role, *DEAD_LETTER_MOVE_ACTIONS)

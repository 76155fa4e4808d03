"""The intake bus: the EventBridge bus the policies' intake rules listen on, and who may put there.

On the default bus, any principal of the account whose identity policy allows `events:PutEvents`
publishes: a matching event moves a job's due time earlier, replaces an unclaimed job's params or
adds obligations. A custom bus is no better by itself: within one account an Allow in either the
identity policy or the bus's policy is enough. So this bus's policy allows the listed senders
and explicitly denies `events:PutEvents` to every other principal by `aws:PrincipalArn`, AWS
services included (their events reach only the default bus). docs/decisions.md, "The intake
bus", says why a bus and not signed events.
"""

from __future__ import annotations

from collections.abc import Sequence

from aws_cdk import Stack
from aws_cdk import aws_events as events
from aws_cdk import aws_iam as iam
from constructs import Construct

from infra.resource_policy import denied_to_every_other, senders_allowed

PUT_EVENTS = "events:PutEvents"


class IntakeBus(Construct):
    """A custom event bus named `<stack>-intake`, open to the sender role and `senders` only."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        sender_role: iam.IRole,
        senders: Sequence[str] = (),
    ) -> None:
        """`senders`: further IAM role or user ARNs (the `intake_event_senders` option)."""
        super().__init__(scope, construct_id)
        self.bus = events.EventBus(
            self, "Bus", event_bus_name=f"{Stack.of(self).stack_name}-intake"
        )
        arns = [sender_role.role_arn, *senders]
        bus = self.bus.event_bus_arn
        self.bus.add_to_resource_policy(senders_allowed(arns, PUT_EVENTS, bus))
        # A missing aws:PrincipalArn (a service) makes ArnNotEquals true: denied as well.
        self.bus.add_to_resource_policy(
            denied_to_every_other(
                "OnlyTheSendersMayPut",
                PUT_EVENTS,
                bus,
                {"ArnNotEquals": {"aws:PrincipalArn": arns}},
            )
        )
        self.bus.grant_put_events_to(sender_role)

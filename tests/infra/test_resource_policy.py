"""The statements a resource policy that admits listed senders only is made of
(infra/resource_policy.py): the queues' and the intake bus's alike."""

from __future__ import annotations

from aws_cdk import Stack

from infra.resource_policy import denied_to_every_other, senders_allowed

SENDER = "arn:aws:iam::111122223333:role/exports-app"
QUEUE = "arn:aws:sqs:eu-west-1:111122223333:work"


def test_the_listed_senders_are_allowed_the_one_action_on_the_one_resource() -> None:
    statement = Stack().resolve(senders_allowed([SENDER], "sqs:SendMessage", QUEUE).to_json())

    assert statement == {
        "Sid": "SendersAllowed",
        "Effect": "Allow",
        "Principal": {"AWS": SENDER},
        "Action": "sqs:SendMessage",
        "Resource": QUEUE,
    }


def test_every_other_principal_the_conditions_match_is_denied() -> None:
    conditions = {"ArnNotEquals": {"aws:PrincipalArn": [SENDER]}}

    statement = denied_to_every_other("OnlyTheSenders", "sqs:SendMessage", QUEUE, conditions)

    assert Stack().resolve(statement.to_json()) == {
        "Sid": "OnlyTheSenders",
        "Effect": "Deny",
        "Principal": {"AWS": "*"},
        "Action": "sqs:SendMessage",
        "Resource": QUEUE,
        "Condition": conditions,
    }

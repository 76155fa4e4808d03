"""Who may send to a policy's work queue and its DLQ: the queue policies in the template.

A message on the work queue starts a call, so only the three functions that put jobs there
may send: the policy's producer, its redrive, and the operator function (catch-up, redrive).
Everyone else of the account, whatever their identity policy says, meets an explicit Deny. The
DLQ admits no sender at all: SQS's own dead-lettering is not a SendMessage request.
"""

from __future__ import annotations

from typing import Any

from tests.infra.conftest import Synth
from tests.infra.policy_eval import as_list, decision, iam_request, service_request

SEND = "sqs:SendMessage"
ADMIN = "arn:aws:iam::111122223333:role/Admin"


def _queue_statements(synth: Synth, queue_path: str) -> list[dict[str, Any]]:
    queue = synth.logical_id(queue_path)
    (policy,) = [
        p
        for p in synth.resources("AWS::SQS::QueuePolicy").values()
        if {"Ref": queue} in p["Properties"]["Queues"]
    ]
    statements: list[dict[str, Any]] = policy["Properties"]["PolicyDocument"]["Statement"]
    return statements


def _role_arn(synth: Synth, role_path: str) -> dict[str, Any]:
    return {"Fn::GetAtt": [synth.logical_id(f"{role_path}/Role/Resource"), "Arn"]}


def _every_role(synth: Synth) -> list[dict[str, Any]]:
    return [{"Fn::GetAtt": [role, "Arn"]} for role in synth.resources("AWS::IAM::Role")]


def _senders(policy: str, synth: Synth) -> list[dict[str, Any]]:
    return [
        _role_arn(synth, f"Pipeline-{policy}/Producer"),
        _role_arn(synth, f"Redrive-{policy}/Function"),
        _role_arn(synth, "OperatorApi/Operator"),
    ]


def test_only_the_producer_the_redrive_and_the_operator_function_may_send_to_the_work_queue(
    proxied: Synth,
) -> None:
    for policy in proxied.config.policies:
        statements = _queue_statements(proxied, f"Pipeline-{policy.name}/WorkQueue/Resource")
        senders = _senders(policy.name, proxied)
        # The allowed principals are exactly the three functions' roles ...
        allowed = [
            principal
            for s in statements
            if s["Effect"] == "Allow" and SEND in as_list(s["Action"])
            for principal in as_list(s["Principal"]["AWS"])
        ]
        assert sorted(map(str, allowed)) == sorted(map(str, senders)), policy.name
        for sender in senders:
            assert decision(statements, iam_request(SEND, sender)) == "allow", sender
        # ... and every other role of the stack (the consumer, the other policy's producer,
        # the intake sender, the read-only operator function) or of the account is denied.
        for role in _every_role(proxied):
            if role not in senders:
                assert decision(statements, iam_request(SEND, role)) == "deny", role
        assert decision(statements, iam_request(SEND, ADMIN)) == "deny"
        # No AWS service delivers to a work queue.
        rule = "arn:aws:events:eu-west-1:111122223333:rule/someone-elses-rule"
        assert decision(statements, service_request(SEND, "events.amazonaws.com", rule)) == "deny"
        topic = "arn:aws:sns:eu-west-1:111122223333:some-topic"
        assert decision(statements, service_request(SEND, "sns.amazonaws.com", topic)) == "deny"


def test_the_work_queues_dlq_admits_no_sender(proxied: Synth) -> None:
    for policy in proxied.config.policies:
        statements = _queue_statements(proxied, f"Pipeline-{policy.name}/DeadLetterQueue/Resource")
        assert not [s for s in statements if s["Effect"] == "Allow"]
        for role in [*_every_role(proxied), ADMIN]:
            assert decision(statements, iam_request(SEND, role)) == "deny", role


def test_the_intake_dlq_admits_no_sender_either(default: Synth) -> None:
    statements = _queue_statements(default, "Intake-exports/DeadLetterQueue/Resource")
    for role in [*_every_role(default), ADMIN]:
        assert decision(statements, iam_request(SEND, role)) == "deny", role


def test_the_work_queue_still_refuses_plain_http_to_its_senders(proxied: Synth) -> None:
    statements = _queue_statements(proxied, "Pipeline-exports/WorkQueue/Resource")
    producer = _role_arn(proxied, "Pipeline-exports/Producer")
    plain = iam_request(SEND, producer, **{"aws:SecureTransport": "false"})
    assert decision(statements, plain) == "deny"

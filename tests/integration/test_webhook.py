"""The webhook: signed hints onto the intake queue; nothing unsigned, stale or replayed gets in."""

from __future__ import annotations

import json
import logging
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

import psycopg
import pytest

from sweeper import runtime
from sweeper.config import IntakeConfig, Policy
from sweeper.intake.process import IntakeDeps, process_intake_batch
from sweeper.intake.replay import PENDING_LEASE_SECONDS, Claim, DynamoReplayMarkers
from sweeper.intake.send import QueueBacklog
from sweeper.intake.webhook import WebhookDeps, WebhookRequest, WebhookResponse, handle_webhook
from sweeper.ledger.store import Ledger
from sweeper.observability import Metric
from sweeper.sqs_queue import OutgoingMessage, Publisher, SqsPublisher, SqsVisibility
from sweeper_local.aws import IntakeResources, LocalAws, provision_intake
from sweeper_local.lambda_runtime import LocalLambdaContext, load_handler
from sweeper_local.metric_totals import CountingSink
from sweeper_local.webhook import sign

SECRET = "webhook-secret-for-tests"
POLICY = Policy(name="exports", intake=IntakeConfig(max_body_bytes=2048, max_hints_per_request=5))
PATH = "/v1/hints/exports"


class FailingPublisher:
    """SQS refusing every entry (throttled, or the queue unreachable) until told otherwise."""

    def __init__(self, real: Publisher) -> None:
        self.real = real
        self.failing = True

    def send_batch(self, messages: Sequence[OutgoingMessage]) -> list[str]:
        if self.failing:
            return [m.entry_id for m in messages]
        return self.real.send_batch(messages)


@dataclass
class Webhook:
    resources: IntakeResources
    aws: LocalAws
    deps: WebhookDeps
    clock: list[datetime]

    def post(
        self, body: bytes, *, t: int | None = None, secret: str = SECRET, path: str = PATH
    ) -> WebhookResponse:
        stamp = t if t is not None else int(self.clock[0].timestamp())
        headers = {
            "sweeper-signature": sign(secret, stamp, body),
            "content-type": "application/json",
        }
        return handle_webhook(WebhookRequest("POST", path, headers, body), self.deps)

    def queued(self) -> list[dict[str, Any]]:
        """Every message on the intake queue (received and deleted)."""
        sqs = self.aws.sqs()
        found: list[dict[str, Any]] = []
        while True:
            batch = sqs.receive_message(
                QueueUrl=self.resources.queue_url, MaxNumberOfMessages=10, WaitTimeSeconds=0
            ).get("Messages", [])
            if not batch:
                return found
            for message in batch:
                found.append(dict(message))
                sqs.delete_message(
                    QueueUrl=self.resources.queue_url, ReceiptHandle=message["ReceiptHandle"]
                )


@pytest.fixture
def webhook(local_aws: LocalAws, unique_name: str) -> Webhook:
    resources = provision_intake(
        local_aws.sqs(),
        local_aws.dynamodb(),
        local_aws.secretsmanager(),
        POLICY,
        prefix=unique_name,
    )
    clock = [datetime.now(UTC)]
    deps = WebhookDeps(
        policy=POLICY,
        secrets=lambda: (SECRET,),
        replay=DynamoReplayMarkers(local_aws.dynamodb(), resources.replay_table),
        publisher=SqsPublisher(local_aws.sqs(), resources.queue_url),
        backlog=QueueBacklog(local_aws.sqs(), resources.queue_url, max_age_seconds=0),
        clock=lambda: clock[0],
        metrics=CountingSink(),
    )
    return Webhook(resources, local_aws, deps, clock)


HINT = b'{"tenant_id":"t1","object_id":"o1"}'


def test_a_signed_hint_is_accepted_only_once_it_is_on_the_intake_queue(
    webhook: Webhook, ledger: Ledger, db_url: str
) -> None:
    response = webhook.post(HINT)

    assert (response.status, response.body["accepted"]) == (202, 1)
    (message,) = webhook.queued()
    # And the intake function puts it in the ledger, due when the webhook received it.
    records = [{"messageId": message["MessageId"], "body": message["Body"]}]
    visibility = SqsVisibility(webhook.aws.sqs(), webhook.resources.queue_url)
    deps = IntakeDeps(POLICY, ledger, lambda: webhook.clock[0], CountingSink(), visibility)
    assert process_intake_batch({"Records": records}, deps)[0] == {"batchItemFailures": []}
    with psycopg.connect(db_url) as conn:
        rows = conn.execute("SELECT tenant_id, object_id, due_at FROM sweeper_jobs").fetchall()
    assert rows == [("t1", "o1", webhook.clock[0])]


def test_a_bad_signature_writes_nothing(webhook: Webhook) -> None:
    response = webhook.post(HINT, secret="not-the-secret")

    assert (response.status, response.body) == (401, {"error": "signature_mismatch"})
    assert webhook.queued() == []


def test_a_missing_signature_writes_nothing(webhook: Webhook) -> None:
    response = handle_webhook(WebhookRequest("POST", PATH, {}, HINT), webhook.deps)

    assert (response.status, response.body) == (401, {"error": "missing_signature"})
    assert webhook.queued() == []


def test_a_stale_timestamp_writes_nothing(webhook: Webhook) -> None:
    old = int(webhook.clock[0].timestamp()) - POLICY.intake.signature_tolerance_seconds - 1

    response = webhook.post(HINT, t=old)

    assert (response.status, response.body) == (401, {"error": "stale_timestamp"})
    assert webhook.queued() == []


def test_a_replayed_hint_writes_nothing(webhook: Webhook) -> None:
    t = int(webhook.clock[0].timestamp())
    assert webhook.post(HINT, t=t).status == 202
    assert len(webhook.queued()) == 1

    replayed = webhook.post(HINT, t=t)

    # Answered as before (a sender retrying after a lost answer is done), but nothing is sent.
    assert (replayed.status, replayed.body) == (202, {"result": "duplicate", "accepted": 0})
    assert webhook.queued() == []


def test_the_same_hint_signed_anew_is_a_new_request(webhook: Webhook) -> None:
    t = int(webhook.clock[0].timestamp())
    assert webhook.post(HINT, t=t).status == 202
    assert webhook.post(HINT, t=t + 1).body["result"] == "accepted"
    assert len(webhook.queued()) == 2


def test_a_bad_body_is_refused_without_echoing_values(webhook: Webhook) -> None:
    body = json.dumps(
        [{"tenant_id": "cust-4711", "object_id": "private-file.pdf", "due_at": "tomorrow"}]
    ).encode()

    response = webhook.post(body)

    assert response.status == 400
    assert response.body == {
        "error": "invalid_hints",
        "problems": ["[0].due_at: datetime_from_date_parsing"],
    }
    assert "cust-4711" not in response.json()
    assert "private" not in response.json()
    assert webhook.queued() == []


def test_a_body_over_the_limit_is_refused_unread(webhook: Webhook) -> None:
    body = b" " * (POLICY.intake.max_body_bytes + 1)
    response = handle_webhook(WebhookRequest("POST", PATH, {}, body), webhook.deps)
    assert (response.status, response.body["error"]) == (413, "body_too_large")


def test_more_hints_than_allowed_is_too_large(webhook: Webhook) -> None:
    body = json.dumps([{"tenant_id": "t", "object_id": str(i)} for i in range(6)]).encode()
    response = webhook.post(body)
    assert (response.status, response.body["error"]) == (413, "too_many_hints")
    assert webhook.queued() == []


@pytest.mark.parametrize("path", ["/v1/hints/uploads", "/v1/other", "/"])
def test_other_paths_are_not_found(webhook: Webhook, path: str) -> None:
    assert webhook.post(HINT, path=path).status == 404


def test_other_methods_are_not_allowed(webhook: Webhook) -> None:
    response = handle_webhook(WebhookRequest("GET", PATH, {}, b""), webhook.deps)
    assert response.status == 405


def test_a_deep_backlog_sheds_load_with_429(webhook: Webhook) -> None:
    sqs = webhook.aws.sqs()
    limit = 3
    for i in range(limit + 1):
        sqs.send_message(QueueUrl=webhook.resources.queue_url, MessageBody=f"filler {i}")
    deps = WebhookDeps(
        **{
            **webhook.deps.__dict__,
            "policy": POLICY.model_copy(
                update={"intake": POLICY.intake.model_copy(update={"max_backlog": limit})}
            ),
        }
    )

    response = handle_webhook(
        WebhookRequest(
            "POST", PATH, {"sweeper-signature": sign(SECRET, int(time.time()), HINT)}, HINT
        ),
        deps,
    )

    assert (response.status, response.headers["Retry-After"]) == (429, "5")
    assert len(webhook.queued()) == limit + 1  # only the fillers


def test_a_queue_refusing_the_send_answers_503_and_the_retry_is_not_a_replay(
    webhook: Webhook,
) -> None:
    failing = FailingPublisher(webhook.deps.publisher)
    webhook.deps = WebhookDeps(**{**webhook.deps.__dict__, "publisher": failing})
    t = int(webhook.clock[0].timestamp())

    refused = webhook.post(HINT, t=t)
    assert (refused.status, refused.body) == (503, {"error": "unavailable"})
    assert "Retry-After" in refused.headers

    failing.failing = False
    retried = webhook.post(HINT, t=t)  # the very same request, signature and all
    assert retried.body["result"] == "accepted"
    assert len(webhook.queued()) == 1


def test_an_unreadable_secret_answers_503(webhook: Webhook) -> None:
    def no_secret() -> tuple[str, ...]:
        raise RuntimeError("AccessDenied")

    webhook.deps = WebhookDeps(**{**webhook.deps.__dict__, "secrets": no_secret})
    assert webhook.post(HINT).status == 503
    assert webhook.queued() == []


def test_a_claim_held_by_a_request_in_flight_refuses_a_twin_until_its_lease_ends(
    webhook: Webhook,
) -> None:
    markers = webhook.deps.replay
    key = markers.key("exports", 1, "ab" * 32)
    now = time.time()

    assert markers.claim(key, now=now, expires_at=int(now) + 600) is Claim.CLAIMED
    assert markers.claim(key, now=now + 1, expires_at=int(now) + 600) is Claim.IN_PROGRESS
    after_lease = now + PENDING_LEASE_SECONDS + 2
    assert markers.claim(key, now=after_lease, expires_at=int(now) + 600) is Claim.CLAIMED
    markers.accept(key)
    assert markers.claim(key, now=after_lease + 100, expires_at=int(now) + 600) is Claim.DUPLICATE


def test_the_deployed_handler_reads_its_secret_and_answers_a_function_url_event(
    local_aws: LocalAws, aws_env: dict[str, str], unique_name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given the webhook function's environment as the CDK app sets it: no database at all
    resources, handler = _deployed_webhook(local_aws, unique_name, monkeypatch)
    event = {
        "version": "2.0",
        "rawPath": PATH,
        "headers": {"sweeper-signature": sign(SECRET, int(time.time()), HINT)},
        "requestContext": {"http": {"method": "POST", "path": PATH}},
        "body": HINT.decode(),
        "isBase64Encoded": False,
    }

    # When a signed request arrives through the function URL
    answer = handler(event, LocalLambdaContext("sweeper-webhook", timeout_seconds=10))
    runtime.reset()

    # Then it is accepted and on the intake queue
    assert answer["statusCode"] == 202, answer
    attributes = local_aws.sqs().get_queue_attributes(
        QueueUrl=resources.queue_url, AttributeNames=["ApproximateNumberOfMessages"]
    )["Attributes"]
    assert attributes["ApproximateNumberOfMessages"] == "1"


def _deployed_webhook(
    local_aws: LocalAws, unique_name: str, monkeypatch: pytest.MonkeyPatch
) -> tuple[IntakeResources, Any]:
    """The webhook function as the CDK app configures it (no database), its secret SECRET."""
    resources = provision_intake(
        local_aws.sqs(),
        local_aws.dynamodb(),
        local_aws.secretsmanager(),
        POLICY,
        prefix=unique_name,
        secret_value=SECRET,
    )
    for name, value in {
        "SWEEPER_POLICY": POLICY.model_dump_json(),
        "SWEEPER_NEEDS_DATABASE": "false",
        "SWEEPER_INTAKE_QUEUE_URL": resources.queue_url,
        "SWEEPER_REPLAY_TABLE": resources.replay_table,
        "SWEEPER_WEBHOOK_SECRET_ARN": resources.secret_arn,
        "POWERTOOLS_SERVICE_NAME": "sweeper",
    }.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("SWEEPER_DATABASE_URL", raising=False)
    runtime.reset()
    return resources, load_handler("webhook")


def _function_url_event(body: bytes, signature: str) -> dict[str, Any]:
    return {
        "version": "2.0",
        "rawPath": PATH,
        "headers": {"sweeper-signature": signature},
        "requestContext": {"http": {"method": "POST", "path": PATH}},
        "body": body.decode(),
        "isBase64Encoded": False,
    }


def test_during_a_rotation_the_previous_secret_is_accepted_and_an_unknown_one_is_not(
    local_aws: LocalAws, aws_env: dict[str, str], unique_name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a webhook secret rotated once: SECRET is now its AWSPREVIOUS version
    resources, handler = _deployed_webhook(local_aws, unique_name, monkeypatch)
    local_aws.secretsmanager().put_secret_value(
        SecretId=resources.secret_arn, SecretString="the-new-secret"
    )
    context = LocalLambdaContext("sweeper-webhook", timeout_seconds=10)

    def post(secret: str, body: bytes) -> int:
        signature = sign(secret, int(time.time()), body)
        return int(handler(_function_url_event(body, signature), context)["statusCode"])

    # When requests arrive signed with the previous, the current and an unknown secret
    previous = post(SECRET, b'{"tenant_id":"t1","object_id":"o1"}')
    current = post("the-new-secret", b'{"tenant_id":"t1","object_id":"o2"}')
    unknown = post("never-a-version", b'{"tenant_id":"t1","object_id":"o3"}')
    runtime.reset()

    # Then both versions pass, the unknown secret does not
    assert (previous, current, unknown) == (202, 202, 401)


def test_a_never_rotated_secret_accepts_only_its_one_version(
    local_aws: LocalAws, aws_env: dict[str, str], unique_name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, handler = _deployed_webhook(local_aws, unique_name, monkeypatch)
    context = LocalLambdaContext("sweeper-webhook", timeout_seconds=10)
    stamp = int(time.time())

    accepted = handler(_function_url_event(HINT, sign(SECRET, stamp, HINT)), context)
    refused = handler(_function_url_event(HINT, sign("other", stamp, HINT)), context)
    runtime.reset()

    assert (accepted["statusCode"], refused["statusCode"]) == (202, 401)


@pytest.mark.parametrize(
    ("body", "signed_with", "status"),
    [
        (HINT, "not-the-secret", 401),
        (b'{"tenant_id":"t1"}', SECRET, 400),
        (b"x" * 4096, SECRET, 413),
    ],
)
def test_a_rejected_request_writes_one_metric_and_no_log_line(
    local_aws: LocalAws,
    aws_env: dict[str, str],
    unique_name: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    body: bytes,
    signed_with: str,
    status: int,
) -> None:
    # Given the deployed webhook function (Powertools Logger and Metrics, INFO level)
    monkeypatch.setenv("POWERTOOLS_LOG_LEVEL", "INFO")
    _, handler = _deployed_webhook(local_aws, unique_name, monkeypatch)
    # The function's Logger is built once per process, on the stdout of its day: point it at
    # this test's, where the metrics blob is printed too.
    for log_handler in logging.getLogger("sweeper").handlers:
        if isinstance(log_handler, logging.StreamHandler):
            monkeypatch.setattr(log_handler, "stream", sys.stdout)
    capsys.readouterr()
    event = _function_url_event(body, sign(signed_with, int(time.time()), body))

    # When a bad request arrives
    answer = handler(event, LocalLambdaContext("sweeper-webhook", timeout_seconds=10))
    runtime.reset()

    # Then its invocation writes one line: the metrics blob (EMF), counting the rejection once
    assert answer["statusCode"] == status
    lines = [line for line in capsys.readouterr().out.splitlines() if line.strip()]
    assert len(lines) == 1, lines
    emf = json.loads(lines[0])
    (directive,) = emf["_aws"]["CloudWatchMetrics"]
    names = [m["Name"] for m in directive["Metrics"]]
    assert names == [f"{Metric.WEBHOOK_PREFIX}{json.loads(answer['body'])['error']}"]
    assert emf[names[0]] == [1.0]


@pytest.mark.parametrize(
    ("field", "bad", "code"),
    [
        ("tenant_id", "..", "id_dot_segment"),
        ("object_id", "..", "id_dot_segment"),
        ("object_id", ".", "id_dot_segment"),
        ("object_id", "cust-4711\u0007", "id_control_character"),
        ("tenant_id", " cust-4711", "id_edge_whitespace"),
        ("object_id", "cust-4711 ", "id_edge_whitespace"),
    ],
)
def test_a_signed_hint_with_an_id_breaking_the_id_rule_is_refused_and_nothing_queued(
    webhook: Webhook, field: str, bad: str, code: str
) -> None:
    # Given a correctly signed body whose second hint has a bad id
    hints = [{"tenant_id": "t1", "object_id": "o1"}, {"tenant_id": "t1", "object_id": "o2"}]
    hints[1][field] = bad
    # When it is posted
    response = webhook.post(json.dumps(hints).encode())
    # Then the whole body is refused by position and code, naming no value, and nothing is queued
    assert response.status == 400
    assert response.body == {"error": "invalid_hints", "problems": [f"[1].{field}: {code}"]}
    assert "cust-4711" not in response.json()
    assert webhook.queued() == []


def test_a_number_of_more_digits_than_python_converts_is_a_bad_body_counted_as_such(
    webhook: Webhook,
) -> None:
    # Given a signed body holding an integer of 5,000 digits (Python refuses to convert it),
    # under a body limit that lets it through
    body = b'{"tenant_id":"t1","object_id":"o1","n":' + b"9" * 5000 + b"}"
    roomy = Policy(name="exports", intake=IntakeConfig(max_body_bytes=16_384))
    webhook.deps = replace(webhook.deps, policy=roomy)
    # When it is posted
    response = webhook.post(body)
    # Then it is refused like any malformed body, with its rejection metric, nothing queued
    assert (response.status, response.body["error"]) == (400, "invalid_body")
    assert webhook.deps.metrics.totals["Webhook_invalid_body"] == 1  # type: ignore[attr-defined]
    assert webhook.queued() == []

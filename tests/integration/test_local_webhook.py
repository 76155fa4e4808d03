"""The webhook on loopback: the same handler over HTTP, with the limits the AWS front keeps."""

from __future__ import annotations

import http.client
import threading
from collections.abc import Iterator

import pytest

from sweeper.config import IntakeConfig, Policy
from sweeper.intake.webhook import WebhookDeps
from sweeper_local.aws import IntakeResources, LocalAws, provision_intake
from sweeper_local.metric_totals import CountingSink
from sweeper_local.webhook import LocalWebhook, local_webhook_deps, post_signed

POLICY = Policy(name="exports", intake=IntakeConfig(max_body_bytes=1024))
SECRET = "local-webhook-test-secret"


@pytest.fixture
def resources(local_aws: LocalAws, unique_name: str) -> IntakeResources:
    return provision_intake(
        local_aws.sqs(),
        local_aws.dynamodb(),
        local_aws.secretsmanager(),
        POLICY,
        prefix=unique_name,
        secret_value=SECRET,
    )


@pytest.fixture
def deps(local_aws: LocalAws, resources: IntakeResources) -> WebhookDeps:
    return local_webhook_deps(local_aws, resources, POLICY, CountingSink())


@pytest.fixture
def served(deps: WebhookDeps) -> Iterator[LocalWebhook]:
    with LocalWebhook({"exports": deps}, concurrency=4) as webhook:
        yield webhook


def _visible(local_aws: LocalAws, resources: IntakeResources) -> int:
    attributes = local_aws.sqs().get_queue_attributes(
        QueueUrl=resources.queue_url, AttributeNames=["ApproximateNumberOfMessages"]
    )["Attributes"]
    return int(attributes["ApproximateNumberOfMessages"])


def test_a_signed_request_over_http_lands_on_the_intake_queue(
    served: LocalWebhook, local_aws: LocalAws, resources: IntakeResources
) -> None:
    status, body = post_signed(served.url, "exports", SECRET, {"tenant_id": "t", "object_id": "o"})

    assert (status, body["accepted"]) == (202, 1)
    assert _visible(local_aws, resources) == 1


def test_a_request_signed_with_another_secret_is_refused(served: LocalWebhook) -> None:
    status, body = post_signed(served.url, "exports", "wrong", {"tenant_id": "t", "object_id": "o"})
    assert (status, body) == (401, {"error": "signature_mismatch"})


def test_a_body_announced_over_the_limit_is_refused_unread(served: LocalWebhook) -> None:
    connection = http.client.HTTPConnection("127.0.0.1", served.port, timeout=5)
    connection.putrequest("POST", "/v1/hints/exports")
    connection.putheader("Content-Length", "5000000")
    connection.endheaders()  # the body is never sent: the answer comes first

    response = connection.getresponse()

    assert response.status == 413
    connection.close()


def test_an_unknown_policy_is_not_found(served: LocalWebhook) -> None:
    status, _ = post_signed(served.url, "uploads", SECRET, {"tenant_id": "t", "object_id": "o"})
    assert status == 404


def test_beyond_its_concurrency_it_answers_429_as_a_throttled_function_url(
    deps: WebhookDeps,
) -> None:
    # Given one slot, held by a request whose secret read is stuck
    entered, release = threading.Event(), threading.Event()

    def slow_secret() -> tuple[str, ...]:
        entered.set()
        release.wait(10)
        return (SECRET,)

    slow = WebhookDeps(**{**deps.__dict__, "secrets": slow_secret})
    with LocalWebhook({"exports": slow}, concurrency=1) as webhook:
        hint = {"tenant_id": "t", "object_id": "o"}
        first: list[int] = []
        holder = threading.Thread(
            target=lambda: first.append(post_signed(webhook.url, "exports", SECRET, hint)[0])
        )
        holder.start()
        assert entered.wait(10)

        # When a second request arrives, Then it is shed with Retry-After
        status, body = post_signed(webhook.url, "exports", SECRET, hint)
        assert (status, body) == (429, {"error": "throttled"})

        release.set()
        holder.join(10)
        assert first == [202]

"""Production wiring for the Lambdas: each adapter built on first use (cold start) and cached.

Nothing here runs at import. Handlers call these factories; logic receives what they return.
"""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from functools import lru_cache
from typing import TYPE_CHECKING, Any

import boto3
from aws_lambda_powertools.utilities import parameters
from aws_lambda_powertools.utilities.idempotency import IdempotencyConfig
from aws_lambda_powertools.utilities.parameters.base import BaseProvider

from sweeper import observability
from sweeper.actions import Action
from sweeper.actions.base import ActionContext
from sweeper.actions.spans import no_spans
from sweeper.admission.learned import reader_for
from sweeper.config import Settings, load_settings
from sweeper.consumer import (
    GuardedCall,
    Idempotent,
    ParallelBatchProcessor,
    dynamodb_idempotent,
    guard_with_idempotency,
    job_idempotency_config,
)
from sweeper.intake.replay import DynamoReplayMarkers
from sweeper.intake.secrets import RotatingSecret
from sweeper.intake.send import QueueBacklog
from sweeper.intake.webhook import WebhookDeps
from sweeper.ledger.connection import secret_conninfo
from sweeper.ledger.store import Ledger
from sweeper.ledger.wake import DynamoWakeStore
from sweeper.ledger.wake_refresh import end_run
from sweeper.limiter import DynamoLimiter, Limiter, closed_scopes
from sweeper.observability import MetricSink
from sweeper.producer.run import ClosedScopes, no_closed_scopes
from sweeper.sqs_queue import SqsPublisher, SqsVisibility

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_sqs import SQSClient

#: Never start work that could not finish before Lambda stops us.
LAMBDA_SAFETY_MARGIN_SECONDS = 5.0
DATABASE_CONNECT_TIMEOUT_SECONDS = 5


def utcnow() -> datetime:
    return datetime.now(UTC)


def settings() -> Settings:
    return load_settings()


def database_conninfo(refresh: bool = False) -> str:
    """The ledger's connection string: a URL locally, the managed secret (cached) on AWS.

    From the secret, TLS is `verify-full` against the RDS CA bundle in the layer; locally the
    URL says what it wants (the disposable PostgreSQL has no TLS).

    `refresh` fetches the secret again, past the cache: the ledger asks for it after a failed
    login, since a rotation changes the password before the cached copy expires.
    """
    return conninfo_from(settings(), refresh)


def conninfo_from(current: Settings, refresh: bool = False) -> str:
    """`database_conninfo` for the given settings (the operator API's own, for one)."""
    if current.database_url is not None:
        return current.database_url.get_secret_value()
    assert current.database_secret_arn is not None  # the settings model guarantees one
    secret: Any = parameters.get_secret(
        current.database_secret_arn,
        transform="json",
        max_age=current.database_secret_max_age_seconds,
        force_fetch=refresh,
    )
    return secret_conninfo(
        secret,
        host=current.database_host,
        port=current.database_port,
        connect_timeout_seconds=DATABASE_CONNECT_TIMEOUT_SECONDS,
    )


@lru_cache(maxsize=1)
def ledger() -> Ledger:
    current = settings()
    return Ledger(
        database_conninfo,
        prepare_threshold=current.database_prepare_threshold,
        wake=wake_store_of(current),
        may_pause=current.ledger_may_pause,
    )


def ends_ledger_run[**P, R](handler: Callable[P, R]) -> Callable[P, R]:
    """A ledger function's handler: when it ends, returning or raising, its ledger ends the
    run (sweeper.ledger.wake_refresh.end_run: on a cluster that may pause, the wake item
    refreshed and the session closed). A run that never reached the ledger builds none."""

    @functools.wraps(handler)
    def run(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return handler(*args, **kwargs)
        finally:
            if ledger.cache_info().currsize:
                end_run(ledger(), settings().policy.name, utcnow())

    return run


def wake_store_of(current: Settings) -> DynamoWakeStore | None:
    """The wake items of the deployment (sweeper.ledger.wake), when it keeps them."""
    if not current.wake_table:
        return None
    return DynamoWakeStore(dynamodb_client(), current.wake_table)


@lru_cache(maxsize=1)
def sqs_client() -> SQSClient:
    return boto3.client("sqs")  # AWS_ENDPOINT_URL points it at moto locally


@lru_cache(maxsize=1)
def publisher() -> SqsPublisher:
    return SqsPublisher(sqs_client(), settings().require("queue_url"))


@lru_cache(maxsize=1)
def dynamodb_client() -> DynamoDBClient:
    return boto3.client("dynamodb")


@lru_cache(maxsize=1)
def s3_client() -> Any:
    """For discovery's s3 source (its ListsObjects protocol: ListObjectsV2 only)."""
    return boto3.client("s3")


@lru_cache(maxsize=1)
def limiter() -> DynamoLimiter:
    """The shared limiter and gate."""
    return DynamoLimiter(dynamodb_client(), settings().require("limiter_table"))


@lru_cache(maxsize=1)
def consumer_limiter() -> Limiter:
    """What a consumer asks for slots: the shared limiter (the layer holds no other; the rate
    benchmark puts its baselines here on the local stack, sweeper_bench.baseline_consumer)."""
    return limiter()


@lru_cache(maxsize=1)
def visibility() -> SqsVisibility:
    return SqsVisibility(sqs_client(), settings().require("queue_url"))


class SecretsOnFirstRead(parameters.SecretsProvider):
    """Powertools' SecretsProvider (its cache, its reads) whose Secrets Manager client is built
    on the first read, from the default session, rather than with a session of its own when the
    action is built: an action without a secret never pays for one, and one with a secret pays
    once, when it first needs it. Safe to share between a batch's threads."""

    def __init__(self) -> None:
        BaseProvider.__init__(self)  # type: ignore[no-untyped-call]  # the cache only, no client
        self._client_lock = threading.Lock()
        self._has_client = False

    def _get(self, name: str, **sdk_options: Any) -> str | bytes:
        with self._client_lock:
            if not self._has_client:
                self.client = boto3.client("secretsmanager")
                self._has_client = True
        return super()._get(name, **sdk_options)


@lru_cache(maxsize=1)
def action() -> Action:
    """The policy's action, of whatever kind it names (its module builds it); secrets it reads
    go through the Powertools cache, re-read within `vendor_token_max_age_seconds`."""
    current = settings()
    return current.policy.action.build(
        ActionContext(
            secrets=SecretsOnFirstRead(),
            secret_max_age_seconds=current.vendor_token_max_age_seconds,
            spans=observability.vendor_spans() or no_spans,
            rehearsal=current.rehearsal,
            reader=reader_for(current.policy),  # a limit's `learn`: its answers are read
        )
    )


@lru_cache(maxsize=1)
def idempotency_config() -> IdempotencyConfig:
    """The consumer's idempotency config (consumer/idempotency.py), one per cold start: the
    handler registers its Lambda context on this same instance."""
    return job_idempotency_config(settings().idempotency_expiry_seconds)


@lru_cache(maxsize=1)
def idempotent() -> Idempotent:
    """Powertools idempotency over DynamoDB (consumer/idempotency.py), built once, on the
    function's one DynamoDB client (the limiter's)."""
    current = settings()
    return dynamodb_idempotent(
        current.require("idempotency_table"),
        current.policy.name,
        idempotency_config(),
        client=dynamodb_client(),
    )


@lru_cache(maxsize=1)
def guarded_call() -> GuardedCall:
    return guard_with_idempotency(action().perform, idempotent())


#: The webhook's signing secret is fetched again at most this often (a rotation takes effect
#: within it).
WEBHOOK_SECRET_MAX_AGE_SECONDS = 300


@lru_cache(maxsize=1)
def webhook_secrets() -> RotatingSecret:
    """The policy's webhook signing secrets (current, and previous during a rotation), cached."""
    return RotatingSecret(
        settings().require("webhook_secret_arn"),
        WEBHOOK_SECRET_MAX_AGE_SECONDS,
        current=parameters.SecretsProvider(),
        previous=parameters.SecretsProvider(),
    )


@lru_cache(maxsize=1)
def replay_markers() -> DynamoReplayMarkers:
    return DynamoReplayMarkers(dynamodb_client(), settings().require("replay_table"))


@lru_cache(maxsize=1)
def intake_publisher() -> SqsPublisher:
    return SqsPublisher(sqs_client(), settings().require("intake_queue_url"))


@lru_cache(maxsize=1)
def intake_backlog() -> QueueBacklog:
    return QueueBacklog(sqs_client(), settings().require("intake_queue_url"))


@lru_cache(maxsize=1)
def intake_visibility() -> SqsVisibility:
    """The intake function's: what met an unreachable ledger returns to the intake queue soon."""
    return SqsVisibility(sqs_client(), settings().require("intake_queue_url"))


def webhook_deps(metrics: MetricSink) -> WebhookDeps:
    return WebhookDeps(
        policy=settings().policy,
        secrets=webhook_secrets(),
        replay=replay_markers(),
        publisher=intake_publisher(),
        backlog=intake_backlog(),
        clock=utcnow,
        metrics=metrics,
    )


def producer_closed_scopes() -> ClosedScopes:
    """The producer's view of closed gates; none when the function has no limiter table."""
    current = settings()
    if not current.limiter_table:
        return no_closed_scopes
    table = current.limiter_table

    def read() -> set[str]:
        return closed_scopes(dynamodb_client(), table, time.time())

    return read


@lru_cache(maxsize=1)
def batch_processor() -> ParallelBatchProcessor:
    """The consumer's batch processor: `consumer.parallel_calls` records at a time."""
    return ParallelBatchProcessor(settings().policy.consumer.parallel_calls)


def remaining_budget(context: Any, budget_seconds: float) -> Callable[[], float]:
    """Seconds left: the smaller of the configured budget and Lambda's remaining time."""
    started = time.monotonic()

    def remaining() -> float:
        own = budget_seconds - (time.monotonic() - started)
        lam = float(context.get_remaining_time_in_millis()) / 1000.0 - LAMBDA_SAFETY_MARGIN_SECONDS
        return min(own, lam)

    return remaining


def call_timeout(context: Any) -> Callable[[], float | None]:
    """The external call's total timeout: always shorter than what Lambda has left."""
    longest = settings().policy.action.call_seconds

    def timeout() -> float:
        left = float(context.get_remaining_time_in_millis()) / 1000.0 - LAMBDA_SAFETY_MARGIN_SECONDS
        return max(0.1, min(longest, left))

    return timeout


def reset() -> None:
    """Forget every cached adapter and the settings (a new "cold start"; for tests)."""
    if ledger.cache_info().currsize:
        ledger().close()
    for cached in (
        ledger,
        sqs_client,
        publisher,
        dynamodb_client,
        s3_client,
        limiter,
        consumer_limiter,
        visibility,
        action,
        idempotency_config,
        idempotent,
        guarded_call,
        webhook_secrets,
        replay_markers,
        intake_publisher,
        intake_backlog,
        intake_visibility,
        batch_processor,
    ):
        cached.cache_clear()
    load_settings.cache_clear()

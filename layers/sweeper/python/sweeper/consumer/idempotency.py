"""Idempotency for the consumer's external call: the whole of sweeper's Powertools assembly.

The effect is made idempotent twice over: the ledger is read once per batch (an already settled
job is acknowledged without a call, see batch.py), and the call runs inside Powertools
idempotency keyed by the operation key, which the vendor also receives as its `Idempotency-Key`.
The named gap: the vendor may accept and the process die before the ledger commit; the
redelivery then reuses the same key, gets the stored (or the vendor's replayed) result, and
commits it (tests/integration/test_consumer.py drills both halves). Here are the config, the
DynamoDB persistence layer and the guard that stores only settled outcomes; runtime.py caches
what they build once per cold start, and the consumer handler registers its Lambda context on
that cached config.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from aws_lambda_powertools.utilities.idempotency import (
    DynamoDBPersistenceLayer,
    IdempotencyConfig,
    idempotent_function,
)
from aws_lambda_powertools.utilities.idempotency.serialization.pydantic import PydanticSerializer

from sweeper.errors import RetryableActionError
from sweeper.models import ActionCall, ActionResult
from sweeper.vendor_reading import VendorReading

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

#: Called inside the guarded call right before the request is sent: waits for the rate slot
#: (or raises Deferred) and returns the call's timeout. Taking the slot there, after the
#: idempotency record is written, keeps the gap between slot and send to a minimum.
Prepare = Callable[[], float | None]
Ended = Callable[[float | None, VendorReading | None], None]  # when it left, what it learned
#: The guarded call: runs the action inside idempotency; raises RetryableActionError for an
#: outcome that settles nothing (so the idempotency record is released, not stored).
GuardedCall = Callable[[ActionCall, Prepare], ActionResult]


class Attempt:
    """A `Prepare` that also hears when the call attempt ended: `ended` runs as soon as the
    action returned or raised (its answer, a failure, its read timeout over), before the
    idempotency record is completed or released and before the ledger's write, with when the
    request had left (`ActionResult.request_sent_at`; None when the action raised or cannot
    tell). What was held only for the request (a concurrency lease, consumer/delivery.py) is
    freed there: the vendor's calls in flight are the requests, not sweeper's bookkeeping after
    them. Never earlier: a call that timed out on our side may still be at the vendor until the
    action's timeout ended, and the action returns only then."""

    __slots__ = ("_ended", "_prepare")

    def __init__(self, prepare: Prepare, ended: Ended) -> None:
        self._prepare = prepare
        self._ended = ended

    def __call__(self) -> float | None:
        return self._prepare()

    def ended(self, request_sent_at: float | None, reading: VendorReading | None = None) -> None:
        self._ended(request_sent_at, reading)


#: What `dynamodb_idempotent` returns: wraps a call in Powertools idempotency.
Idempotent = Callable[[Callable[..., ActionResult]], Callable[..., ActionResult]]


def job_idempotency_config(expires_after_seconds: int) -> IdempotencyConfig:
    """The idempotency config of the consumer's call (build it once; see runtime.py)."""
    return IdempotencyConfig(
        # The operation key (plus the retry round after an operator retry, see
        # models.LedgerTarget.idempotency_key), taken from the ledger row: stable across
        # redeliveries and redrives, unlike the messageId.
        event_key_jmespath="idempotency_key",
        raise_on_no_idempotency_key=True,
        expires_after_seconds=expires_after_seconds,
    )


def idempotency_key_prefix(policy_name: str) -> str:
    """The policy's own start of every idempotency record's key (Powertools writes
    `PREFIX#HASH`): what the consumer's role is confined to (`dynamodb:LeadingKeys`)."""
    return f"sweeper:{policy_name}"


def dynamodb_idempotent(
    table_name: str,
    policy_name: str,
    config: IdempotencyConfig,
    client: DynamoDBClient | None = None,
) -> Idempotent:
    """Powertools idempotency over DynamoDB, keyed by the job's operation key.

    `client`: the function's one DynamoDB client (the limiter's). Without it Powertools builds a
    boto3 session and a client of its own, in the batch's first invocation: the costliest part of
    a consumer's first batch on a busy CPU (docs/decisions.md, 2026-12-02).
    """
    store = DynamoDBPersistenceLayer(table_name=table_name, boto3_client=client)

    def wrap(fn: Callable[..., ActionResult]) -> Callable[..., ActionResult]:
        wrapped: Callable[..., ActionResult] = idempotent_function(
            fn,
            data_keyword_argument="job",
            persistence_store=store,
            config=config,
            output_serializer=PydanticSerializer(model=ActionResult),
            # A fixed prefix: the default is the function's import path, which a refactor
            # would change, silently forgetting every stored record.
            key_prefix=idempotency_key_prefix(policy_name),
        )
        return wrapped

    return wrap


def guard_with_idempotency(
    perform: Callable[[ActionCall, float | None], ActionResult],
    idempotent: Callable[[Callable[..., ActionResult]], Callable[..., ActionResult]],
) -> GuardedCall:
    """Wrap an action so only settled outcomes are stored as completed idempotency records."""

    def call(job: ActionCall, prepare: Prepare) -> ActionResult:
        timeout = prepare()
        result: ActionResult | None = None
        try:
            result = perform(job, timeout)
        finally:
            if isinstance(prepare, Attempt):
                # the request is over, with its answer's reading: before the record's completion
                prepare.ended(*(result.request_sent_at, result.reading) if result else (None,) * 2)
        if not result.outcome.settled:
            raise RetryableActionError(
                job.key,
                result.outcome.value,
                result.status_code,
                result.code,
                retry_after_seconds=result.retry_after_seconds,
                limit_value=result.limit_value,
                reading=result.reading,
            )
        return result

    wrapped = idempotent(call)
    return lambda job, prepare: wrapped(job=job, prepare=prepare)

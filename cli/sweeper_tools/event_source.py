"""What Lambda accepts for an SQS event source mapping, checked in one place.

The CDK app checks a policy's consumer with it before synthesising, and the local event source
checks its own mapping with it (against the queue's real visibility timeout) before it polls, so
a configuration that CreateEventSourceMapping would refuse is refused here too, with the reason.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sweeper.errors import ConfigError
from sweeper.limits import (
    LAMBDA_MAX_TIMEOUT_SECONDS,
    LAMBDA_MIN_TIMEOUT_SECONDS,
    MAX_BATCH_SIZE,
    MAX_BATCH_SIZE_WITHOUT_WINDOW,
    MAX_BATCHING_WINDOW_SECONDS,
    MAX_MAXIMUM_CONCURRENCY,
    MIN_MAXIMUM_CONCURRENCY,
    SQS_MAX_VISIBILITY_TIMEOUT_SECONDS,
)

if TYPE_CHECKING:
    from sweeper.config import Policy


def check_sqs_event_source(
    *,
    batch_size: int,
    batch_window_seconds: int,
    max_concurrency: int,
    function_timeout_seconds: int,
    visibility_timeout_seconds: int,
) -> None:
    """Raise ConfigError, naming the rule, for a mapping Lambda would refuse to create."""
    problems: list[str] = []
    if not LAMBDA_MIN_TIMEOUT_SECONDS <= function_timeout_seconds <= LAMBDA_MAX_TIMEOUT_SECONDS:
        problems.append(
            f"function timeout {function_timeout_seconds} s is outside Lambda's "
            f"{LAMBDA_MIN_TIMEOUT_SECONDS}-{LAMBDA_MAX_TIMEOUT_SECONDS} s"
        )
    if not 0 <= batch_window_seconds <= MAX_BATCHING_WINDOW_SECONDS:
        problems.append(
            f"batching window {batch_window_seconds} s is outside 0-{MAX_BATCHING_WINDOW_SECONDS} s"
        )
    if not 1 <= batch_size <= MAX_BATCH_SIZE:
        problems.append(f"batch size {batch_size} is outside 1-{MAX_BATCH_SIZE}")
    elif batch_size > MAX_BATCH_SIZE_WITHOUT_WINDOW and batch_window_seconds < 1:
        problems.append(
            f"batch size {batch_size} is above {MAX_BATCH_SIZE_WITHOUT_WINDOW} without a "
            "batching window of at least 1 s"
        )
    if not MIN_MAXIMUM_CONCURRENCY <= max_concurrency <= MAX_MAXIMUM_CONCURRENCY:
        problems.append(
            f"maximum concurrency {max_concurrency} is outside "
            f"{MIN_MAXIMUM_CONCURRENCY}-{MAX_MAXIMUM_CONCURRENCY}"
        )
    if not 0 <= visibility_timeout_seconds <= SQS_MAX_VISIBILITY_TIMEOUT_SECONDS:
        problems.append(
            f"queue visibility timeout {visibility_timeout_seconds} s is outside SQS's "
            f"0-{SQS_MAX_VISIBILITY_TIMEOUT_SECONDS} s"
        )
    elif visibility_timeout_seconds < function_timeout_seconds:
        problems.append(
            f"queue visibility timeout {visibility_timeout_seconds} s is less than the function "
            f"timeout {function_timeout_seconds} s"
        )
    if problems:
        raise ConfigError(
            "Lambda would refuse this SQS event source mapping: " + "; ".join(problems)
        )


def check_policy_event_source(
    policy: Policy, visibility_timeout_seconds: int | None = None
) -> None:
    """Check a policy's consumer mapping against its work queue's visibility timeout (by
    default the one the CDK app gives it); the ConfigError names the policy."""
    consumer = policy.consumer
    try:
        check_sqs_event_source(
            batch_size=consumer.batch_size,
            batch_window_seconds=consumer.batch_window_seconds,
            max_concurrency=consumer.max_concurrency,
            function_timeout_seconds=consumer.timeout_seconds,
            visibility_timeout_seconds=(
                consumer.visibility_timeout_seconds
                if visibility_timeout_seconds is None
                else visibility_timeout_seconds
            ),
        )
    except ConfigError as exc:
        raise ConfigError(f"policy {policy.name}: {exc}") from exc

"""The platform's limits (Lambda, SQS) that the policy models, the event source check, the
queue adapters and the CDK app all hold a configuration to: the ground floor, importing nothing
of sweeper.
"""

from __future__ import annotations

#: SQS's longest visibility timeout.
SQS_MAX_VISIBILITY_TIMEOUT_SECONDS = 43_200
#: Lambda's longest invocation, and its shortest.
LAMBDA_MIN_TIMEOUT_SECONDS = 1
LAMBDA_MAX_TIMEOUT_SECONDS = 900
#: Batch sizes of a standard queue's mapping; above the first, a batching window is required.
MAX_BATCH_SIZE_WITHOUT_WINDOW = 10
MAX_BATCH_SIZE = 10_000
MAX_BATCHING_WINDOW_SECONDS = 300
#: The range of an event source mapping's ScalingConfig.MaximumConcurrency.
MIN_MAXIMUM_CONCURRENCY = 2
MAX_MAXIMUM_CONCURRENCY = 1000
#: AWS's guidance for the queue: six function timeouts plus the batching window.
VISIBILITY_TIMEOUTS_PER_FUNCTION_TIMEOUT = 6


def recommended_visibility_timeout_seconds(
    function_timeout_seconds: int, batch_window_seconds: int
) -> int:
    """Six function timeouts plus the batching window (what the CDK app gives the work queue)."""
    return (
        VISIBILITY_TIMEOUTS_PER_FUNCTION_TIMEOUT * function_timeout_seconds + batch_window_seconds
    )
